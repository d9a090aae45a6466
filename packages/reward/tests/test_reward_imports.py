"""`reward` is standard library only and imports no other cuda_agent package (ARCHITECTURE.md)."""

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cuda_agent" / "reward"


def test_imports_only_stdlib_and_itself() -> None:
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                ok = name.split(".")[0] in sys.stdlib_module_names or name.startswith(
                    "cuda_agent.reward"
                )
                assert ok, f"{path.name} imports {name}"
