"""How long a sandbox worker takes to start, forked from the zygote against a fresh interpreter
(``SandboxConfig.worker_start``), and what that costs a pool.

    python benchmarks/worker_start.py OUT.json [--backend cpu|cuda] [--rounds 10]

For each way (``exec``, ``fork``), in this order, each in a process of its own (so the first
fork pays for starting the zygote, as a user's first pool does):

- ``first_pool_s``: a new sandbox's first verdict (the built-in ``relu``'s own solution,
  untimed): its workers' start, then the job;
- ``restart_s``: the median over ``rounds`` of a candidate worker's restart, from the kill to
  its ``ready`` (the reference worker stays);
- ``after_crash_s``: the median over ``rounds`` of an honest verdict right after a candidate
  that crashed its worker (the restart, then the job), as a red-team case or a bad RL answer
  costs the next job;
- ``first_job_s``: the median of the first verdict on a worker just restarted (what a
  fresh worker still pays in its first job), and ``first_job_parts_s`` its parts
  (``extra["seconds"]``, medians);
- ``job_s``: the median of the next verdict on that worker, warm, for scale, and
  ``job_parts_s`` its parts;
- ``restart_stages_s``: where a restart went, per stage, the median over the rounds
  (``Worker.start_seconds``: the fork or exec, the wait for its ready, and within that the
  worker's own stages: imports, the CUDA context, pinning the exchange, warm-ups, confinement).

Records the date, machine, torch, commit and command (``benchmarks/gpu/provenance.py``).
On CUDA (H100, 2026-12-06) a restart took 0.66 s forked against 11.6 s fresh.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))

CRASH = """
import os, signal
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os.kill(os.getpid(), signal.SIGSEGV)
        return x
"""


def measure(how: str, backend: str, rounds: int) -> dict[str, float | str]:
    """The figures of one way, in this process."""
    from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks

    task = next(t for t in builtin_tasks() if t.name == "relu")
    solution = task.solutions[backend]
    config = SandboxConfig(
        backend=backend, workers=1, lanes_per_gpu=1, worker_start=how, static_checks=False
    )
    started = time.perf_counter()
    with Sandbox(config) as sandbox:
        first = sandbox.evaluate(task, solution, measure_time=False)
        first_pool_s = time.perf_counter() - started
        assert first.correct, first.message
        candidate = sandbox._lanes.lanes[0].candidate
        restarts, after_crash, jobs = [], [], []
        stages: list[dict[str, float]] = []
        first_jobs: list[float] = []
        first_parts: list[dict[str, float]] = []
        warm_parts: list[dict[str, float]] = []
        for _ in range(rounds):
            candidate.kill()
            began = time.perf_counter()
            candidate.start()
            restarts.append(time.perf_counter() - began)
            stages.append(dict(candidate.start_seconds))
            began = time.perf_counter()
            first_job = sandbox.evaluate(task, solution, measure_time=False)
            assert first_job.correct, first_job.message
            first_jobs.append(time.perf_counter() - began)
            first_parts.append(_parts(first_job.extra))
            began = time.perf_counter()
            warm = sandbox.evaluate(task, solution, measure_time=False)
            assert warm.correct, warm.message
            jobs.append(time.perf_counter() - began)
            warm_parts.append(_parts(warm.extra))
            crashed = sandbox.evaluate(task, CRASH, measure_time=False)
            assert crashed.status == "runtime_error", crashed.message
            began = time.perf_counter()
            assert sandbox.evaluate(task, solution, measure_time=False).correct
            after_crash.append(time.perf_counter() - began)
        started_by = candidate.started_by
    return {
        "started_by": started_by,
        "first_pool_s": round(first_pool_s, 3),
        "restart_s": round(statistics.median(restarts), 3),
        "restart_stages_s": _medians(stages),
        "after_crash_s": round(statistics.median(after_crash), 3),
        "first_job_s": round(statistics.median(first_jobs), 3),
        "first_job_parts_s": _medians(first_parts),
        "job_s": round(statistics.median(jobs), 3),
        "job_parts_s": _medians(warm_parts),
    }


def _parts(extra: dict) -> dict[str, float]:
    """A verdict's time by part (``extra["seconds"]``)."""
    seconds = extra.get("seconds")
    return {k: float(v) for k, v in (seconds or {}).items() if isinstance(v, (int, float))}


def _medians(rows: list[dict[str, float]]) -> dict[str, float]:
    """Per key, the median over the rows that have it."""
    keys = dict.fromkeys(k for row in rows for k in row)
    return {k: round(statistics.median(r[k] for r in rows if k in r), 4) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--one", choices=["exec", "fork"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # a child: one way's figures on stdout
        print(json.dumps(measure(args.one, args.backend, args.rounds)))
        return
    from provenance import provenance

    command = " ".join(["python", "benchmarks/worker_start.py", *sys.argv[1:]])
    report = provenance("worker_start", command, 1 if args.backend == "cuda" else 0)
    report["backend"] = args.backend
    report["rounds"] = args.rounds
    for how in ("exec", "fork"):
        done = subprocess.run(
            [sys.executable, __file__, str(args.out), "--backend", args.backend,
             "--rounds", str(args.rounds), "--one", how],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        report[how] = json.loads(done.stdout.strip().splitlines()[-1])
    for key in ("first_pool_s", "restart_s", "after_crash_s"):
        report[f"{key}_saved"] = round(report["exec"][key] - report["fork"][key], 3)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
