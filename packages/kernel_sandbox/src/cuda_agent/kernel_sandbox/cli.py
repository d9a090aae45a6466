"""``kernel-sandbox eval TASK CANDIDATE [--backend cpu|cuda] [--json]``.

Exits 0 whenever a verdict was produced (whatever it is), 2 on a usage error (a missing or
broken task or candidate file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .candidates import read_candidate
from .config import SandboxConfig
from .errors import TaskError
from .sandbox import Sandbox
from .tasks import load_task


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernel-sandbox", description="Verify and time candidate kernels in isolation."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("eval", help="evaluate one candidate (a ModelNew module) on one task")
    ev.add_argument("task", help="KernelBench-format task file, or a task directory")
    ev.add_argument(
        "candidate",
        help="Python file defining ModelNew, or a work directory (kernels/, model_new.py)",
    )
    ev.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
    ev.add_argument("--trials", type=int, default=5)
    ev.add_argument("--atol", type=float, default=1e-2)
    ev.add_argument("--rtol", type=float, default=1e-2)
    ev.add_argument("--json", action="store_true", help="print the full result as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        task = load_task(args.task)
        candidate = read_candidate(Path(args.candidate))
        config = SandboxConfig(
            backend=args.backend, workers=1, trials=args.trials, atol=args.atol, rtol=args.rtol
        )
    except (TaskError, OSError, ValueError, UnicodeDecodeError) as exc:
        print(f"kernel-sandbox: {exc}", file=sys.stderr)
        return 2
    with Sandbox(config) as sandbox:
        result = sandbox.evaluate(task, candidate)
    if args.json:
        print(result.to_json(indent=2))
        return 0
    print(f"{result.status}: {result.message}")
    if result.candidate_time_ms is not None:
        line = f"candidate {result.candidate_time_ms:.4g} ms"
        if result.eager_time_ms is not None and result.speedup_vs_eager is not None:
            line += f" | eager {result.eager_time_ms:.4g} ms ({result.speedup_vs_eager:.2f}x)"
        if result.compile_time_ms is not None and result.speedup_vs_compile is not None:
            line += f" | compile {result.compile_time_ms:.4g} ms ({result.speedup_vs_compile:.2f}x)"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
