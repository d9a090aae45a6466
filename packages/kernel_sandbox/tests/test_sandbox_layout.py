"""The package is laid out by the process each line runs in (README "Where things are"): the
parent (the public modules and ``_parent``) never imports what only the workers run
(``_candidate``, ``_reference``, ``_confinement``, ``_worker``, and ``_zygote``, which forks
workers), and no module is too long."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

PACKAGE = "cuda_agent.kernel_sandbox"
ROOT = Path(str(resources.files(PACKAGE)))
WORKER_ONLY = ("_candidate", "_reference", "_confinement", "_worker", "_zygote")


def _parent_modules() -> list[Path]:
    top = [p for p in ROOT.glob("*.py") if p.stem not in ("_worker", "_zygote")]
    return sorted(top + list((ROOT / "_parent").glob("*.py")))


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code, as an absolute dotted name."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    package = [PACKAGE, *parts[:-1]]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def _worker_only(name: str) -> bool:
    return any(name == f"{PACKAGE}.{w}" or name.startswith(f"{PACKAGE}.{w}.") for w in WORKER_ONLY)


@pytest.mark.parametrize("path", _parent_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_parent_module_imports_a_worker_only_module(path: Path) -> None:
    assert not sorted(n for n in _imports(path) if _worker_only(n))


def test_an_evaluation_loads_no_worker_only_module_into_the_parent() -> None:
    # A fresh interpreter: evaluate a candidate end to end (its workers are other processes),
    # then list what the parent has imported.
    code = (
        "import json, sys\n"
        "from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks\n"
        "from cuda_agent.kernel_sandbox import properties, validate, cli, ray_sandbox\n"
        "relu = next(t for t in builtin_tasks() if t.name == 'relu')\n"
        "cfg = SandboxConfig(backend='cpu', workers=1, repeats=3, timing_budget_s=0.2)\n"
        "with Sandbox(cfg) as sandbox:\n"
        "    status = sandbox.evaluate(relu, relu.solutions['cpu']).status\n"
        "print(json.dumps([status, sorted(sys.modules)]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )
    status, modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert status == "ok"
    assert not [m for m in modules if _worker_only(m)]


def test_no_module_is_longer_than_a_reader_can_hold() -> None:
    # The built-in tasks and their solutions aside.
    lengths = {
        p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
        for p in ROOT.rglob("*.py")
        if "builtin" not in p.relative_to(ROOT).parts
    }
    assert {name: n for name, n in lengths.items() if n > 420} == {}
