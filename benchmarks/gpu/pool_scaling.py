"""Issue 19: the sandbox pool with one slot per GPU, on 1, 2, ... GPUs of one host.

    python benchmarks/gpu/pool_scaling.py OUT.json                       # CUDA: 1..all GPUs
    python benchmarks/gpu/pool_scaling.py OUT.json --backend cpu --workers 1,2 \\
        --tasks relu,add_mul --rounds 1                                  # a CPU smoke run

For each pool size N (``--workers``, default 1..the GPUs present) a fresh process runs a pool of
N slots (``SandboxConfig(workers=N)``) with ``CUDA_VISIBLE_DEVICES`` set to the first N GPUs, so
slot i times on GPU i (``_parent/pool.py``: worker i gets ``CUDA_VISIBLE_DEVICES[i % n]``). It
evaluates every built-in task's own solution once untimed (baselines, compile caches and
workers warm), then ``rounds`` times over the suite through ``evaluate_many``: evaluations per
minute, and the speedup over N = 1 (issue 19's target: at least 1.8 on 2 GPUs).

No two timings on one GPU at once: nothing in ``EvalResult`` says where a job was timed, so the
parent's ``Worker`` objects are watched (the benchmark patches ``Worker._gate`` and
``Worker.run``, reading only): a timing runs from the parent's grant of the device's timing gate
for writing (``_parent/gate.py``) to the worker's release of it, which holds the worker's
whole timed section (a candidate's timing, a reference worker's torch.compile baseline). The
``timing`` phase message is not the start: with several lanes on one device a worker announces
its timing phase and then waits at the gate while another lane times. Each interval is put on the device the worker was started with
(its ``CUDA_VISIBLE_DEVICES``; on the CPU backend each worker is its own "device"), and the
intervals of one device must not overlap. On CUDA, ``nvidia-smi --query-compute-apps`` also
says on which GPU each worker's process really holds a context (``placement``; empty where the
container hides the processes). ``--control`` adds a run of two slots on one GPU, where the
check must find overlaps (a check that cannot fail proves nothing; eight tasks, once).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance

TARGET_SPEEDUP_2 = 1.8
CONTROL_TASKS = ["relu", "softmax", "layernorm", "matmul", "mlp", "conv2d", "row_sum", "gelu_tanh"]


# --------------------------------------------------------------------- the overlap check
def overlaps(intervals: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pairs of intervals (``device``, ``start_s``, ``end_s``) that share a device and time.

    Per device, sorted by start: an interval that starts before the latest end so far overlaps
    the interval that ended there.
    """
    found = []
    by_device: dict[str, list[dict[str, Any]]] = {}
    for iv in intervals:
        by_device.setdefault(str(iv["device"]), []).append(iv)
    for device, ivs in sorted(by_device.items()):
        ivs = sorted(ivs, key=lambda iv: iv["start_s"])
        latest = ivs[0]
        for iv in ivs[1:]:
            if iv["start_s"] < latest["end_s"]:
                found.append({"device": device, "first": latest, "second": iv})
            if iv["end_s"] > latest["end_s"]:
                latest = iv
    return found


def lane_of(worker: Any) -> str:
    """The worker's lane ("device.number"), or its index for a worker outside a pool."""
    return str(worker.lane or worker.index)


class TimingLog:
    """The timing intervals of every worker of the pool, in the parent's monotonic clock."""

    def __init__(self) -> None:
        self.intervals: list[dict[str, Any]] = []
        self.devices: dict[tuple[str, str], str] = {}  # (role, lane) -> device
        self.pids: dict[tuple[str, str], int] = {}
        self._open: dict[int, dict[str, Any]] = {}  # id(worker) -> its open interval
        self._lock = threading.Lock()
        self.origin = time.monotonic()

    def device(self, worker: Any) -> str:
        return self.devices.get((worker.role, lane_of(worker)), f"?{lane_of(worker)}")

    def opened(self, worker: Any, what: str, task: str) -> None:
        iv = {
            "device": self.device(worker),
            "role": worker.role,
            "worker": lane_of(worker),
            "what": what,
            "task": task,
            "start_s": time.monotonic() - self.origin,
        }
        with self._lock:
            self._open[id(worker)] = iv

    def closed(self, worker: Any) -> None:
        with self._lock:
            iv = self._open.pop(id(worker), None)
            if iv is not None:
                iv["end_s"] = time.monotonic() - self.origin
                self.intervals.append(iv)


@contextmanager
def watching(backend: str) -> Iterator[TimingLog]:
    """Patch the pool's ``Worker`` to record into a ``TimingLog`` (only observes)."""
    from cuda_agent.kernel_sandbox._parent import pool

    log = TimingLog()
    original_env, original_run, original_gate = pool.Worker._env, pool.Worker.run, pool.Worker._gate
    original_start = pool.Worker.start

    def _env(self: Any) -> dict[str, str]:
        env = original_env(self)
        if self.role != "compile":
            visible = env.get("CUDA_VISIBLE_DEVICES") if backend == "cuda" else None
            # On the CPU backend the host is one device, its lanes under one timing gate.
            log.devices[(self.role, lane_of(self))] = (
                f"cuda:{visible}" if visible is not None else "cpu"
            )
        return env

    def start(self: Any) -> None:
        original_start(self)
        if self.proc is not None:
            log.pids[(self.role, lane_of(self))] = self.proc.pid

    def run(self: Any, job: dict[str, Any], on_check: Any = None) -> dict[str, Any]:
        self._watched_job = (str(job.get("kind", "")), str(job.get("task_name", "")))
        try:
            return original_run(self, job, on_check)
        finally:
            log.closed(self)  # a job that died inside its timed section

    def _gate(self: Any, mode: Any) -> float:
        if mode != "write":
            log.closed(self)  # the lane let go of the gate (or moved to a reader's hold)
        waited = original_gate(self, mode)
        if mode == "write":  # held alone from here until the worker lets go
            kind, task = getattr(self, "_watched_job", ("", ""))
            log.opened(self, "baseline" if kind == "baseline" else "timing", task)
        return waited

    pool.Worker._env = _env  # type: ignore[method-assign]
    pool.Worker.start = start  # type: ignore[method-assign]
    pool.Worker.run = run  # type: ignore[method-assign]
    pool.Worker._gate = _gate  # type: ignore[method-assign]
    try:
        yield log
    finally:
        pool.Worker._env = original_env  # type: ignore[method-assign]
        pool.Worker.start = original_start  # type: ignore[method-assign]
        pool.Worker.run = original_run  # type: ignore[method-assign]
        pool.Worker._gate = original_gate  # type: ignore[method-assign]


def gpu_placement(pids: dict[tuple[str, int], int]) -> dict[str, Any]:
    """Which GPU (index) each worker process holds a context on, by ``nvidia-smi``."""

    def query(what: str) -> list[list[str]]:
        try:
            out = subprocess.run(
                ["nvidia-smi", f"--query-{what}", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        return [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]

    index_of = {uuid: index for index, uuid in query("gpu=index,uuid")}
    held: dict[int, list[str]] = {}
    for pid, uuid in query("compute-apps=pid,gpu_uuid"):
        if pid.isdigit():
            held.setdefault(int(pid), []).append(index_of.get(uuid, uuid))
    return {f"{role}{index}": held.get(pid, []) for (role, index), pid in sorted(pids.items())}


# ------------------------------------------------------------------------ one pool size
def run_part(backend: str, workers: int, task_names: Sequence[str], rounds: int) -> dict[str, Any]:
    from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks

    by_name = {t.name: t for t in builtin_tasks()}
    tasks = [by_name[n] for n in task_names] if task_names else list(by_name.values())
    with watching(backend) as log:
        # CUDA: N GPUs of one lane each; CPU: N lanes of the host (one device, one gate).
        lanes = 1 if backend == "cuda" else "auto"
        config = SandboxConfig(backend=backend, workers=workers, lanes_per_gpu=lanes)  # type: ignore[arg-type]
        started = time.perf_counter()
        with Sandbox(config) as sandbox:
            sandbox.warm_up()
            startup_s = time.perf_counter() - started
            jobs = [(t, t.solutions[sandbox.backend]) for t in tasks]
            t0 = time.perf_counter()
            warm = sandbox.evaluate_many(jobs)
            warm_s = time.perf_counter() - t0
            timed_from = time.monotonic() - log.origin
            t0 = time.perf_counter()
            results = sandbox.evaluate_many(jobs * rounds)
            seconds = time.perf_counter() - t0
            placement = gpu_placement(log.pids) if sandbox.backend == "cuda" else {}
            resolved = sandbox.config
    statuses: dict[str, int] = {}
    for r in results:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    failures = [
        {"task": r.task, "status": r.status, "message": r.message[:300]}
        for r in [*warm, *results]
        if r.status != "ok"
    ]
    found = overlaps(log.intervals)
    timed = [iv for iv in log.intervals if iv["start_s"] >= timed_from]
    return {
        "workers": workers,
        "compile_workers": resolved.compile_workers,
        "devices": sorted(set(log.devices.values())),
        "device_of_worker": {f"{r}{i}": d for (r, i), d in sorted(log.devices.items())},
        "placement": placement,
        "startup_s": startup_s,
        "warm_pass": {"evaluations": len(warm), "seconds": warm_s},
        "evaluations": len(results),
        "seconds": seconds,
        "evals_per_min": 60 * len(results) / seconds,
        "statuses": statuses,
        "all_ok": not failures,
        "failures": failures[:10],
        "median_eval_s": sorted(r.wall_seconds or 0.0 for r in results)[len(results) // 2],
        "timing_intervals": len(log.intervals),
        "timed_pass_timings": len([iv for iv in timed if iv["what"] == "timing"]),
        "no_overlap": not found,
        "overlaps": found[:10],
        "overlap_count": len(found),
        "intervals": log.intervals,
    }


# ----------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--workers", default="", help="pool sizes, e.g. 1,2 (default 1..GPUs)")
    parser.add_argument("--tasks", default="", help="built-in task names (default: all)")
    parser.add_argument("--rounds", type=int, default=2, help="timed passes over the suite")
    parser.add_argument("--control", action="store_true", help="also 2 slots on 1 GPU")
    parser.add_argument("--timeout-s", type=float, default=420.0, help="per pool size")
    parser.add_argument("--part", default="", help=argparse.SUPPRESS)  # "N" or "control"
    args = parser.parse_args()
    backend = args.backend
    if backend == "auto":
        backend = "cuda" if torch.cuda.is_available() else "cpu"
    tasks = [t for t in args.tasks.split(",") if t]
    if args.part:
        if args.part == "control":  # two slots on one GPU, a part of the suite once: overlaps
            result = run_part(backend, 2, tasks or CONTROL_TASKS, 1)
        else:
            result = run_part(backend, int(args.part), tasks, args.rounds)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        return

    gpus = torch.cuda.device_count() if backend == "cuda" else 0
    sizes = [int(w) for w in args.workers.split(",") if w] or list(range(1, max(gpus, 1) + 1))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpu_ids = visible.split(",") if visible else [str(i) for i in range(gpus)]
    if backend == "cuda" and max(sizes) > len(gpu_ids):
        raise SystemExit(f"--workers asks for {max(sizes)} GPUs; {len(gpu_ids)} are visible")
    parts = [str(n) for n in sizes] + (["control"] if args.control and backend == "cuda" else [])
    argv = sys.argv[2:]
    report: dict[str, Any] = {
        **provenance(
            "pool_scaling", "python benchmarks/gpu/pool_scaling.py OUT.json " + " ".join(argv), gpus
        ),
        "backend": backend,
        "tasks": tasks or "all built-in",
        "rounds": args.rounds,
        "target_speedup_2": TARGET_SPEEDUP_2,
        "runs": {},
    }
    out = Path(args.out)
    for part in parts:
        env = dict(os.environ)
        if backend == "cuda":
            n = 1 if part == "control" else int(part)
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_ids[:n])
        with tempfile.TemporaryDirectory() as tmp:
            part_json = Path(tmp) / "part.json"
            cmd = [sys.executable, __file__, str(part_json), *argv, "--part", part]
            started = time.perf_counter()
            try:
                done = subprocess.run(
                    cmd, env=env, timeout=args.timeout_s, capture_output=True, text=True
                )
                if done.returncode == 0:
                    run = json.loads(part_json.read_text())
                else:
                    run = {"error": f"exit {done.returncode}", "log": done.stderr[-4000:]}
            except subprocess.TimeoutExpired:
                run = {"error": f"timed out after {args.timeout_s:.0f} s"}
        run["wall_s"] = time.perf_counter() - started
        report["runs"][part] = run
        brief = {k: v for k, v in run.items() if k not in ("intervals", "log", "overlaps")}
        print(part, json.dumps(brief)[:800], flush=True)
        if "error" in run:
            print(run.get("log", ""), file=sys.stderr)
        _summarise(report)
        out.write_text(json.dumps(report, indent=2) + "\n")  # partial results survive


def _summarise(report: dict[str, Any]) -> None:
    runs = {k: v for k, v in report["runs"].items() if k != "control" and "error" not in v}
    base = runs.get("1", {}).get("evals_per_min")
    report["evals_per_min"] = {k: v["evals_per_min"] for k, v in runs.items()}
    report["speedup"] = {k: v["evals_per_min"] / base for k, v in runs.items()} if base else {}
    report["all_ok"] = bool(runs) and all(v["all_ok"] for v in runs.values())
    report["no_overlap"] = bool(runs) and all(v["no_overlap"] for v in runs.values())
    two = report["speedup"].get("2")
    report["meets_target"] = None if two is None else two >= TARGET_SPEEDUP_2
    control = report["runs"].get("control")
    if control and "error" not in control:
        report["control_found_overlaps"] = control["overlap_count"] > 0


if __name__ == "__main__":
    main()
