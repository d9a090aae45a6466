"""Reading a task module: what it imports, binds and assigns, and the operators it calls.

Two things are built on this reading. ``normalisation.py`` renames what the module binds
itself and resolves what it imports (``Scope``: import bindings, local names, the attribute
names it assigns). The operator names are what a task computes:

- ``torch_call_names``: the lower-case bare names of the torch calls in the model code
  (``torch.*``, ``F.*``, ``nn.*``, import aliases resolved: ``relu`` for ``torch.relu``,
  ``F.relu`` and ``nn.ReLU`` alike); a task family is made of them (``taskset.family_of``);
- ``operator_names``: those plus the tensor-method calls (``x.relu()``, ``x.sum()``), the
  operator term of ``similarity``.

The model code is every class and function of the module but the input makers
(``get_inputs``, ``get_init_inputs``); calls that only build parameters or inputs
(``NOT_OPERATORS``: ``nn.Parameter``, ``torch.randn``, ...) are left out, because nearly every
task makes them.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

CONTRACT_NAMES = frozenset({"Model", "ModelNew", "get_inputs", "get_init_inputs", "forward"})
_INPUT_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs"})

# Calls that build a module or its inputs rather than compute the operator: left out of
# operator names (and so of task families) because nearly every task makes them.
NOT_OPERATORS = frozenset(
    {
        "parameter",
        "buffer",
        "register_buffer",
        "register_parameter",
        "sequential",
        "modulelist",
        "moduledict",
        "parameterlist",
        "parameterdict",
        "rand",
        "randn",
        "randint",
        "rand_like",
        "randn_like",
        "zeros",
        "ones",
        "empty",
        "full",
        "tensor",
        "manual_seed",
    }
)


def _import_bindings(tree: ast.Module) -> dict[str, str]:
    """Local name -> full dotted path, for every import anywhere in the module."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:  # ``import torch.nn`` binds ``torch``
                    root = alias.name.split(".")[0]
                    bound[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _bound_names(tree: ast.Module) -> set[str]:
    """Names the module binds itself (assignments, arguments, defs, loop and ``as`` targets)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.ExceptHandler):
            names.update([node.name] if node.name else [])
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
    return names


def _user_attributes(tree: ast.Module) -> set[str]:
    """Attribute names the module assigns (``self.conv = ...``) or defines as methods."""
    attrs: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
            attrs.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            attrs.update(
                item.name
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return {a for a in attrs if not is_kept_name(a)}


def is_kept_name(name: str) -> bool:
    """A contract name (``Model``, ``forward``, ...) or a dunder: kept as it is, never renamed."""
    return name in CONTRACT_NAMES or (name.startswith("__") and name.endswith("__"))


def api_chain(node: ast.expr, imports: Mapping[str, str], local: set[str]) -> str | None:
    """``torch.nn.functional.relu`` for ``F.relu`` when ``F`` is an import; else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in imports and node.id not in local:
        return ".".join([imports[node.id], *reversed(parts)])
    return None


def parse_module(source: str) -> ast.Module:
    """The module's AST; ``ValueError`` (not ``SyntaxError``) on source that does not parse."""
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"source is not valid Python: {exc.msg} (line {exc.lineno})") from exc


@dataclass(frozen=True)
class Scope:
    """What a module binds: import bindings (local name -> dotted path), the names it binds
    itself, and the attribute names it assigns or defines as methods (contract names aside)."""

    imports: Mapping[str, str]
    local: set[str]
    user_attrs: set[str]


def scope_of(tree: ast.Module) -> Scope:
    """The ``Scope`` of a parsed module."""
    imports = _import_bindings(tree)
    local = _bound_names(tree)
    return Scope(imports=imports, local=local, user_attrs=_user_attributes(tree))


def _model_code(tree: ast.Module) -> Iterator[ast.AST]:
    """The classes and functions that compute the operator: every def except the input makers.

    The brief's unit is ``Model.forward`` and ``Model.__init__``; helper classes and functions
    are included too because larger problems (KernelBench level 3) build ``Model`` from them.
    """
    for node in tree.body:
        if isinstance(node, ast.ClassDef) or (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name not in _INPUT_FUNCTIONS
        ):
            yield node


def _operator_calls(tree: ast.Module, scope: Scope) -> tuple[set[str], set[str]]:
    """(torch-rooted call names, tensor-method call names), lower-case bare names."""
    torch_ops: set[str] = set()
    method_ops: set[str] = set()
    for root in _model_code(tree):
        for node in ast.walk(root):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            chain = api_chain(func, scope.imports, scope.local)
            if chain is not None:
                if chain.split(".")[0] == "torch":
                    torch_ops.add(chain.rsplit(".", 1)[-1].lower())
            elif (
                isinstance(func, ast.Attribute)
                and func.attr not in scope.user_attrs
                and not is_kept_name(func.attr)
                and not (isinstance(func.value, ast.Call) and _is_super(func.value))
            ):
                method_ops.add(func.attr.lower())
    return torch_ops - NOT_OPERATORS, method_ops - NOT_OPERATORS


def _is_super(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "super"


@functools.lru_cache(maxsize=8192)
def _operators(source: str) -> tuple[frozenset[str], frozenset[str]]:
    tree = parse_module(source)
    torch_ops, method_ops = _operator_calls(tree, scope_of(tree))
    return frozenset(torch_ops), frozenset(method_ops)


def torch_call_names(source: str) -> frozenset[str]:
    """Lower-case bare names of the torch calls (``torch.*``, ``F.*``, ``nn.*``) in model code.

    ``nn.Linear`` -> ``linear``, ``F.gelu`` -> ``gelu``; calls that only build parameters or
    inputs (``NOT_OPERATORS``) are left out. This is what a task family is made of.
    """
    return _operators(source)[0]


def operator_names(source: str) -> frozenset[str]:
    """``torch_call_names`` plus tensor-method calls (``x.sum()`` -> ``sum``) in model code."""
    torch_ops, method_ops = _operators(source)
    return torch_ops | method_ops
