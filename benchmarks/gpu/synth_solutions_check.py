"""Judge the compact CUDA solutions of the embedded synthesized tasks on the GPU.

    python benchmarks/gpu/synth_solutions_check.py OUT.json [--limit N] [--set NAME]
        [--variant STYLE] [--sizes small] [--match TEXT[,TEXT...]]

`cuda-agent-data`'s `cpu_compositions` (200 chains of elementwise ops and one row reduction)
carry a `solution_cuda_compact.py` each, written by `data.solutions.cuda_solution`. A warm start
on the CUDA backend teaches them, so each must pass the sandbox on a GPU, like any candidate:
this evaluates them all (one slot, the sandbox's default checks, torch.compile not timed) and
writes each verdict and speedup over eager, and the counts. OUT.json is rewritten after every
chunk of 20, so a run cut short keeps what it judged. `--set heldout_compositions` judges the
held-out compositions' CUDA solutions instead (for checking only: never taught).
`--variant warp` judges the tasks' warp-per-row variants (`solution_cuda_warp.py`, the
reductions only) and, beside each, the same task's compact solution (`compact_status`,
`compact_speedup_vs_eager`, `variant_faster_than_compact`), and `--sizes small` judges at the sizes
`--train-sizes small` / `--eval-sizes small` use: the two runs side by side say where each
layout is faster than eager. `--match l1_normalize,l2_normalize` judges only the tasks whose
name holds one of the texts (before `--limit`): the solutions a writer's change rewrote.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

import torch

from cuda_agent.data import load_embedded
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, Task
from cuda_agent.runner.task_sets import at_small_sizes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--set", default="cpu_compositions", help="an embedded set's name")
    parser.add_argument("--variant", default="", help="a variant's style (default: compact)")
    parser.add_argument("--sizes", choices=("full", "small"), default="full")
    parser.add_argument("--match", default="", help="only tasks whose name holds one of these")
    args = parser.parse_args()

    def solution(task: Task) -> str | None:
        if args.variant:
            return task.variant_solutions.get("cuda", {}).get(args.variant)
        return task.compact_solutions.get("cuda")

    tasks = [t for t in load_embedded(args.set).tasks() if solution(t) is not None]
    if args.match:
        texts = args.match.split(",")
        tasks = [t for t in tasks if any(x in t.name for x in texts)]
    tasks = at_small_sizes(tasks) if args.sizes == "small" else tasks
    tasks = tasks[: args.limit] if args.limit else tasks
    command = (
        f"python benchmarks/gpu/synth_solutions_check.py OUT.json --set {args.set}"
        f"{f' --variant {args.variant}' if args.variant else ''} --sizes {args.sizes}"
        f"{f' --match {args.match}' if args.match else ''}"
    )
    report: dict = {
        **provenance("synth_solutions_check", command, torch.cuda.device_count()),
        "tasks": len(tasks),
        "results": [],
    }
    started = time.perf_counter()
    with Sandbox(SandboxConfig(backend="cuda", workers=1, time_compile=False)) as sandbox:
        for first in range(0, len(tasks), 20):
            chunk = tasks[first : first + 20]
            jobs = [(t, solution(t)) for t in chunk]
            # with a variant, the same tasks' compact solutions too: each layout's speed
            compact = [(t, t.compact_solutions["cuda"]) for t in chunk] if args.variant else []
            results = sandbox.evaluate_many(jobs + compact)
            for i, task in enumerate(chunk):
                result = results[i]
                row = {
                    "task": task.name,
                    "status": result.status,
                    "speedup_vs_eager": result.speedup_vs_eager,
                    "candidate_time_ms": result.candidate_time_ms,
                    "eager_time_ms": result.eager_time_ms,
                    "message": result.message[:300],
                }
                if compact:
                    other = results[len(chunk) + i]
                    row.update(compact_status=other.status,
                               compact_speedup_vs_eager=other.speedup_vs_eager)  # fmt: skip
                report["results"].append(row)
            statuses = collections.Counter(r["status"] for r in report["results"])
            speedups = [r["speedup_vs_eager"] for r in report["results"] if r["speedup_vs_eager"]]
            report.update(
                judged=len(report["results"]),
                statuses=dict(statuses),
                faster_than_eager=sum(1 for s in speedups if s > 1.0),
                median_speedup_vs_eager=sorted(speedups)[len(speedups) // 2] if speedups else None,
                seconds=round(time.perf_counter() - started, 1),
            )
            if args.variant:
                report["variant_faster_than_compact"] = sum(
                    (r["speedup_vs_eager"] or 0) > (r["compact_speedup_vs_eager"] or 0)
                    for r in report["results"]
                )
            Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
            print(json.dumps({k: report[k] for k in ("judged", "statuses", "seconds")}), flush=True)


if __name__ == "__main__":
    main()
