"""ARCHITECTURE.md's package boundaries, enforced: who may import whom.

Checked twice: statically (every ``import`` statement in a package's source) and dynamically
(what importing a package alone actually loads, in a fresh interpreter). Within a package, no
two modules import each other (the last section).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernel_sandbox", "reward", "rl_core", "policy", "agent", "data")
ALLOWED_OURS: dict[str, set[str]] = {
    "kernel_sandbox": set(),
    "reward": set(),
    "rl_core": set(),
    "policy": {"rl_core"},  # the entropy of its chunked logits is rl_core's
    "agent": {"kernel_sandbox", "reward", "rl_core"},
    "data": {"kernel_sandbox"},
    "runner": set(PACKAGES),
}
# Third-party modules a package must never load (beyond what its own job needs).
FORBIDDEN_THIRD_PARTY: dict[str, set[str]] = {
    "reward": {"torch", "numpy"},
    "rl_core": {"transformers", "peft", "accelerate"},
    "kernel_sandbox": {"transformers", "peft", "accelerate"},
    "agent": {"transformers", "peft"},
    "data": {"transformers", "peft", "accelerate", "pyarrow"},  # pyarrow only when reading parquet
}


def _source_dir(package: str) -> Path:
    if package == "runner":
        return ROOT / "src" / "cuda_agent" / "runner"
    return ROOT / "packages" / package / "src" / "cuda_agent" / package


def _imported_packages_of_ours(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "cuda_agent" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", [*PACKAGES, "runner"])
def test_static_imports_follow_the_table(package):
    own_files = [
        p for p in _source_dir(package).rglob("*.py") if "builtin" not in p.relative_to(ROOT).parts
    ]
    assert own_files
    for path in own_files:
        illegal = _imported_packages_of_ours(path) - ALLOWED_OURS[package] - {package}
        assert not illegal, f"{path.relative_to(ROOT)} imports {sorted(illegal)}"


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_a_package_alone_loads_nothing_else(package):
    code = (
        "import sys, json\n"
        f"import cuda_agent.{package}\n"
        "print(json.dumps(sorted({m.split('.')[0] if not m.startswith('cuda_agent.') "
        "else '.'.join(m.split('.')[:2]) for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    ours = {m.split(".")[1] for m in loaded if m.startswith("cuda_agent.")}
    assert ours - {package} <= ALLOWED_OURS[package], f"{package} loaded {sorted(ours)}"
    forbidden = loaded & FORBIDDEN_THIRD_PARTY.get(package, set())
    assert not forbidden, f"importing cuda_agent.{package} loaded {sorted(forbidden)}"


def test_no_bare_generic_top_level_names():
    for package in PACKAGES:
        src = ROOT / "packages" / package / "src"
        tops = {p.name for p in src.iterdir() if not p.name.startswith((".", "_"))}
        assert tops == {"cuda_agent"}, f"{package} ships top-level {sorted(tops)}"
        assert not (src / "cuda_agent" / "__init__.py").exists(), "cuda_agent must stay a namespace"


# ---------------------------------------------------------------------------- import cycles
# Cycles between two modules of one package kept on purpose, each with its reason: none.
# (``Sandbox(config)`` returning a ``RaySandbox`` was one: ``RaySandbox`` now declares itself
# with ``on_cluster=True`` and ``sandbox.py`` no longer imports ``ray_sandbox.py``.)
DELIBERATE_CYCLES: dict[frozenset[str], str] = {}


def _modules(package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's ``__init__``) for every module of ``package``."""
    base = _source_dir(package)
    found = {}
    for path in base.rglob("*.py"):
        parts = path.relative_to(base).with_suffix("").parts
        is_init = parts[-1] == "__init__"
        found[".".join(("cuda_agent", package, *(parts[:-1] if is_init else parts)))] = (
            path,
            is_init,
        )
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at the top or in a function (a lazy import runs
    too), not under ``if TYPE_CHECKING:`` (it only names types)."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _imported_modules(source: str, module: str, is_init: bool, known: set[str]) -> set[str]:
    """The absolute names of the modules ``module``'s imports load: ``from X import y`` loads
    ``X``, and ``X.y`` too where that is a module of ``known``."""
    package = module if is_init else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _run_time_imports(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
            continue
        target = node.module or ""
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join([*base, *([node.module] if node.module else [])])
        found.add(target)
        found |= {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known}
    return found


def _in_package(module: str, package: str) -> bool:
    return module == f"cuda_agent.{package}" or module.startswith(f"cuda_agent.{package}.")


def _import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (itself left out)."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {}
    for name, (path, is_init) in modules.items():
        imported = _imported_modules(path.read_text(), name, is_init, set(modules))
        ours = {m for m in imported if _in_package(m, package)}
        missing = ours - set(modules)
        assert not missing, f"{path.relative_to(ROOT)} imports {sorted(missing)}: no such module"
        graph[name] = ours - {name}
    return graph


def test_the_cycle_finder_counts_lazy_imports_and_not_type_checking_ones():
    source = (
        "from typing import TYPE_CHECKING\n"
        "from .b import x\n"
        "if TYPE_CHECKING:\n"
        "    from .c import Y\n"
        "def f():\n"
        "    from . import d\n"
    )
    known = {"p", "p.a", "p.b", "p.c", "p.d"}
    assert _imported_modules(source, "p.a", False, known) == {"typing", "p.b", "p", "p.d"}


@pytest.mark.parametrize("package", [*PACKAGES, "runner"])
def test_no_two_modules_of_a_package_import_each_other(package):
    graph = _import_graph(package)
    cycles = {frozenset((a, b)) for a, targets in graph.items() for b in targets if a in graph[b]}
    ours = {c for c in DELIBERATE_CYCLES if all(_in_package(m, package) for m in c)}
    assert cycles - ours == set(), "modules that import each other: " + "; ".join(
        " <-> ".join(sorted(c)) for c in sorted(cycles - ours, key=sorted)
    )
    assert ours <= cycles, (
        f"gone, drop them from DELIBERATE_CYCLES: {sorted(map(sorted, ours - cycles))}"
    )


def _private_imports_of_others(package: str) -> list[str]:
    """``file: module`` for each absolute import in ``package``'s source that names another
    package's private module (a name starting with ``_`` below the package)."""
    found = []
    for path in sorted(_source_dir(package).rglob("*.py")):
        if "builtin" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                parts = name.split(".")
                if (
                    len(parts) > 2
                    and parts[0] == "cuda_agent"
                    and parts[1] != package
                    and parts[2].startswith("_")
                ):
                    found.append(f"{path.relative_to(ROOT)}: {name}")
    return found


@pytest.mark.parametrize("package", [*PACKAGES, "runner"])
def test_no_package_imports_another_packages_private_modules(package):
    # Rule 5: a module or folder named with a leading underscore is its package's own.
    assert _private_imports_of_others(package) == []


def test_every_private_module_is_named_with_an_underscore():
    # The one convention: no package keeps its private code in a folder without a meaning
    # (the former ``_src/``): each private module is ``_name.py`` or sits in ``_process/``.
    for package in PACKAGES:
        assert not (_source_dir(package) / "_src").exists(), package
