"""The sandbox through Ray against the local pool: evaluations per minute and Ray's overhead.

    python benchmarks/ray_overhead.py OUT.json [--backend cpu|cuda] [--workers N] [--rounds R]

Both pools get the same configuration and ``workers`` slots. For each: the built-in suite's
reference solutions (every task with one for the backend), ``rounds`` times, through
``evaluate_many`` after a warm-up round (one job at a time, each printed as it ends) that
starts the workers and fills the caches; the evaluations per minute are over the timed
rounds' wall time. Each warm-up line has the clock, the client's seconds, the slot's own (inside
the slot's local pool), the candidate's build, and the rest (Ray, the scheduler, the compile
actor); a warm-up job running past ``--stall-s`` prints, every ``--stall-s``, whether the Ray
scheduler answers, each actor's state and pid, and every process below the driver and the actors
(role, state, kernel wait channel, CPU seconds): which actor, and which worker, is busy.

Ray's overhead per evaluation is measured two ways: (a) for every timed job, the client's
wall time less the actor's own (``EvalResult.wall_seconds``, taken inside the slot's local
pool), one job at a time (``evaluate``, no queueing); (b) the round trip of a candidate the
static checks refuse in the slot (no worker runs), against the same refusal in the local pool.
Ray starts a local cluster here (``ray.init(num_cpus=...)``) unless ``--address`` names one.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import torch

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks

REFUSED = (
    "import torch\nclass ModelNew(torch.nn.Module):\n"
    "    def forward(self, x):\n        return torch.relu(x)\n"
)


def _processes() -> dict[int, tuple[int, str, str]]:
    """Every process of this host: pid -> (parent pid, state, command)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                name = stat[stat.index("(") + 1 : stat.rindex(")")]
                state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
                found[int(entry.name)] = (int(ppid), state, name)
            except (OSError, ValueError):
                continue
    return found


def _describe_tree(
    root: int, processes: dict[int, tuple[int, str, str]], seen: set[int]
) -> list[str]:
    """``root``'s descendants, indented by depth: each one's role (``CUDA_AGENT_ROLE``), state,
    kernel wait channel and CPU seconds, so a stall shows which process is busy and on what."""
    lines, todo = [], [(root, 0)]
    while todo:
        pid, depth = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo += [(p, depth + 1) for p, (ppid, _, _) in processes.items() if ppid == pid]
        _, state, name = processes[pid]
        base = Path("/proc") / str(pid)
        try:
            env = (base / "environ").read_bytes().split(b"\0")
            role = next((e[16:].decode() for e in env if e.startswith(b"CUDA_AGENT_ROLE=")), "")
            wchan = (base / "wchan").read_text() or "-"
            fields = (base / "stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            role, wchan, cpu = "?", "?", 0.0
        lines.append(f"  {'  ' * depth}pid {pid} {name} role={role or '-'} state={state} "
                     f"wchan={wchan} cpu={cpu:.1f}s")  # fmt: skip
    return lines


def report_stall(sandbox: Sandbox, name: str, task: str, seconds: float) -> None:
    """What a job that has run ``seconds`` waits on: on Ray whether the scheduler answers (its
    counts and actor deaths), every live actor's state (``PENDING_CREATION``: Ray cannot place
    it) and pid; and each process below the driver and the actors, with its role."""
    print(f"{time.strftime('%H:%M:%S')} STALL? {name} job {task} running {seconds:.0f} s")
    processes = _processes()
    roots = [os.getpid()]
    if name == "ray":
        import ray
        from ray._private import state

        try:
            stats = ray.get(sandbox._scheduler.stats.remote(), timeout=10)  # type: ignore[attr-defined]
            print(f"  scheduler answers: {stats}")
        except ray.exceptions.GetTimeoutError:
            print("  scheduler: no answer to stats() in 10 s (its event loop is blocked)")
        for actor in state.actors().values():
            if actor["State"] == "DEAD":
                continue
            pid = int(actor.get("Pid") or 0)
            print(f"  actor {actor['ActorClassName']} {actor['State']} pid {pid}")
            roots.append(pid)
    seen: set[int] = set()
    for root in roots:
        if root in processes and root not in seen:
            print(*_describe_tree(root, processes, seen), sep="\n")
    print(flush=True)


def run_pool(
    sandbox: Sandbox, jobs: list, rounds: int, relu: Any, name: str, stall_s: float
) -> dict[str, Any]:
    # Warm-up (workers started, extensions and baselines cached), one job at a time and each
    # printed as it ends: a pool that stalls shows on which job, and after how long; a job
    # past ``stall_s`` gets a report of what it waits on, every ``stall_s``.
    warm_up = []
    for i, (task, source) in enumerate(jobs):
        t0 = time.perf_counter()
        done = threading.Event()

        def watch(task_name: str = task.name, t0: float = t0, done: threading.Event = done) -> None:
            while not done.wait(stall_s):
                report_stall(sandbox, name, task_name, time.perf_counter() - t0)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            result = sandbox.evaluate(task, source)
        finally:
            done.set()
        warm_up.append(time.perf_counter() - t0)
        own = result.wall_seconds or 0.0
        print(
            f"{time.strftime('%H:%M:%S')} {name} warm-up {i + 1}/{len(jobs)} {task.name}: "
            f"{result.status}, "
            f"{warm_up[-1]:.2f} s (the slot's own {own:.2f} s, of which building "
            f"{result.build_seconds or 0.0:.2f} s; outside the slot {warm_up[-1] - own:.2f} s)"
            + (f": {result.message.splitlines()[0][:160]}" if result.status != "ok" else ""),
            flush=True,
        )
    started = time.perf_counter()
    statuses: list[str] = []
    for _ in range(rounds):
        statuses += [r.status for r in sandbox.evaluate_many(jobs)]
    seconds = time.perf_counter() - started
    # One at a time: the client's wall time against the job's own.
    gaps = []
    for task, source in jobs:
        t0 = time.perf_counter()
        result = sandbox.evaluate(task, source)
        gaps.append((time.perf_counter() - t0) - result.wall_seconds)
    refused = []
    for _ in range(50):
        t0 = time.perf_counter()
        sandbox.evaluate(relu, REFUSED)
        refused.append(time.perf_counter() - t0)
    return {
        "warm_up_s": {"median": statistics.median(warm_up), "max": max(warm_up)},
        "evaluations": len(statuses),
        "seconds": seconds,
        "evaluations_per_minute": 60 * len(statuses) / seconds,
        "statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
        "client_minus_job_ms": {
            "median": 1e3 * statistics.median(gaps),
            "max": 1e3 * max(gaps),
        },
        "refused_round_trip_ms": {
            "median": 1e3 * statistics.median(refused),
            "p90": 1e3 * sorted(refused)[int(0.9 * len(refused))],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--address", default="", help="a running Ray cluster (default: a new one)")
    parser.add_argument("--tasks", default="", help="comma-separated names (default: all)")
    parser.add_argument(
        "--stall-s", type=float, default=30.0, help="report what a warm-up job waits on after"
    )
    args = parser.parse_args()
    import ray

    if args.address:
        ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
    else:
        # Every core, as the local pool sees them: each slot then gets the same threads.
        ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False)
    names = set(args.tasks.split(",")) if args.tasks else None
    tasks = [
        t
        for t in builtin_tasks()
        if args.backend in t.solutions and (names is None or t.name in names)
    ]
    jobs = [(t, t.solutions[args.backend]) for t in tasks]
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    config = SandboxConfig(backend=args.backend, workers=args.workers)  # type: ignore[arg-type]
    report: dict[str, Any] = {
        "benchmark": "ray_overhead",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python benchmarks/ray_overhead.py OUT.json "
        + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out" and v != ""
        ),
        "commit": os.environ.get("CUDA_AGENT_COMMIT", ""),
        "machine": torch.cuda.get_device_name(0)
        if args.backend == "cuda"
        else f"{platform.machine()}, {os.cpu_count()} CPUs",
        "torch": torch.__version__,
        "ray_version": ray.__version__,
        "tasks": len(tasks),
    }
    out = Path(args.out)
    for name, cfg in (("local", config), ("ray", dataclasses.replace(config, ray_address="auto"))):
        t0 = time.perf_counter()
        with Sandbox(cfg) as sandbox:
            print(f"{time.strftime('%H:%M:%S')} {name} pool open, {time.perf_counter() - t0:.2f} s")
            report[name] = run_pool(sandbox, jobs, args.rounds, relu, name, args.stall_s)
        print(name, json.dumps(report[name]))
        out.write_text(json.dumps(report, indent=2) + "\n")
    local, via = report["local"], report["ray"]
    report["throughput_ratio"] = via["evaluations_per_minute"] / local["evaluations_per_minute"]
    report["overhead_ms_per_evaluation"] = (
        via["refused_round_trip_ms"]["median"] - local["refused_round_trip_ms"]["median"]
    )
    report["overhead_ms_client_minus_job"] = (
        via["client_minus_job_ms"]["median"] - local["client_minus_job_ms"]["median"]
    )
    out.write_text(json.dumps(report, indent=2) + "\n")
    keys = ("throughput_ratio", "overhead_ms_per_evaluation", "overhead_ms_client_minus_job")
    print(json.dumps({k: report[k] for k in keys}))


if __name__ == "__main__":
    main()
