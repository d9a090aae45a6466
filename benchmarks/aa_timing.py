"""A/A check of the timer: the reference timed against itself must come out within the noise.

    python benchmarks/aa_timing.py --backend cpu --out benchmarks/results/aa_timing_cpu.json

For each task, the candidate is the task's own module with ``ModelNew = Model`` (so the
no-custom-kernel rule is switched off for this run). A sound timer gives speedups near 1 whose
spread-based range (``EvalResult.speedup_vs_eager_range``) contains 1, and the noise-aware
milestone reward never calls such a candidate faster.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
from pathlib import Path

import torch

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.reward import milestone_reward


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--suite", default="starter")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    # The candidate is the reference itself: every anti-cheat check would refuse it.
    config = SandboxConfig(
        backend=args.backend,
        workers=1,
        require_custom_kernel=False,
        static_checks=False,
        runtime_checks=False,
    )
    rows = []
    with Sandbox(config) as sandbox:
        for task in builtin_tasks(args.suite):
            result = sandbox.evaluate(task, task.source + "\n\nModelNew = Model\n")
            low, high = result.speedup_vs_eager_range or (float("nan"), float("nan"))
            rows.append(
                {
                    "task": task.name,
                    "status": result.status,
                    "speedup": result.speedup_vs_eager,
                    "range": [low, high],
                    "within_noise": low <= 1.0 <= high,
                    "reward": milestone_reward(result),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
        backend = sandbox.backend
    speedups = [r["speedup"] for r in rows if r["speedup"]]
    report = {
        "benchmark": "aa_timing",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": f"python benchmarks/aa_timing.py --backend {args.backend} --out {args.out}",
        "backend": backend,
        "machine": torch.cuda.get_device_name(0)
        if backend == "cuda"
        else f"{os.cpu_count()}-core CPU",
        "torch": torch.__version__,
        "median_speedup": statistics.median(speedups) if speedups else None,
        "within_noise": sum(r["within_noise"] for r in rows),
        "never_rewarded_as_faster": all(r["reward"] <= 1.0 for r in rows),
        "tasks": rows,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"{report['within_noise']}/{len(rows)} within noise; median {report['median_speedup']}")


if __name__ == "__main__":
    main()
