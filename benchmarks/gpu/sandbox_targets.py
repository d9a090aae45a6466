"""The sandbox's performance targets on a GPU, in one run.

    python benchmarks/gpu/sandbox_targets.py OUT.json [--aa-rounds 5]

1. latency: every built-in task's raw-CUDA solution, made unique (a comment inside the kernel
   source, so NVRTC really compiles it), evaluated one at a time on a warm pool, twice (the
   first candidate on a task also fills the task's caches): median end-to-end seconds per
   candidate (compile + 5 checks + re-check + interleaved timing of
   candidate and eager; the torch.compile baseline comes from the baseline cache in steady
   state, which costs nothing per job, so it is off here and measured in part 4);
2. throughput: ``evaluate_many`` over all tasks x 2 fresh variants: evaluations per minute;
3. A/A fidelity: each task's reference timed against itself (``ModelNew = Model``),
   ``--aa-rounds`` times: the share of speedups within +-3% and the spread by kernel size;
4. baseline cache: first and second evaluation of a few tasks with torch.compile timing on.
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


def variant(source: str, k: int) -> str:
    """The same solution with a comment inside its kernel source: a new compile."""
    marker = 'r"""' if 'r"""' in source else 'extern "C"'
    return source.replace(marker, f"{marker}\n// variant {k} {time.time_ns()}\n", 1)


def row(task, r) -> dict[str, object]:
    return {
        "task": task.name,
        "status": r.status,
        "wall_s": r.wall_seconds,
        "build_s": r.build_seconds,
        "candidate_ms": r.candidate_time_ms,
        "eager_ms": r.eager_time_ms,
        "speedup_vs_eager": r.speedup_vs_eager,
        "seconds": r.extra.get("seconds"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--aa-rounds", type=int, default=5)
    parser.add_argument("--backend", default="cuda", help="cpu: a quick dry run of this script")
    args = parser.parse_args()
    tasks = builtin_tasks()
    report: dict[str, object] = {
        "benchmark": "sandbox_targets",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python benchmarks/gpu/sandbox_targets.py OUT.json "
        f"--aa-rounds {args.aa_rounds} --backend {args.backend}",
        "machine": torch.cuda.get_device_name(0) if args.backend == "cuda" else "CPU",
        "torch": torch.__version__,
    }
    backend = args.backend
    config = SandboxConfig(backend=backend, workers=1, time_compile=False)
    with Sandbox(config) as sb:
        t0 = time.perf_counter()
        sb.warm_up()
        report["warm_up_s"] = time.perf_counter() - t0
        sb.evaluate(tasks[0], tasks[0].solutions[backend])  # first job: CUDA init, imports

        # The first candidate on a task also pays the task's caches (reference model, inputs,
        # expected outputs); later candidates on it (the steady state of RL, many candidates
        # per task) do not. Both are reported.
        for key, k in (("latency_first_on_task", 0), ("latency", 1)):
            rows = [row(t, sb.evaluate(t, variant(t.solutions[backend], k))) for t in tasks]
            walls = [r["wall_s"] for r in rows if r["status"] == "ok"]
            report[key] = {
                "median_s": statistics.median(walls),
                "p90_s": statistics.quantiles(walls, n=10)[-1],
                "ok": len(walls),
                "tasks": rows,
            }
            print(key, "median", report[key]["median_s"], flush=True)

        jobs = [(t, variant(t.solutions[backend], k)) for k in (2, 3) for t in tasks]
        t0 = time.perf_counter()
        results = sb.evaluate_many(jobs)
        elapsed = time.perf_counter() - t0
        report["throughput"] = {
            "evaluations": len(jobs),
            "ok": sum(r.status == "ok" for r in results),
            "seconds": elapsed,
            "per_minute": 60 * len(jobs) / elapsed,
        }
        print("throughput", report["throughput"], flush=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")  # partial results survive

    aa_config = SandboxConfig(  # one correctness trial: only the timing is under test here
        backend=backend,
        workers=1,
        time_compile=False,
        trials=1,
        # the candidate is the reference itself: every anti-cheat check would refuse it
        require_custom_kernel=False,
        static_checks=False,
        runtime_checks=False,
    )
    aa_rows = []
    with Sandbox(aa_config) as sb:
        for k in range(args.aa_rounds):
            for t in tasks:
                r = sb.evaluate(t, t.source + f"\n\nModelNew = Model  # round {k}\n")
                low, high = r.speedup_vs_eager_range or (float("nan"), float("nan"))
                aa_rows.append(
                    {
                        "task": t.name,
                        "round": k,
                        "status": r.status,
                        "speedup": r.speedup_vs_eager,
                        "eager_ms": r.eager_time_ms,
                        "range": [low, high],
                    }
                )
    ok = [a for a in aa_rows if a["speedup"]]
    within = [a for a in ok if abs(a["speedup"] - 1) <= 0.03]
    small = [a for a in ok if a["eager_ms"] < 0.05]
    report["aa"] = {
        "comparisons": len(ok),
        "within_3pct": len(within),
        "share_within_3pct": len(within) / len(ok),
        "range_contains_1": sum(a["range"][0] <= 1 <= a["range"][1] for a in ok),
        "max_abs_deviation": max(abs(a["speedup"] - 1) for a in ok),
        "kernels_below_50us": {
            "comparisons": len(small),
            "within_3pct": sum(abs(a["speedup"] - 1) <= 0.03 for a in small),
        },
        "rows": aa_rows,
    }
    print("aa", {k: v for k, v in report["aa"].items() if k != "rows"}, flush=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")

    cached = []
    with Sandbox(SandboxConfig(backend=backend, workers=1, time_compile=True)) as sb:
        for t in tasks[:4]:
            first = sb.evaluate(t, t.solutions[backend])
            second = sb.evaluate(t, variant(t.solutions[backend], 9))
            cached.append(
                {
                    "task": t.name,
                    "first_wall_s": first.wall_seconds,
                    "second_wall_s": second.wall_seconds,
                    "compile_ms": second.compile_time_ms,
                    "baseline": second.extra.get("compile_baseline"),
                    "speedup_vs_compile": second.speedup_vs_compile,
                }
            )
    report["baseline_cache"] = cached
    print("baseline cache", cached, flush=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
