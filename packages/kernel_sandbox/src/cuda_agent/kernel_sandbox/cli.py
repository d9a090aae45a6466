"""``kernel-sandbox eval TASK CANDIDATE``, ``kernel-sandbox check-task TASK``,
``kernel-sandbox baselines DIR`` and ``kernel-sandbox jobs LOG``.

``eval`` exits 0 whenever a verdict was produced (whatever it is); ``check-task`` exits 0 when
the task rewards no trivial answer and 1 when it has findings; ``baselines`` measures the
``torch.compile`` baselines of a task directory ahead (kept on disk, as evaluations keep them)
and exits 0 when none failed, 1 otherwise. ``jobs`` says what a job log
(``$CUDA_AGENT_JOB_LOG``) holds: the verdicts, and the jobs still waiting for a lane or running
when it stopped (exit 0). All exit 2 on a usage error (a missing or broken task, candidate or
log file, a bad option).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

from ._parent.job_log import read_events, summarize
from .candidates import read_candidate
from .config import TOLERANCE_PRESETS, SandboxConfig
from .errors import TaskError
from .sandbox import Sandbox
from .tasks import load_task, load_tasks
from .validate import validate_task

_USAGE_ERRORS = (TaskError, OSError, ValueError, UnicodeDecodeError)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernel-sandbox", description="Verify and time candidate kernels in isolation."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("eval", help="evaluate one candidate (a ModelNew module) on one task")
    ev.add_argument("task", help="KernelBench-format task file, or a task directory")
    ev.add_argument(
        "candidate",
        help="Python file defining ModelNew, or a work directory (kernels/, model_new.py)",
    )
    ev.add_argument("--trials", type=int, default=5)
    check = sub.add_parser(
        "check-task",
        help="report outputs of a task that an answer computing nothing would pass "
        "(exit 1 when there are any)",
    )
    check.add_argument("task", help="KernelBench-format task file, or a task directory")
    check.add_argument("--draws", type=int, default=3, help="input draws (seeds) to compare")
    ahead = sub.add_parser(
        "baselines",
        help="measure the torch.compile baselines of every task in a directory ahead, in "
        "parallel lanes (kept per task, sizes, GPU and torch version; kept ones are skipped)",
    )
    ahead.add_argument("tasks", help="a directory of KernelBench-format task files")
    ahead.add_argument("--lanes-per-gpu", type=int, default=0, help="lanes (0: auto)")
    jobs = sub.add_parser(
        "jobs",
        help="summarise a job log ($CUDA_AGENT_JOB_LOG): verdicts, and the jobs still waiting "
        "for a lane or running when it stopped",
    )
    jobs.add_argument("log", help="the file $CUDA_AGENT_JOB_LOG named")
    jobs.add_argument("--json", action="store_true", help="print the summary as JSON")
    for command in (ev, check, ahead):
        command.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
        command.add_argument(
            "--tolerance",
            choices=tuple(TOLERANCE_PRESETS),
            default="cuda-agent",
            help="named tolerances: cuda-agent (atol = rtol = 1e-2), kernelbench (1e-4 for "
            "float32, 1e-2 for half precision)",
        )
        command.add_argument("--atol", type=float, help="absolute tolerance (over the preset's)")
        command.add_argument("--rtol", type=float, help="relative tolerance (over the preset's)")
        command.add_argument("--json", action="store_true", help="print the full result as JSON")
    return parser


def _config(args: argparse.Namespace, trials: int = 5) -> SandboxConfig:
    return SandboxConfig(
        backend=args.backend,
        workers=1,
        trials=trials,
        tolerance=args.tolerance,
        atol=args.atol,
        rtol=args.rtol,
    )


def _eval(args: argparse.Namespace) -> int:
    try:
        task = load_task(args.task)
        candidate = read_candidate(Path(args.candidate))
        config = _config(args, trials=args.trials)
    except _USAGE_ERRORS as exc:
        print(f"kernel-sandbox: {exc}", file=sys.stderr)
        return 2
    with Sandbox(config) as sandbox:
        result = sandbox.evaluate(task, candidate)
    if args.json:
        print(result.to_json(indent=2))
        return 0
    print(f"{result.status}: {result.message}")
    if result.candidate_time_ms is not None:
        line = f"candidate {result.candidate_time_ms:.4g} ms"
        if result.eager_time_ms is not None and result.speedup_vs_eager is not None:
            line += f" | eager {result.eager_time_ms:.4g} ms ({result.speedup_vs_eager:.2f}x)"
        if result.compile_time_ms is not None and result.speedup_vs_compile is not None:
            line += f" | compile {result.compile_time_ms:.4g} ms ({result.speedup_vs_compile:.2f}x)"
        print(line)
    return 0


def _check_task(args: argparse.Namespace) -> int:
    try:
        task = load_task(args.task)
        report = validate_task(task, _config(args), draws=args.draws)
    except _USAGE_ERRORS as exc:
        print(f"kernel-sandbox: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(report.to_json(indent=2))
    elif report.ok:
        print(
            f"ok: no trivial answer passes {report.task} ({len(report.seeds)} draws at sizes "
            f"{report.sizes}, atol={report.atol:g}, rtol={report.rtol:g})"
        )
    else:
        print(f"{report.task}: {len(report.findings)} finding(s)")
        for finding in report.findings:
            print(f"  {finding}")
    return 0 if report.ok else 1


def _baselines(args: argparse.Namespace) -> int:
    try:
        tasks = load_tasks(args.tasks)
        config = replace(
            _config(args),
            workers=0,
            lanes_per_gpu=args.lanes_per_gpu or "auto",
            time_compile=True,
        )
    except _USAGE_ERRORS as exc:
        print(f"kernel-sandbox: {exc}", file=sys.stderr)
        return 2
    with Sandbox(config) as sandbox:
        statuses = sandbox.measure_baselines(
            tasks,
            progress=None if args.json else lambda s: print(f"{s.task}: {s.status}", flush=True),
        )
    if args.json:
        print(json.dumps([asdict(s) for s in statuses], indent=2))
    failed = [s.task for s in statuses if s.status == "failed"]
    if not args.json:
        kept = sum(s.status == "kept" for s in statuses)
        print(f"{len(statuses) - kept - len(failed)} measured, {kept} kept, {len(failed)} failed")
    return 1 if failed else 0


def _jobs(args: argparse.Namespace) -> int:
    try:
        found = summarize(read_events(args.log))
    except _USAGE_ERRORS as exc:
        print(f"kernel-sandbox: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    print(f"{found['arrived']} jobs arrived, {found['started']} got a lane, {found['ended']} "
          f"ended, {found['reruns_alone']} ran again alone")  # fmt: skip
    if found["statuses"]:
        print("verdicts: " + ", ".join(f"{k} {v}" for k, v in found["statuses"].items()))
    for name in ("wall_s", "lane_wait_s"):
        if found[name]:
            print(f"{name}: median {found[name]['median']:.3g}, max {found[name]['max']:.3g}")
    for name, what in (("waiting", "waiting for a lane"), ("running", "running")):
        if found[name]:
            print(f"{len(found[name])} still {what} when the log stopped:")
            for job in found[name][:20]:
                lane = f" on lane {job['lane']}" if job["lane"] else ""
                print(f"  {job['task']}{lane}: {job['seconds']:.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"check-task": _check_task, "baselines": _baselines, "eval": _eval, "jobs": _jobs}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
