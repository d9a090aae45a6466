"""The static checks' AST walk (the parent): which rule of ``static_rules`` a candidate's
Python breaks, and where. ``static_checks`` (public) runs it and words the findings."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from .static_rules import (
    ALLOWED_NAMESPACES,
    ALLOWED_TORCH,
    COMPUTE_METHODS,
    FALLBACK_HINT,
    FORBIDDEN_ATTRIBUTES,
    FORBIDDEN_CALLS,
    FORBIDDEN_IMPORTS,
    MEMO_DECORATORS,
    STREAM_SOURCE_MARKERS,
)


class Checker:
    def __init__(self, tree: ast.Module, allowed_ops: frozenset[str]) -> None:
        self.tree = tree
        self.allowed_ops = allowed_ops
        self.findings: list[tuple[str, int, str]] = []  # (code, line, reason)
        self.aliases: dict[str, str] = {}  # local name -> dotted module / object path
        self.module_containers: set[str] = set()
        self.defined_names: set[str] = set()
        self.super_of_model: set[int] = set()  # ids of the Model in super(Model, self)

    def add(self, code: str, node: ast.AST, reason: str) -> None:
        self.findings.append((code, getattr(node, "lineno", 1), reason))

    # ------------------------------------------------------------------------------ driver
    def run(self) -> None:
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                self.defined_names.add(node.name)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.defined_names.add(target.id)
                        if _is_container(node.value):
                            self.module_containers.add(target.id)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self.defined_names.add(node.target.id)
                if node.value is not None and _is_container(node.value):
                    self.module_containers.add(node.target.id)
        for any_node in ast.walk(self.tree):
            if isinstance(any_node, ast.Import | ast.ImportFrom):
                self.visit_import(any_node)
        for any_node in ast.walk(self.tree):
            self.visit_anywhere(any_node)
        reachable = _reachable_functions(self.tree)
        for func, in_class in _functions(self.tree):
            if not in_class and func.name not in reachable:
                # Never called by the code the candidate runs (KernelBench-style get_inputs /
                # get_init_inputs copied from the prompt: the harness uses the task's own).
                # Whole-module rules above still apply to it.
                continue
            if isinstance(func, ast.AsyncFunctionDef):
                self.add("concurrency", func, "async functions are not allowed in a candidate")
            self.visit_decorators(func)
            if func.name == "__init__" and in_class:
                continue  # construction: layers, parameters, buffers
            self.visit_forward_path(func, in_class)
        for any_node in ast.walk(self.tree):
            if isinstance(any_node, ast.ClassDef):
                self.visit_class(any_node)

    # ----------------------------------------------------------------------------- imports
    def visit_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                self.aliases[alias.asname or root] = alias.name if alias.asname else root
                self.check_module_name(alias.name, node)
        else:
            module = node.module or ""
            if node.level:  # relative import inside a work directory: its own helper files
                return
            self.check_module_name(module, node)
            for alias in node.names:
                full = f"{module}.{alias.name}"
                self.aliases[alias.asname or alias.name] = full
                self.check_module_name(full, node)
                if alias.name == "Model" or module.split(".")[0] in (
                    "cuda_agent_task",
                    "reference",
                ):
                    self.add(
                        "reference_model",
                        node,
                        f"imports {alias.name} from {module}: the reference model may not be "
                        "used by the candidate",
                    )

    def check_module_name(self, name: str, node: ast.AST) -> None:
        root = name.split(".")[0]
        if root in FORBIDDEN_IMPORTS:
            code = FORBIDDEN_IMPORTS[root]
            self.add(code, node, f"imports {root}: {_WHY[code]}")
        if root in ("cuda_agent_task", "reference"):
            self.add("reference_model", node, f"imports {name}: the reference may not be used")
        if name.startswith("cuda_agent.kernel_sandbox") and not name.startswith(
            "cuda_agent.kernel_sandbox.launch"
        ):
            self.add(
                "introspection",
                node,
                f"imports {name}: only cuda_agent.kernel_sandbox.launch is for candidates",
            )

    def resolve(self, node: ast.expr) -> str | None:
        """The dotted path an expression names (``F.relu`` -> ``torch.nn.functional.relu``)."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.aliases.get(node.id)
        if base is None:
            return None
        return ".".join([base, *reversed(parts)])

    # ------------------------------------------------------------------- whole-module rules
    def visit_anywhere(self, node: ast.AST) -> None:
        if (  # (ast.walk visits this call before the name inside it)
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "super"
            and node.args
            and isinstance(node.args[0], ast.Name)
        ):
            self.super_of_model.add(id(node.args[0]))
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            code = FORBIDDEN_ATTRIBUTES[node.attr]
            path = self.resolve(node) or node.attr
            if code == "file_access" and node.attr in ("remove",) and self.resolve(node) is None:
                return  # list.remove and friends: only module functions are file access
            if (
                code == "side_stream"
                and not path.startswith(("torch", "cupy"))
                and node.attr != "getStreamFromPool"
            ):
                return
            if node.attr == "modules" and not path.startswith("sys"):
                return
            self.add(code, node, f"uses {path}: {_WHY[code]}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name in FORBIDDEN_CALLS and name not in self.defined_names:
                code = FORBIDDEN_CALLS[name]
                self.add(code, node, f"calls {name}(): {_WHY[code]}")
            if (
                name == "getattr"
                and len(node.args) >= 2
                and not isinstance(node.args[1], ast.Constant)
            ):
                self.add("introspection", node, "getattr with a computed name is not allowed")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for t in _flatten_targets(target):
                    if isinstance(t, ast.Attribute):
                        patched = self.resolve(t)
                        if patched is not None:
                            self.add(
                                "patching",
                                t,
                                f"assigns {patched}: patching modules (timers, events, "
                                "synchronize, torch) is not allowed",
                            )
        elif (
            isinstance(node, ast.Name) and node.id == "Model" and "Model" not in self.defined_names
        ):
            if id(node) in self.super_of_model:
                # KernelBench's modules write super(Model, self).__init__(); copied into
                # ModelNew it names the reference (and would raise TypeError besides)
                self.add(
                    "reference_model",
                    node,
                    "super(Model, self) names the reference's class, and ModelNew is not a "
                    "Model: write super().__init__()",
                )
            elif isinstance(node.ctx, ast.Load):
                self.add(
                    "reference_model",
                    node,
                    "refers to Model, the reference: compute with your own kernels",
                )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for marker in STREAM_SOURCE_MARKERS:
                if marker in node.value:
                    self.add(
                        "side_stream",
                        node,
                        f"the kernel source uses {marker}: launch on the current stream "
                        "(work on other streams escapes the timer)",
                    )

    def visit_class(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            if (
                isinstance(base, ast.Name)
                and base.id == "Model"
                and "Model" not in self.defined_names
            ):
                self.add(
                    "reference_model",
                    node,
                    f"class {node.name} subclasses the reference Model; subclass nn.Module",
                )

    def visit_decorators(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for dec in func.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name in MEMO_DECORATORS:
                self.add(
                    "output_cache",
                    dec,
                    f"@{name} on {func.name} memoises results across calls; compute every call",
                )

    # ---------------------------------------------------------------- forward-path rules
    def visit_forward_path(
        self, func: ast.FunctionDef | ast.AsyncFunctionDef, in_class: bool
    ) -> None:
        layers = self.layer_attributes() if in_class else set()
        for node in _walk_body(func):
            if isinstance(node, ast.Try | ast.TryStar):
                self.add("fallback", node, f"try/except in {func.name}: {FALLBACK_HINT}")
            elif isinstance(node, ast.Call):
                self.visit_call(node, func.name, layers)
            elif isinstance(node, ast.Assign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for t in _flatten_targets(target):
                        self.visit_store(t, func.name)

    def visit_call(self, node: ast.Call, where: str, layers: set[str]) -> None:
        func = node.func
        path = self.resolve(func)
        if path is not None and path.startswith("torch"):
            name = path.rsplit(".", 1)[-1]
            if path.startswith(ALLOWED_NAMESPACES) or name in ALLOWED_TORCH:
                return
            if name in self.allowed_ops:
                return
            self.add(
                "torch_compute",
                node,
                f"{where} calls {path}: compute it in your own kernel (PyTorch may only "
                "allocate, view, reshape and copy tensors here)",
            )
            return
        if isinstance(func, ast.Attribute):
            # self.layer(x) where layer is an nn layer built in __init__
            if (
                isinstance(func.value, ast.Name)
                and func.value.id == "self"
                and func.attr in layers
                and func.attr not in self.allowed_ops
            ):
                self.add(
                    "torch_compute",
                    node,
                    f"{where} calls the PyTorch layer self.{func.attr}: compute it in your own "
                    "kernel and use the layer only to hold the weights",
                )
            elif (
                func.attr in COMPUTE_METHODS and path is None and func.attr not in self.allowed_ops
            ):
                if isinstance(func.value, ast.Name) and func.value.id in self.aliases:
                    return  # a function of some other imported module (math.exp, ...)
                self.add(
                    "torch_compute",
                    node,
                    f"{where} calls .{func.attr}() on a tensor: compute it in your own kernel",
                )
            elif (
                func.attr in ("append", "update", "setdefault", "add", "extend", "insert")
                and isinstance(func.value, ast.Name)
                and func.value.id in self.module_containers
            ):
                self.add(
                    "output_cache",
                    node,
                    f"{where} fills the module-level {func.value.id}: results may not be "
                    "kept across calls",
                )

    def visit_store(self, target: ast.expr, where: str) -> None:
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            if target.value.id in self.module_containers:
                self.add(
                    "output_cache",
                    target,
                    f"{where} stores into the module-level {target.value.id}: results may not "
                    "be kept across calls",
                )
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and where == "forward"
        ):
            self.add(
                "output_cache",
                target,
                f"forward stores self.{target.attr}: state kept across calls is not allowed; "
                "allocate what you need in every call",
            )

    def layer_attributes(self) -> set[str]:
        """``self.X`` assigned an ``nn`` layer (``torch.nn.Linear(...)``) in any ``__init__``."""
        names: set[str] = set()
        for func, in_class in _functions(self.tree):
            if func.name != "__init__" or not in_class:
                continue
            for node in _walk_body(func):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    path = self.resolve(node.value.func) or ""
                    if path.startswith("torch.nn.") and not path.startswith(ALLOWED_NAMESPACES):
                        for t in node.targets:
                            if (
                                isinstance(t, ast.Attribute)
                                and isinstance(t.value, ast.Name)
                                and t.value.id == "self"
                            ):
                                names.add(t.attr)
        return names


_WHY = {
    "concurrency": "threads, processes and async work escape the timer",
    "library_compute": "compute libraries may not do the work; compute it in your own kernel",
    "file_access": "candidates may not touch files, the environment or processes",
    "introspection": "inspecting or rewriting the interpreter is not allowed",
    "patching": "patching modules (timers, events, synchronize, torch) is not allowed",
    "side_stream": "launch on the current stream; work on other streams escapes the timer",
}


def _is_container(value: ast.expr) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in ("dict", "list", "set", "OrderedDict", "defaultdict", "deque")
    return False


def _flatten_targets(target: ast.expr) -> Iterator[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        for elt in target.elts:
            yield from _flatten_targets(elt)
    elif isinstance(target, ast.Starred):
        yield from _flatten_targets(target.value)
    else:
        yield target


def _functions(
    tree: ast.Module,
) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Every function in the module, with whether it is a method."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield item, True
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node, False


def _reachable_functions(tree: ast.Module) -> set[str]:
    """Module-level functions the candidate's code can reach: named anywhere outside the
    module-level function bodies (classes, module statements), decorated (a decorator runs at
    import), or named by a reachable function; a fixpoint over names, so aliases count."""
    bodies = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }

    def names(nodes: Iterable[ast.AST]) -> set[str]:
        return {
            n.id
            for node in nodes
            for n in ast.walk(node)
            if isinstance(n, ast.Name) and n.id in bodies
        }

    seen = names(node for node in tree.body if node not in bodies.values())
    seen |= {name for name, func in bodies.items() if func.decorator_list}
    frontier = set(seen)
    while frontier:
        func = bodies[frontier.pop()]
        defaults = [d for d in [*func.args.defaults, *func.args.kw_defaults] if d is not None]
        new = names([*func.body, *defaults]) - seen
        seen |= new
        frontier |= new
    return seen


def _walk_body(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    for stmt in func.body:
        yield from ast.walk(stmt)
