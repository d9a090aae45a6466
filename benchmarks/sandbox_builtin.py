"""Evaluate every built-in task's reference solution in the sandbox and record the figures.

    python benchmarks/sandbox_builtin.py --backend cpu --out benchmarks/results/sandbox_builtin_cpu.json

Writes JSON with the date, machine, torch version, and per task: verdict, candidate / eager /
compile median times with spreads, speedups, and the end-to-end latency of the evaluation
(warm pool: the worker is started before the clock runs; a cold run is recorded separately).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
from pathlib import Path

import torch

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.runner.machine import cpu_name


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3, help="evaluations per task (latency)")
    args = parser.parse_args()

    tasks = builtin_tasks()
    started = time.perf_counter()
    with Sandbox(SandboxConfig(backend=args.backend, workers=1)) as sandbox:
        sandbox.warm_up()
        startup_s = time.perf_counter() - started
        rows = []
        for task in tasks:
            results = [
                sandbox.evaluate(task, task.solutions[sandbox.backend]) for _ in range(args.rounds)
            ]
            last = results[-1]
            rows.append(
                {
                    "task": task.name,
                    "status": last.status,
                    "message": last.message,
                    "max_abs_error": last.max_abs_error,
                    "candidate_ms": last.candidate_time_ms,
                    "candidate_spread_ms": last.candidate_time_spread_ms,
                    "eager_ms": last.eager_time_ms,
                    "eager_spread_ms": last.eager_time_spread_ms,
                    "compile_ms": last.compile_time_ms,
                    "compile_spread_ms": last.compile_time_spread_ms,
                    "speedup_vs_eager": last.speedup_vs_eager,
                    "speedup_vs_compile": last.speedup_vs_compile,
                    "first_eval_s": results[0].wall_seconds,
                    "warm_eval_s": [r.wall_seconds for r in results[1:]],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            # Partial results survive a run cut short by its time limit.
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out + ".partial").write_text(json.dumps(rows, indent=2) + "\n")
        backend = sandbox.backend
    warm = [s for r in rows for s in r["warm_eval_s"] if s is not None]
    report = {
        "benchmark": "sandbox_builtin",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": f"python benchmarks/sandbox_builtin.py --backend {args.backend} --out {args.out}",
        "backend": backend,
        "machine": cpu_name() if backend == "cpu" else torch.cuda.get_device_name(0),
        "cpu_count": __import__("os").cpu_count(),
        "torch": torch.__version__,
        "worker_startup_s": startup_s,
        "median_warm_eval_s": statistics.median(warm) if warm else None,
        "all_ok": all(r["status"] == "ok" for r in rows),
        "tasks": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    Path(args.out + ".partial").unlink(missing_ok=True)
    print(
        f"wrote {args.out}: all ok = {report['all_ok']}, median warm eval {report['median_warm_eval_s']}"
    )


if __name__ == "__main__":
    main()
