"""``cuda-agent synth``: synthesize tasks by operator composition (``cuda_agent.data.synth``).

    cuda-agent synth --count 1000 --out tasks/ [--backend cpu|cuda] [--max-ops 5] [--seed S]
        [--workers N] [--kernelbench DIR] [--teachable [--axes]] [--keep-heldout]

By default no synthesized task may meet the evaluation sets shipped here (the built-in
held-out tasks, ``task_sets.HELDOUT``, and the held-out compositions): their operator
combinations are excluded and tasks 0.9 similar to them dropped, so ``cuda-agent train --tasks
DIR`` evaluates on tasks never trained on.
``--kernelbench DIR`` (a KernelBench checkout, or ``$CUDA_AGENT_KERNELBENCH``) decontaminates
against its problems. A killed run resumes with the same ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    synth = sub.add_parser(
        "synth",
        help="synthesize tasks by composing PyTorch operators, filtered in the sandbox",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    synth.add_argument("--count", type=int, required=True, help="tasks to keep")
    synth.add_argument("--out", required=True, help="directory for the tasks and manifest.jsonl")
    synth.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    synth.add_argument("--max-ops", type=int, default=5, help="most operators a task composes")
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument("--workers", type=int, default=0, help="sandbox lanes (0: CPUs / 2)")
    synth.add_argument(
        "--kernelbench", default="", help="a KernelBench checkout to decontaminate against"
    )
    synth.add_argument(
        "--teachable", action="store_true", help="only chains with a C reference solution"
    )
    synth.add_argument(
        "--axes",
        action="store_true",
        help="chains that reduce the axis an integer constructor argument names, as "
        "KernelBench's level-1 reductions (with --teachable)",
    )
    synth.add_argument("--no-solutions", action="store_true", help="write no reference solutions")
    synth.add_argument(
        "--keep-heldout",
        action="store_true",
        help="allow the operator combinations of the shipped held-out sets",
    )
    synth.add_argument("--threshold", type=float, default=0.9, help="similarity that drops a task")
    synth.add_argument("--quiet", action="store_true")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from cuda_agent.data import load_kernelbench
    from cuda_agent.data.synth import synthesize
    from cuda_agent.kernel_sandbox import TaskError

    from .task_sets import heldout_guard

    against: dict[str, dict[str, str]] = {}
    exclude: set[str] = set()
    if not args.keep_heldout:
        exclude, against["heldout"] = heldout_guard()
    kernelbench = args.kernelbench or os.environ.get("CUDA_AGENT_KERNELBENCH", "")
    try:
        if kernelbench:
            against["kernelbench"] = {t.name: t.source for t in load_kernelbench(kernelbench)}
        elif not args.quiet:
            print("cuda-agent synth: no --kernelbench: not decontaminated against KernelBench")
        bar = _bar(args.count, args.quiet)
        report = synthesize(
            args.out,
            args.count,
            backend=args.backend,
            max_ops=args.max_ops,
            seed=args.seed,
            workers=args.workers or max(1, (os.cpu_count() or 2) // 2),
            teachable=args.teachable,
            axes=args.axes,
            solutions=not args.no_solutions,
            against=against,
            exclude_families=exclude,
            threshold=args.threshold,
            progress=bar,
        )
    except (TaskError, ValueError, OSError) as exc:
        print(f"cuda-agent: {exc}", file=sys.stderr)
        return 2
    summary = report.to_dict()
    if not args.quiet:
        print(json.dumps(summary, indent=2))
    return 0 if report.kept >= args.count else 1


def _bar(total: int, quiet: bool) -> Any:
    if quiet:
        return None
    from tqdm import tqdm

    bar = tqdm(total=total, desc="kept", unit="task")

    def update(kept: int, candidates: int) -> None:
        bar.n = kept
        bar.set_postfix(candidates=candidates)
        bar.refresh()

    return update
