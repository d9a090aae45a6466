"""Issue 28's RL-step figures from a training run's ``metrics.jsonl``: how fast the sandbox
judged the answers of the RL steps, and how much of a step waited for it.

    python benchmarks/rl_step_figures.py RUN_DIR OUT.json [--skip-first N] [--command C]

Each RL step's record (stage ``rl``) carries its wall time (``seconds``), the time it sampled
(``sampling_s``), the time its rollouts took (``rollout_s``: sampling and judging, overlapped
where the agent overlaps them), the answers judged (``evaluations``), the programs the sandbox
ran for them (``sandbox_jobs``: identical answers in a group share one verdict) and the sandbox's
busy time (``sandbox_s``: the union of its busy windows, as the agent measures it). Over the
steps:

- ``answers_per_minute`` = 60 * sum(evaluations) / sum(seconds): issue 28's
  ``rl_step_evaluations_per_minute`` (answers, shared verdicts counted: what the trainer got);
- ``sandbox_jobs_per_minute`` = 60 * sum(sandbox_jobs) / sum(seconds), and
  ``sandbox_jobs_per_busy_minute`` over the steps' ``sandbox_s`` instead: the sandbox's own rate;
- ``sandbox_share`` = sum(rollout_s - sampling_s) / sum(seconds): the share of the steps' time
  in which the rollouts went on with nothing sampling, i.e. the sandbox time that did not overlap
  sampling (issue 28's ``rl_step_sandbox_share``; the agent's own bookkeeping, a fraction of a
  second a step, is in it too);
- ``gpu_busy_share``: the mean GPU utilisation (NVML's share of time a kernel ran) over the
  steps' ``sandbox_windows`` (``time.monotonic()`` spans of the sandbox's work), from the
  ``gpu_util_call<N>.csv`` files ``learning_run.py`` writes beside the run's figures on a GPU
  (``gpu/gpu_util.py``): issue 28's ``rl_step_gpu_busy_share``, how busy the GPU was while the
  sandbox judged (sampling that overlapped it counts too); None without those files. Each
  call's readings carry its machine's clock: a step within a span of time that two calls'
  readings both cover (a run resumed on another machine) is left out of it
  (``gpu_busy_steps``: the steps it is over);
- ``median_step_s``, ``steps``, ``reruns_alone`` (jobs run again with the device alone after an
  out-of-memory beside other lanes), ``worker_start_s`` (the seconds jobs waited for their
  lane's worker to start again after an answer's fault killed it), ``gate_wait_s`` (the
  seconds jobs waited at their device's timing gate), ``distinct_answers_first`` / ``_last``
  (the mean share of distinct answers in the first and last five steps).

``--skip-first N`` adds the same figures without the first N steps (``without_first``): the
first step of a run pays the policy's first decoding shapes and the tasks' first visits. A run
resumed over several processes (``learning_run.py``'s calls, its ``learning_run.json`` in
RUN_DIR) pays them again in the first step of each: ``without_first_of_each_call`` leaves those
out (``first_steps_of_calls``: which they were).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
from gpu_util import mean_within, read_log
from provenance import commit


def figures(
    steps: Sequence[dict[str, Any]], gpu: Sequence[Sequence[tuple[float, float]]] = ()
) -> dict[str, Any]:
    """The module docstring's figures over ``steps`` (RL step records), ``gpu`` the GPU's
    utilisation readings of each call (``gpu_readings``). ValueError for no steps."""
    if not steps:
        raise ValueError("no RL steps in the metrics")
    seconds = sum(s["seconds"] for s in steps)
    answers = sum(s.get("evaluations", 0) for s in steps)
    jobs = sum(s.get("sandbox_jobs", s.get("evaluations", 0)) for s in steps)
    busy = sum(s.get("sandbox_s", 0.0) for s in steps)
    alone = sum(s.get("rollout_s", 0.0) - s.get("sampling_s", 0.0) for s in steps)
    distinct = [s["distinct_answers"] for s in steps if "distinct_answers" in s]
    # the steps whose sandbox windows no two calls' readings both cover (``clashes``)
    clash = clashes(gpu)
    clear = [s for s in steps
             if not any(w[0] <= b and a <= w[1] for w in _windows(s) for a, b in clash)]  # fmt: skip
    windows = [w for s in clear for w in _windows(s)]
    readings = sorted(r for call in gpu for r in call)
    busy_gpu = mean_within(readings, windows) if readings and windows else None
    return {
        "steps": len(steps),
        "seconds": round(seconds, 1),
        "median_step_s": round(statistics.median(s["seconds"] for s in steps), 2),
        "answers": answers,
        "answers_per_minute": round(60 * answers / seconds, 1),
        "sandbox_jobs": jobs,
        "sandbox_jobs_per_minute": round(60 * jobs / seconds, 1),
        "sandbox_busy_s": round(busy, 1),
        "sandbox_jobs_per_busy_minute": round(60 * jobs / busy, 1) if busy else None,
        "sandbox_share": round(alone / seconds, 3),
        "gpu_busy_share": round(busy_gpu, 3) if busy_gpu is not None else None,
        "gpu_busy_steps": len(clear) if busy_gpu is not None else 0,
        "reruns_alone": sum(s.get("reruns_alone", 0) for s in steps),
        "worker_start_s": round(sum(s.get("worker_start_s", 0.0) for s in steps), 1),
        "gate_wait_s": round(sum(s.get("gate_wait_s", 0.0) for s in steps), 1),
        "distinct_answers_first": round(statistics.fmean(distinct[:5]), 3) if distinct else None,
        "distinct_answers_last": round(statistics.fmean(distinct[-5:]), 3) if distinct else None,
    }


def _windows(step: dict[str, Any]) -> list[list[float]]:
    """The step's sandbox windows (a list, or its text where a writer flattened it)."""
    windows = step.get("sandbox_windows") or []
    return json.loads(windows) if isinstance(windows, str) else list(windows)


def gpu_readings(run_dir: Path) -> list[list[tuple[float, float]]]:
    """The readings of each ``gpu_util_call<N>.csv`` in ``run_dir`` (a list per call, in time
    order; calls without a reading left out)."""
    calls = [sorted(read_log(path)) for path in sorted(run_dir.glob("gpu_util_call*.csv"))]
    return [c for c in calls if c]


def clashes(calls: Sequence[Sequence[tuple[float, float]]]) -> list[tuple[float, float]]:
    """The spans of time that two calls' readings both cover. Each call's readings are stamped
    with its machine's ``time.monotonic()`` (seconds since that machine booted): calls on one
    machine follow each other and never clash, but a run resumed on another machine may have
    readings of both at the same clock values, which then cannot be told apart."""
    spans = [(c[0][0], c[-1][0]) for c in calls]
    return [
        (max(a[0], b[0]), min(a[1], b[1]))
        for i, a in enumerate(spans)
        for b in spans[i + 1 :]
        if max(a[0], b[0]) <= min(a[1], b[1])
    ]


def rl_steps(run_dir: Path) -> list[dict[str, Any]]:
    """The RL step records of the run's ``metrics.jsonl``, in order."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r.get("stage") == "rl" and "seconds" in r and "step" in r]


def first_steps_of_calls(run_dir: Path) -> list[int]:
    """The RL step that began each call of a run resumed over several (from the RL steps each
    call of ``learning_run.json`` had reached when it ended); [] without that file."""
    path = run_dir / "learning_run.json"
    if not path.exists():
        return []
    calls = json.loads(path.read_text()).get("calls", [])
    reached = [int(c.get("stage_steps", {}).get("rl", 0)) for c in calls]
    # a call began at the step its predecessor reached; the last call's end begins none
    return sorted({0, *reached[:-1]})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--skip-first", type=int, default=0)
    parser.add_argument("--command", default="", help="the command that made the run")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        steps = rl_steps(args.run_dir)
        gpu = gpu_readings(args.run_dir)
        report = figures(steps, gpu)
        if args.skip_first:
            report["without_first"] = figures(steps[args.skip_first :], gpu)
        firsts = first_steps_of_calls(args.run_dir)
        if len(firsts) > 1:
            report["first_steps_of_calls"] = firsts
            rest = [s for s in steps if s["step"] not in firsts]
            report["without_first_of_each_call"] = figures(rest, gpu)
    except (OSError, ValueError, KeyError) as error:
        print(f"rl_step_figures: {args.run_dir}: {error}")
        return 1
    report.update(run_command=args.command, commit=commit())
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    keys = ("answers_per_minute", "sandbox_share", "gpu_busy_share")
    print(json.dumps({k: report[k] for k in keys}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
