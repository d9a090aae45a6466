"""DESIGN.md's package boundaries, enforced: who may import whom.

Checked twice: statically (every ``import`` statement in a package's source) and dynamically
(what importing a package alone actually loads, in a fresh interpreter).
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
    "policy": set(),
    "agent": {"kernel_sandbox", "reward"},
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
