"""A task module rewritten so that spelling no longer matters: ``normalized_ast``.

A task is compared by what it computes, not by how it is spelled (``similarity.py``). The
rules:

- docstrings, other bare string statements, type annotations and import statements go;
- names bound by an import are resolved to their full dotted path and kept, so ``F.relu``,
  ``nn.functional.relu`` and ``torch.nn.functional.relu`` all read ``torch.nn.functional.relu``:
  the API chain is what the operator is;
- every identifier the module itself binds (variables, arguments, function and class names,
  keyword arguments of calls to its own functions) becomes ``n0, n1, ...`` and every attribute
  name it assigns or defines as a method (``self.conv``, ``self.helper``) becomes ``a0, a1, ...``,
  numbered in order of first appearance. Two numberings, so that renaming a variable never
  shifts the attribute placeholders and vice versa;
- kept as they are: the KernelBench contract names (``Model``, ``ModelNew``, ``get_inputs``,
  ``get_init_inputs``, ``forward``), dunder names, builtins the module never rebinds, and
  attributes it never assigns (``x.view``, ``self.conv.weight``: those belong to torch);
- numbers become ``NUM``, strings ``STR``; ``True``, ``False`` and ``None`` stay (``bias=False``
  changes the problem).

What the module binds, imports and assigns is read by ``model_code.py`` (``Scope``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .model_code import CONTRACT_NAMES, Scope, api_chain, is_kept_name, parse_module, scope_of


class _Normaliser(ast.NodeTransformer):
    """Rewrites a parsed module in place into its normalised form (see the module docstring)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.names: dict[str, str] = {}
        self.attrs: dict[str, str] = {}

    def _name(self, name: str) -> str:
        if is_kept_name(name) or name not in self.scope.local:
            return name
        return self.names.setdefault(name, f"n{len(self.names)}")

    def _attr(self, attr: str) -> str:
        if attr not in self.scope.user_attrs:
            return attr
        return self.attrs.setdefault(attr, f"a{len(self.attrs)}")

    def generic_visit(self, node: ast.AST) -> ast.AST:
        # Imports (their names are resolved where used) and bare strings (docstrings) go.
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                kept = [s for s in body if not _is_dropped_statement(s)]
                setattr(node, field, kept or [ast.Pass()])
        return super().generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self._name(node.name)
        node.returns = None
        return self.generic_visit(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        node.name = self._name(node.name)
        node.returns = None
        return self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self._name(node.name)
        return self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._name(node.arg)
        node.annotation = None
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        # ``x: int = 3`` reads as ``x = 3``; a bare annotation says nothing about the operator.
        if node.value is None:
            return ast.Pass()
        return self.generic_visit(ast.Assign(targets=[node.target], value=node.value))

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.scope.imports and node.id not in self.scope.local:
            return ast.Name(id=self.scope.imports[node.id], ctx=node.ctx)
        node.id = self._name(node.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        chain = api_chain(node, self.scope.imports, self.scope.local)
        if chain is not None:
            return ast.Name(id=chain, ctx=node.ctx)
        node.value = self.visit(node.value)
        node.attr = self._attr(node.attr)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        # Keyword names of calls to the module's own code are its argument names: renamed.
        # Keywords of API calls (``dim=``, ``keepdim=``) are torch's: kept.
        own = self._is_own_callable(node.func)
        node.func = self.visit(node.func)
        node.args = [self.visit(a) for a in node.args]
        for keyword in node.keywords:
            if own and keyword.arg is not None:
                keyword.arg = self._name(keyword.arg)
            keyword.value = self.visit(keyword.value)
        return node

    def _is_own_callable(self, func: ast.expr) -> bool:
        if isinstance(func, ast.Name):
            return func.id in self.scope.local or func.id in CONTRACT_NAMES
        return isinstance(func, ast.Attribute) and func.attr in self.scope.user_attrs

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = node.value
        if isinstance(value, bool) or value is None or value is Ellipsis:
            return node
        if isinstance(value, int | float | complex):
            return ast.Name(id="NUM", ctx=ast.Load())
        return ast.Name(id="STR", ctx=ast.Load())

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return ast.Name(id="STR", ctx=ast.Load())


def _is_dropped_statement(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Import | ast.ImportFrom) or (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _normalised_tree(source: str) -> ast.Module:
    tree = parse_module(source)
    normaliser = _Normaliser(scope_of(tree))
    result = normaliser.visit(tree)
    assert isinstance(result, ast.Module)
    return ast.fix_missing_locations(result)


def _tokens(node: ast.AST) -> Iterator[str]:
    """Pre-order tokens: node type names and leaf values; a ``Name`` is only its identifier."""
    if isinstance(node, ast.Name):
        yield node.id
        return
    if isinstance(node, ast.Constant):
        yield repr(node.value)
        return
    if isinstance(node, ast.expr_context):
        return
    yield type(node).__name__
    for _, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            yield from _tokens(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST):
                    yield from _tokens(item)
                elif item is not None:
                    yield str(item)
        elif isinstance(value, str):
            yield value
        elif value is not None and not isinstance(value, int):  # skip ``level``, ``simple``
            yield str(value)


def normalized_ast(source: str) -> tuple[str, ...]:
    """The normalised token sequence of a module (see the module docstring for the rules).

    Equal for two modules that differ only in identifier names, docstrings, annotations,
    literal values or import aliases. Raises ``ValueError`` on source that does not parse.
    """
    return tuple(_tokens(_normalised_tree(source)))


def normalized_source(source: str) -> str:
    """The normalised module as Python text, for reading what ``normalized_ast`` compares."""
    return ast.unparse(_normalised_tree(source))
