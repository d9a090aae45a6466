"""`rl_core` imports only torch and the standard library, no other cuda_agent package."""

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cuda_agent" / "rl_core"


def test_imports_only_torch_stdlib_and_itself() -> None:
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                ok = top in {*sys.stdlib_module_names, "torch"} or name.startswith(
                    "cuda_agent.rl_core"
                )
                assert ok, f"{path.name} imports {name}"
