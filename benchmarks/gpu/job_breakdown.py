"""Where one evaluation's time goes, phase by phase, on a warm pool.

    python benchmarks/gpu/job_breakdown.py OUT.json [--backend cuda]

Evaluates a few built-in tasks' solutions three times each (the first pays compilation and the
per-task caches; the next two are warm) and records ``EvalResult.extra["seconds"]``: the
candidate worker's load, input preparation, candidate forward calls, output exchange, waiting
for verdicts, timing; and the parent's time waiting for the reference worker.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

import torch

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks

TASKS = ("relu", "softmax", "layernorm", "matmul", "conv2d")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--backend", default="cuda")
    args = parser.parse_args()
    tasks = {t.name: t for t in builtin_tasks()}
    rows = []
    with Sandbox(SandboxConfig(backend=args.backend, workers=1, time_compile=False)) as sb:
        sb.warm_up()
        for name in TASKS:
            task = tasks[name]
            for attempt in range(3):
                r = sb.evaluate(task, task.solutions[sb.backend])
                rows.append(
                    {
                        "task": name,
                        "attempt": attempt,
                        "status": r.status,
                        "wall_s": r.wall_seconds,
                        "build_s": r.build_seconds,
                        "seconds": r.extra.get("seconds"),
                        "pinned_exchange_bytes": r.extra.get("pinned_exchange_bytes"),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    report = {
        "benchmark": "job_breakdown",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": f"python benchmarks/gpu/job_breakdown.py OUT.json --backend {args.backend}",
        "machine": torch.cuda.get_device_name(0) if args.backend == "cuda" else "CPU",
        "torch": torch.__version__,
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
