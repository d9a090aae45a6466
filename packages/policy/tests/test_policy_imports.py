"""The policy package stands almost alone: of the other cuda_agent packages it imports rl_core
only (pure tensor math, torch alone: the entropy of its chunked logits is rl_core's formula)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cuda_agent"


def test_no_other_cuda_agent_package_is_imported() -> None:
    assert not (SRC / "__init__.py").exists()  # PEP 420 namespace
    for file in (SRC / "policy").rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] == "cuda_agent":
                    assert name.startswith(("cuda_agent.policy", "cuda_agent.rl_core")), (
                        f"{file.name} imports {name}"
                    )
