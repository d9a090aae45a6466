"""Near-duplicate detection between task modules by normalised-AST similarity.

A task is compared by what it computes, not by how it is spelled. ``normalized_ast`` rewrites a
module so that spelling no longer matters:

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

``similarity(a, b)`` is ``structure * (1 + operators) / 2``:

- ``structure``: the multiset Jaccard index of the token 3-grams of the two normalised token
  sequences (sum of the smaller counts over sum of the larger). It is symmetric by construction,
  1 exactly when the 3-gram multisets match (so for identical normalised ASTs), and with the
  multiset kept as a set of ``(gram, occurrence)`` pairs a pair costs one C-level set
  intersection (microseconds), where ``difflib``'s ratio costs milliseconds and is not
  symmetric.
- ``operators``: the Jaccard index of the two sets of operator names (``operator_names``: the
  lower-case bare names of torch calls and tensor-method calls in the model code, ``relu`` for
  ``torch.relu``, ``F.relu``, ``nn.ReLU`` and ``x.relu()`` alike; 1 when both are empty).
  KernelBench's level-1 problems are a few lines of boilerplate around one operator, so a pure
  sequence measure rates ReLU against LeakyReLU above 0.9 and would call every
  single-operator task a copy of every other. With the factor, modules with no operator in
  common score at most 0.5, and one operator swapped out of three at most 0.75: a different
  operator combination is a different problem, while structure still ranks the candidates.

Upper bound used to skip pairs: ``structure <= min(|A|, |B|) / max(|A|, |B|)`` for multisets of
sizes ``|A|`` and ``|B|``, and ``operators`` is cheap; a pair is only intersected when the bound
can still reach the threshold (or beat the best match so far, in ``nearest``).
"""

from __future__ import annotations

import ast
import builtins
import functools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from cuda_agent.kernel_sandbox import Task

CONTRACT_NAMES = frozenset({"Model", "ModelNew", "get_inputs", "get_init_inputs", "forward"})
_INPUT_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs"})
_BUILTINS = frozenset(dir(builtins))
_NGRAM = 3

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


# ---------------------------------------------------------------------------- module analysis


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
    return {a for a in attrs if not _is_kept_name(a)}


def _is_kept_name(name: str) -> bool:
    return name in CONTRACT_NAMES or (name.startswith("__") and name.endswith("__"))


def _api_chain(node: ast.expr, imports: Mapping[str, str], local: set[str]) -> str | None:
    """``torch.nn.functional.relu`` for ``F.relu`` when ``F`` is an import; else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in imports and node.id not in local:
        return ".".join([imports[node.id], *reversed(parts)])
    return None


def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"source is not valid Python: {exc.msg} (line {exc.lineno})") from exc


@dataclass(frozen=True)
class _Scope:
    imports: Mapping[str, str]
    local: set[str]
    user_attrs: set[str]


def _scope(tree: ast.Module) -> _Scope:
    imports = _import_bindings(tree)
    local = _bound_names(tree)
    return _Scope(imports=imports, local=local, user_attrs=_user_attributes(tree))


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


def _operator_calls(tree: ast.Module, scope: _Scope) -> tuple[set[str], set[str]]:
    """(torch-rooted call names, tensor-method call names), lower-case bare names."""
    torch_ops: set[str] = set()
    method_ops: set[str] = set()
    for root in _model_code(tree):
        for node in ast.walk(root):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            chain = _api_chain(func, scope.imports, scope.local)
            if chain is not None:
                if chain.split(".")[0] == "torch":
                    torch_ops.add(chain.rsplit(".", 1)[-1].lower())
            elif (
                isinstance(func, ast.Attribute)
                and func.attr not in scope.user_attrs
                and not _is_kept_name(func.attr)
                and not (isinstance(func.value, ast.Call) and _is_super(func.value))
            ):
                method_ops.add(func.attr.lower())
    return torch_ops - NOT_OPERATORS, method_ops - NOT_OPERATORS


def _is_super(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "super"


@functools.lru_cache(maxsize=8192)
def _operators(source: str) -> tuple[frozenset[str], frozenset[str]]:
    tree = _parse(source)
    torch_ops, method_ops = _operator_calls(tree, _scope(tree))
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


# ---------------------------------------------------------------------------- normalisation


class _Normaliser(ast.NodeTransformer):
    """Rewrites a parsed module in place into its normalised form (see the module docstring)."""

    def __init__(self, scope: _Scope) -> None:
        self.scope = scope
        self.names: dict[str, str] = {}
        self.attrs: dict[str, str] = {}

    def _name(self, name: str) -> str:
        if _is_kept_name(name) or name not in self.scope.local:
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
        chain = _api_chain(node, self.scope.imports, self.scope.local)
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
    tree = _parse(source)
    normaliser = _Normaliser(_scope(tree))
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


# ---------------------------------------------------------------------------- similarity


@dataclass(frozen=True)
class Fingerprint:
    """What similarity compares, computed once per source: 3-gram multiset and operator set.

    ``grams`` holds one entry per 3-gram occurrence (``hash((gram, k))`` for the k-th), so
    the multiset Jaccard index is a plain set intersection.
    """

    grams: frozenset[int]
    operators: frozenset[str]

    @property
    def size(self) -> int:
        return len(self.grams)


@functools.lru_cache(maxsize=8192)
def fingerprint(source: str) -> Fingerprint:
    """The ``Fingerprint`` of a module's source (cached by source text)."""
    tokens = normalized_ast(source)
    n = min(_NGRAM, len(tokens))
    seen: Counter[tuple[str, ...]] = Counter()
    grams: set[int] = set()
    for i in range(len(tokens) - n + 1):
        gram = tokens[i : i + n]
        grams.add(hash((gram, seen[gram])))
        seen[gram] += 1
    return Fingerprint(grams=frozenset(grams), operators=operator_names(source))


def _operator_jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _upper_bound(a: Fingerprint, b: Fingerprint) -> float:
    """A cheap bound on ``similarity``: size ratio of the multisets times the operator term."""
    small, large = sorted((a.size, b.size))
    structure = 1.0 if large == 0 else small / large
    return structure * (1.0 + _operator_jaccard(a.operators, b.operators)) / 2.0


def _similarity(a: Fingerprint, b: Fingerprint) -> float:
    operators = _operator_jaccard(a.operators, b.operators)
    common = len(a.grams & b.grams)
    union = a.size + b.size - common
    structure = 1.0 if union == 0 else common / union
    return structure * (1.0 + operators) / 2.0


def _fingerprint_of(item: str | Task | Fingerprint) -> Fingerprint:
    if isinstance(item, Fingerprint):
        return item
    return fingerprint(item.source if isinstance(item, Task) else item)


def similarity(a: str | Task | Fingerprint, b: str | Task | Fingerprint) -> float:
    """Similarity in [0, 1] of two modules: ``structure * (1 + operators) / 2`` (module doc).

    1 for identical normalised ASTs, unchanged by renaming identifiers, symmetric.
    """
    return _similarity(_fingerprint_of(a), _fingerprint_of(b))


class SimilarityIndex:
    """Named fingerprints of a corpus (for example KernelBench), built once, queried often."""

    def __init__(self, items: Iterable[tuple[str, Fingerprint]]) -> None:
        self._items = tuple(items)

    @classmethod
    def build(cls, corpus: Iterable[Task] | Mapping[str, str]) -> SimilarityIndex:
        """Index tasks (or a name -> source mapping)."""
        if isinstance(corpus, Mapping):
            return cls((name, fingerprint(src)) for name, src in corpus.items())
        return cls((task.name, fingerprint(task.source)) for task in corpus)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, name: str, item: str | Task | Fingerprint) -> SimilarityIndex:
        """A new index with one more entry (this one is unchanged)."""
        return SimilarityIndex((*self._items, (name, _fingerprint_of(item))))

    def nearest(self, item: str | Task | Fingerprint) -> tuple[str | None, float]:
        """The most similar entry and its score; ``(None, 0.0)`` for an empty index.

        Entries are tried in decreasing order of the cheap bound (then index order) and the
        search stops once the bound cannot beat the best score; of equal scores the first
        tried wins.
        """
        query = _fingerprint_of(item)
        bounds = sorted(
            ((_upper_bound(query, fp), i) for i, (_, fp) in enumerate(self._items)),
            key=lambda pair: (-pair[0], pair[1]),
        )
        best_name: str | None = None
        best_score = -1.0
        for bound, i in bounds:
            if bound <= best_score:
                break  # sorted by bound: nothing left can beat the best
            name, fp = self._items[i]
            score = _similarity(query, fp)
            if score > best_score:
                best_name, best_score = name, score
        return best_name, max(best_score, 0.0)

    def first_above(
        self, item: str | Task | Fingerprint, threshold: float
    ) -> tuple[str, float] | None:
        """The first entry (in index order) whose similarity reaches ``threshold``, or ``None``."""
        query = _fingerprint_of(item)
        for name, fp in self._items:
            if _upper_bound(query, fp) >= threshold:
                score = _similarity(query, fp)
                if score >= threshold:
                    return name, score
        return None


def nearest(
    task_source: str | Task, corpus: SimilarityIndex | Iterable[Task] | Mapping[str, str]
) -> tuple[str | None, float]:
    """The corpus entry most similar to ``task_source`` and its score (``(None, 0.0)`` if empty).

    Pass a ``SimilarityIndex`` when querying one corpus many times.
    """
    index = corpus if isinstance(corpus, SimilarityIndex) else SimilarityIndex.build(corpus)
    return index.nearest(task_source)


@dataclass(frozen=True)
class Dropped:
    """A task left out by ``decontaminate`` or ``deduplicate``, with the match that caused it."""

    task: Task
    match: str
    score: float
    threshold: float

    @property
    def reason(self) -> str:
        return (
            f"{self.task.name!r} is {self.score:.3f} similar to {self.match!r} "
            f"(threshold {self.threshold})"
        )


def _check_threshold(threshold: float) -> None:
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")


def decontaminate(
    tasks: Iterable[Task],
    against: SimilarityIndex | Iterable[Task] | Mapping[str, str],
    threshold: float = 0.9,
) -> tuple[list[Task], list[Dropped]]:
    """Split ``tasks`` into those below ``threshold`` similarity to every task of ``against``
    and those at or above it (each with its nearest match), keeping input order."""
    _check_threshold(threshold)
    index = against if isinstance(against, SimilarityIndex) else SimilarityIndex.build(against)
    kept: list[Task] = []
    dropped: list[Dropped] = []
    for task in tasks:
        name, score = index.nearest(task)
        if name is not None and score >= threshold:
            dropped.append(Dropped(task=task, match=name, score=score, threshold=threshold))
        else:
            kept.append(task)
    return kept, dropped


def deduplicate(tasks: Iterable[Task], threshold: float = 0.9) -> tuple[list[Task], list[Dropped]]:
    """Keep the first of each group of near-duplicates (similarity >= ``threshold``).

    A task is dropped when it is that similar to a task already kept, so the result does not
    depend on tasks that were themselves dropped.
    """
    _check_threshold(threshold)
    kept: list[Task] = []
    dropped: list[Dropped] = []
    index = SimilarityIndex(())
    for task in tasks:
        fp = fingerprint(task.source)
        hit = index.first_above(fp, threshold)
        if hit is None:
            kept.append(task)
            index = index.add(task.name, fp)
        else:
            dropped.append(Dropped(task=task, match=hit[0], score=hit[1], threshold=threshold))
    return kept, dropped
