"""Issue 28: sandbox lanes on one GPU against the one-lane pool, in one call.

    python benchmarks/gpu/lanes.py OUT_DIR [--parts suite,control,redteam,aa,compositions,aa_small]
        [--rounds 2] [--kernelbench DIR] [--lanes N] [--sizes full|small]

Each part adds its figures to ``OUT_DIR/lanes.json`` (read back first, so parts may run in
separate calls):

- ``suite``: every built-in task's own CUDA solution through a one-lane pool, then through a
  pool of ``lanes_per_gpu="auto"`` lanes (or ``--lanes``), each after a warm pass (workers,
  NVRTC caches, baselines), ``rounds`` times: evaluations per minute, and whether every verdict
  (status and flags) matches. The lanes pool runs with ``CUDA_AGENT_TRACE``: every worker
  writes its sections of device work, and ``overlaps_during_timing`` counts the pairs where
  another process's section overlapped a timing on the GPU (``_shared.trace``).
- ``control``: the same lanes with the gate off (``timing_gate=False``), one round: the trace
  must find overlaps (``control_overlaps``), or the check above proves nothing.
- ``redteam``: the red-team suite's CUDA cases, each followed by an honest candidate, all at
  once through the lanes: each verdict must be the one the one-lane pool gives it
  (``redteam/cases.toml``; ``test_redteam`` holds it there), and every honest one ``ok``.
- ``aa``: the KernelBench A/A sample (level 1 and 2, every fifth problem: 40), each problem's
  reference timed against itself (``ModelNew = Model``, checks off) at KernelBench's sizes, one
  at a time, while the other lanes run correctness-only jobs of the built-in suite
  (``measure_time=False``) without pause: ``aa_within_3pct`` of ``aa_n``.
- ``compositions``: 24 embedded training compositions with their compact CUDA solutions, cold
  (first visit: baselines measured) and warm, through one lane and through the lanes; where a
  warm job's time goes (``EvalResult.extra["seconds"]``, medians) and the GPU floor of its
  timing (the timed calls' median times the calls made). ``--sizes small``: at the sizes the
  trainer's ``--train-sizes small`` gives them (``compositions_small``).
- ``aa_small``: the A/A check (as ``aa``) on those compositions at their small sizes: whether
  timing stays reliable there (``aa_small_within_3pct`` of ``aa_small_n``).
- ``scaling``: the suite (as ``suite``, untraced) through pools of each lane count in
  ``--sweep`` (default 1,2,4,8,12), each with every gate gathering time in ``--gathers``
  (``SandboxConfig.timing_gather_s``, default 0.25): evaluations per minute and, over the
  measured rounds, what was busy: the machine's CPUs (``cpu_busy_share`` of all cores, ``/proc/stat``), this process
  (``parent_cpu_s_per_job``: the pool's threads, the static checks, the brokering), and the GPU
  (``gpu_busy_share``, ``nvidia-smi`` every 100 ms). Which one saturates as lanes are added says
  what bounds the rate; the gate's ``gather_s``, ``drain_s`` and ``write_phase_s`` say where
  the device's time went between timings.

Every pool reports the same three figures beside its rate (``busy``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
import tomllib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_util import UtilisationLog
from provenance import provenance

from cuda_agent.kernel_sandbox import (
    Deadlines,
    EvalResult,
    Sandbox,
    SandboxConfig,
    builtin_tasks,
    load_task,
)
from cuda_agent.kernel_sandbox._shared.trace import ENV, read_spans, timing_overlaps

ROOT = Path(__file__).resolve().parents[2]
REDTEAM = ROOT / "packages" / "kernel_sandbox" / "redteam"


@contextmanager
def traced() -> Any:
    """Workers started inside trace their sections into a fresh directory (yielded)."""
    directory = tempfile.mkdtemp(prefix="lanes-trace-")
    os.environ[ENV] = directory
    try:
        yield directory
    finally:
        os.environ.pop(ENV, None)


def verdict(r: EvalResult) -> list[Any]:
    return [r.status, sorted(r.flags)]


def _cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of all the machine's CPUs so far, or None without ``/proc/stat``."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def busy(jobs: int) -> Any:
    """What was busy while the block ran ``jobs`` evaluations (yielded dict, filled on exit):
    the machine's CPUs, this process's CPU per job, the GPU (None where unmeasured)."""
    figures: dict[str, Any] = {}
    ticks, own, log = _cpu_ticks(), _self_cpu_s(), UtilisationLog().start()
    t0 = time.monotonic()
    try:
        yield figures
    finally:
        t1 = time.monotonic()
        after = _cpu_ticks()
        log.close()
        if ticks and after and after[1] > ticks[1]:
            figures["cpu_busy_share"] = (after[0] - ticks[0]) / (after[1] - ticks[1])
        figures["cpu_count"] = os.cpu_count()
        figures["parent_cpu_s_per_job"] = (_self_cpu_s() - own) / max(jobs, 1)
        figures["gpu_busy_share"] = log.mean(t0, t1)


def run_pool(config: SandboxConfig, jobs: list, rounds: int, trace: bool) -> dict[str, Any]:
    started = time.perf_counter()
    with traced() if trace else _nothing() as directory, Sandbox(config) as sandbox:
        sandbox.warm_up()
        startup = time.perf_counter() - started
        t0 = time.perf_counter()
        warm = sandbox.evaluate_many(jobs)
        warm_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        results: list[EvalResult] = []
        with busy(rounds * len(jobs)) as figures:
            for _ in range(rounds):
                results += sandbox.evaluate_many(jobs)
        seconds = time.perf_counter() - t0
        gates = sandbox.gate_stats()
        lanes = sandbox.config.lanes_per_gpu
    spans = read_spans(directory) if directory else []
    overlaps = timing_overlaps(spans)
    timing_s = sum(x.end - x.start for x in spans if x.timing)
    return {
        "where": _where(results),
        "timing_sections_s": timing_s,  # the GPU held alone, summed (traced pools only)
        "lanes_per_gpu": lanes,
        "startup_s": startup,
        "warm_pass": {"evaluations": len(warm), "seconds": warm_s},
        "evaluations": len(results),
        "seconds": seconds,
        "evaluations_per_minute": 60 * len(results) / seconds,
        "statuses": _count(r.status for r in results),
        "not_ok": [f"{r.task}: {r.status}: {r.message[:160]}" for r in results if r.status != "ok"],
        "median_wall_s": statistics.median(r.wall_seconds or 0.0 for r in results),
        "gate": gates,
        "busy": figures,
        "spans": len(spans),
        "timings_traced": sum(s.timing for s in spans),
        "overlaps": len(overlaps),
        "overlap_examples": [[vars(a), vars(b)] for a, b in overlaps[:3]],
        "verdicts": [verdict(r) for r in results],
    }


def _lanes(args: argparse.Namespace) -> int | Literal["auto"]:
    return int(args.lanes) if args.lanes else "auto"


def _count(values: Any) -> dict[str, int]:
    values = list(values)
    return {v: values.count(v) for v in sorted(set(values))}


@contextmanager
def _nothing() -> Any:
    yield None


def _suite(args: argparse.Namespace) -> list:
    names = set(args.tasks.split(",")) if args.tasks else None
    return [(t, t.solutions[args.backend]) for t in builtin_tasks() if not names or t.name in names]


def part_suite(report: dict[str, Any], args: argparse.Namespace) -> None:
    jobs = _suite(args)
    one = run_pool(SandboxConfig(backend=args.backend, lanes_per_gpu=1), jobs, args.rounds, False)
    print(f"one lane: {one['evaluations_per_minute']:.1f}/min {one['statuses']}", flush=True)
    lanes = _lanes(args)
    many = run_pool(
        SandboxConfig(backend=args.backend, lanes_per_gpu=lanes), jobs, args.rounds, True
    )
    print(
        f"{many['lanes_per_gpu']} lanes: {many['evaluations_per_minute']:.1f}/min "
        f"{many['statuses']} overlaps {many['overlaps']} of {many['timings_traced']} timings",
        flush=True,
    )
    report["suite"] = {"one_lane": _brief(one), "lanes": _brief(many)}
    report.update(
        evaluations_per_minute=many["evaluations_per_minute"],
        evaluations_per_minute_one_lane=one["evaluations_per_minute"],
        lanes_per_gpu=many["lanes_per_gpu"],
        verdicts_match_suite=one["verdicts"] == many["verdicts"],
        overlaps_during_timing=many["overlaps"],
        timings_traced=many["timings_traced"],
    )


def part_scaling(report: dict[str, Any], args: argparse.Namespace) -> None:
    jobs = _suite(args)
    rows = []
    gathers = [float(g) for g in args.gathers.split(",")]
    for lanes in (int(n) for n in args.sweep.split(",")):
        for gather in gathers[:1] if lanes == 1 else gathers:  # one lane never gathers
            config = SandboxConfig(
                backend=args.backend, lanes_per_gpu=lanes, timing_gather_s=gather
            )
            run = run_pool(config, jobs, args.rounds, False)
            keys = ("evaluations_per_minute", "evaluations", "seconds", "statuses",
                    "median_wall_s", "busy", "gate", "where")  # fmt: skip
            rows.append({"lanes_per_gpu": lanes, "timing_gather_s": gather,
                         **{k: run[k] for k in keys}})  # fmt: skip
            print(
                f"{lanes} lanes, gather {gather:g} s: {run['evaluations_per_minute']:.1f}/min "
                f"busy {run['busy']} gate {run['gate']}",
                flush=True,
            )
    report["scaling"] = rows


def _brief(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != "verdicts"}


def part_control(report: dict[str, Any], args: argparse.Namespace) -> None:
    jobs = _suite(args)
    config = SandboxConfig(backend=args.backend, lanes_per_gpu=_lanes(args), timing_gate=False)
    control = run_pool(config, jobs, 1, True)
    print(f"control (gate off): {control['overlaps']} overlaps", flush=True)
    report["control"] = _brief(control)
    report["control_overlaps"] = control["overlaps"]


def part_redteam(report: dict[str, Any], args: argparse.Namespace) -> None:
    cases = [
        c
        for c in tomllib.loads((REDTEAM / "cases.toml").read_text())["case"]
        if args.backend in c.get("backends", ["cpu"])
        and c.get("kind") != "property"
        and not c.get("isolate")
        and c["name"] != "network"
    ]
    tasks = {t.name: t for t in builtin_tasks()}
    relu = tasks["relu"]
    jobs = []
    for case in cases:
        text = (REDTEAM / "cases" / f"{case['name']}.py").read_text()
        text = text.replace("__TARGET__", "/tmp/lanes-planted.txt").replace("__PORT__", "9")
        jobs += [(tasks[case["task"]], text), (relu, relu.solutions[args.backend])]
    config = SandboxConfig(
        backend=args.backend,
        lanes_per_gpu=_lanes(args),
        time_compile=False,
        deadlines=Deadlines(load=120.0, correctness=20.0, timing=30.0),
    )
    t0 = time.perf_counter()
    with Sandbox(config) as sandbox:
        results = sandbox.evaluate_many(jobs)
    rows, match = [], True
    for case, got, honest in zip(cases, results[::2], results[1::2], strict=True):
        ok = got.status == case["status"] and set(case.get("flags", [])) <= set(got.flags)
        ok = ok and honest.status == "ok"
        match &= ok
        rows.append(
            {
                "case": case["name"],
                "expected": case["status"],
                "got": got.status,
                "flags": list(got.flags),
                "neighbour": honest.status,
                "match": ok,
                "message": got.message[:200],
            }
        )
    print(f"red team in lanes: {sum(r['match'] for r in rows)}/{len(rows)} match", flush=True)
    report["redteam"] = {"cases": rows, "seconds": time.perf_counter() - t0}
    report["verdicts_match_redteam"] = match


AA_MODEL_NEW = "\n\nclass ModelNew(Model):\n    pass\n"


def part_aa(report: dict[str, Any], args: argparse.Namespace) -> None:
    root = Path(args.kernelbench)
    files = sorted((root / "level1").glob("*.py")) + sorted((root / "level2").glob("*.py"))
    named = [(f"{path.parent.name}/{path.name}", load_task(path)) for path in files]
    _aa(report, args, named, "aa")


def part_aa_small(report: dict[str, Any], args: argparse.Namespace) -> None:
    """The A/A check at the training compositions' small sizes (``--train-sizes small``):
    is their timing still reliable there?"""
    tasks = _compositions(args, "small")
    _aa(report, args, [(t.name, t) for t, _ in tasks], "aa_small")


def _aa(
    report: dict[str, Any], args: argparse.Namespace, named: list[tuple[str, Any]], key: str
) -> None:
    """Each task's reference timed against itself, one at a time, while the other lanes run
    correctness-only jobs of the built-in suite without pause: ``<key>_within_3pct`` of
    ``<key>_n``."""
    lanes = _lanes(args)
    config = SandboxConfig(
        backend=args.backend,
        lanes_per_gpu=lanes,
        static_checks=False,
        runtime_checks=False,
        require_custom_kernel=False,
        time_compile=False,
    )
    builtins = [(t, t.solutions[args.backend]) for t in builtin_tasks()]
    rows: list[dict[str, Any]] = []
    stop = threading.Event()
    busy = {"jobs": 0}
    with Sandbox(config) as sandbox:
        sandbox.warm_up()

        def load() -> None:  # correctness work on the other lanes, without pause
            i = 0
            while not stop.is_set():
                task, source = builtins[i % len(builtins)]
                sandbox.evaluate(task, source, measure_time=False)
                busy["jobs"] += 1
                i += 1

        n_load = max(1, int(sandbox.config.lanes_per_gpu) - 1)
        threads = [threading.Thread(target=load, daemon=True) for _ in range(n_load)]
        for t in threads:
            t.start()
        for name, task in named:
            source = task.source + AA_MODEL_NEW
            r = sandbox.evaluate(task, source)
            ratio = (
                r.candidate_time_ms / r.eager_time_ms
                if r.status == "ok" and r.candidate_time_ms and r.eager_time_ms
                else None
            )
            rows.append(
                {
                    "problem": name,
                    "status": r.status,
                    "aa_ratio": ratio,
                    "eager_ms": r.eager_time_ms,
                    "message": r.message[:160] if r.status != "ok" else "",
                }
            )
            print(f"{rows[-1]['problem']:55s} {r.status:10s} {ratio}", flush=True)
        stop.set()
        for t in threads:
            t.join(120)
    ratios = [r["aa_ratio"] for r in rows if r["aa_ratio"] is not None]
    report[key] = {"rows": rows, "background_jobs": busy["jobs"], "loading_lanes": n_load}
    report.update(
        {
            f"{key}_n": len(rows),
            f"{key}_within_3pct": sum(abs(x - 1) <= 0.03 for x in ratios),
            f"{key}_within_1pct": sum(abs(x - 1) <= 0.01 for x in ratios),
            f"{key}_max_deviation": max((abs(x - 1) for x in ratios), default=None),
        }
    )


def _compositions(args: argparse.Namespace, sizes: str) -> list[tuple[Any, str]]:
    """The first ``args.compositions`` embedded training compositions with an answer (their
    compact solution), at ``sizes`` ("full", or "small": the trainer's ``--train-sizes``)."""
    from cuda_agent.data import load_embedded
    from cuda_agent.runner.task_sets import at_small_sizes

    tasks = load_embedded().tasks()
    if sizes == "small":
        tasks = at_small_sizes(tasks)
    answers = [
        t.compact_solutions.get(args.backend) or t.solutions.get(args.backend) for t in tasks
    ]
    jobs = [(t, a) for t, a in zip(tasks, answers, strict=True) if a]
    return jobs[: args.compositions]


def part_compositions(report: dict[str, Any], args: argparse.Namespace) -> None:
    """Training compositions (at ``--sizes``): their baselines measured ahead (in lanes), then
    a first visit and a warm visit through one lane and through the lanes. Figures under
    ``compositions`` (full sizes) or ``compositions_small``."""
    jobs = _compositions(args, args.sizes)
    out: dict[str, Any] = {"tasks": len(jobs), "sizes": args.sizes}
    with Sandbox(SandboxConfig(backend=args.backend, lanes_per_gpu=_lanes(args))) as sandbox:
        t0 = time.perf_counter()
        statuses = sandbox.measure_baselines([t for t, _ in jobs])
        out["baselines_ahead"] = {
            "seconds": time.perf_counter() - t0,
            "lanes_per_gpu": sandbox.config.lanes_per_gpu,
            "statuses": _count(x.status for x in statuses),
        }
    print("baselines ahead", out["baselines_ahead"], flush=True)
    pools = {"one_lane": 1, "lanes": _lanes(args)}
    for name, lanes in ((n, pools[n]) for n in args.pools.split(",")):
        with Sandbox(SandboxConfig(backend=args.backend, lanes_per_gpu=lanes)) as sandbox:
            sandbox.warm_up()
            passes = {}
            for visit in ("first", "warm"):
                t0 = time.perf_counter()
                results = sandbox.evaluate_many(jobs)
                seconds = time.perf_counter() - t0
                passes[visit] = {
                    "seconds": seconds,
                    "evaluations_per_minute": 60 * len(results) / seconds,
                    "median_wall_s": statistics.median(r.wall_seconds or 0 for r in results),
                    "statuses": _count(r.status for r in results),
                    "where": _where(results),
                    "failures": _failures(jobs, results),
                    "reruns_alone": sum("rerun_alone" in r.extra for r in results),
                    # what each job's reference worker held when a check began (GiB, most first)
                    "reference_held_gib": sorted(
                        (
                            round(r.extra.get("reference_held_gpu_bytes", 0) / 2**30, 2)
                            for r in results
                        ),
                        reverse=True,
                    ),
                }
            pool = sandbox._lanes  # what admission by memory learnt (_parent/lanes.py)
            out[name] = {
                "lanes_per_gpu": sandbox.config.lanes_per_gpu,
                "gate": sandbox.gate_stats(),
                "footprints_gib": sorted(round(b / 2**30, 2) for b in pool.footprints.values()),
                "capacity_gib": {str(d): round(b / 2**30, 2) for d, b in pool.capacity.items()},
                **passes,
            }
        print(name, json.dumps({k: v["evaluations_per_minute"] for k, v in passes.items()}))
    report["compositions" if args.sizes == "full" else "compositions_small"] = out


def _failures(jobs: list[tuple[Any, str]], results: list[EvalResult]) -> list[dict[str, Any]]:
    """Each verdict that is not ``ok`` (these are honest answers): its task, status, message
    and the keys of ``extra`` that say where it failed."""
    keys = ("rerun_alone", "lane", "reference_failed", "task_refused", "trivial_answer_rule")
    return [
        {
            "task": task.name,
            "status": r.status,
            "message": r.message[:4000],
            **{k: r.extra[k] for k in keys if k in r.extra},
        }
        for (task, _), r in zip(jobs, results, strict=True)
        if r.status != "ok"
    ]


def _where(results: list[EvalResult]) -> dict[str, Any]:
    """Medians of a job's seconds by part, and the GPU floor of its timing."""
    parts: dict[str, list[float]] = {}
    floors = []
    for r in results:
        for key, value in (r.extra.get("seconds") or {}).items():
            if isinstance(value, int | float):
                parts.setdefault(key, []).append(float(value))
        if r.candidate_time_ms and r.eager_time_ms:
            # Timing runs warm-up (3) and at least 20 rounds of candidate and eager, each after
            # an L2 flush (about 0.06 ms): the least GPU time it can take.
            floors.append((3 + 20) * (r.candidate_time_ms + r.eager_time_ms + 2 * 0.06) / 1e3)
    medians = {k: statistics.median(v) for k, v in sorted(parts.items())}
    return {
        "median_seconds": medians,
        "median_timing_floor_s": statistics.median(floors) if floors else None,
        "median_eager_ms": statistics.median(r.eager_time_ms for r in results if r.eager_time_ms)
        if any(r.eager_time_ms for r in results)
        else None,
    }


PARTS = {
    "suite": part_suite,
    "control": part_control,
    "redteam": part_redteam,
    "aa": part_aa,
    "aa_small": part_aa_small,
    "compositions": part_compositions,
    "scaling": part_scaling,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--parts", default="suite,control,redteam,aa")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--lanes", type=int, default=0, help="lanes per GPU (0: auto)")
    parser.add_argument("--kernelbench", default=".kernelbench/KernelBench")
    parser.add_argument("--backend", default="cuda", help="cpu: a smoke run of the script")
    parser.add_argument("--compositions", type=int, default=24)
    parser.add_argument(
        "--pools", default="one_lane,lanes", help="compositions: which pools (one_lane, lanes)"
    )
    parser.add_argument("--sweep", default="1,2,4,8,12", help="scaling: lane counts")
    parser.add_argument(
        "--gathers", default="0.25", help="scaling: the gate's timing_gather_s values to try"
    )
    parser.add_argument("--tasks", default="", help="built-in task names (default: all)")
    parser.add_argument(
        "--sizes",
        choices=("full", "small"),
        default="full",
        help="compositions: their module's sizes, or the trainer's --train-sizes small",
    )
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "lanes.json"
    report = json.loads(path.read_text()) if path.exists() else {}
    for part in args.parts.split(","):
        started = time.perf_counter()
        PARTS[part](report, args)
        report.setdefault("part_seconds", {})[part] = time.perf_counter() - started
        command = f"python benchmarks/gpu/lanes.py OUT_DIR --parts {args.parts}"
        command += f" --sizes {args.sizes}" * (args.sizes != "full")
        if "scaling" in args.parts:
            command += f" --sweep {args.sweep} --gathers {args.gathers}"
        report.update(provenance("lanes", command, 1), gpu=report.get("machine", ""))
        path.write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps({k: v for k, v in report.items() if not isinstance(v, dict | list)}))


if __name__ == "__main__":
    main()
