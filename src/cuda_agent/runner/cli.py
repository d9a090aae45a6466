"""``cuda-agent`` command line: ``cuda-agent train [options]``, ``cuda-agent solve TASK``,
``cuda-agent eval [options]``, ``cuda-agent synth``, ``cuda-agent compare BEFORE AFTER``,
``cuda-agent report DIR``.

``train`` and ``eval`` end with a short table and the path of ``report.html``; with ``--json``
they print the machine-readable summary (``summary.json``, ``eval.json``) on stdout instead,
their progress lines and the table going to stderr."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from .config import TrainConfig, presets, read_toml
from .solve import SolveOptions

_JSON_HELP = (
    "print the summary as JSON ({}) on stdout when done, for scripts; the progress lines "
    "and the closing table go to stderr"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cuda-agent", description="Train LLMs with agentic RL to write fast kernels."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser(
        "train",
        help="run a training run (defaults: embedded SmolLM2-135M, built-in tasks, CPU or GPU)",
        epilog="exit codes: 0 the run is finished; 2 a mistake in the arguments, model or "
        "tasks; 3 a stability bound stopped it (--guard-action stop); 75 stopped for "
        "--stop-after or --deadline: run 'cuda-agent train --resume RUN_DIR' (again with a "
        "deadline, if wanted) to continue; killed: --resume continues it as well",
    )
    train.add_argument(
        "--resume", metavar="RUN_DIR", help="continue a killed run from its last checkpoint"
    )
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.add_argument("--json", action="store_true", help=_JSON_HELP.format("summary.json"))
    train.add_argument(
        "--stop-after",
        metavar="SECONDS",
        type=_seconds,
        help="stop cleanly, between two steps or evaluations, when the next one is not "
        "expected to finish within SECONDS of this command's start; exit code 75 then "
        "means 'continue with --resume RUN_DIR' (nothing is lost or done twice). Not saved: "
        "each invocation gives its own (--train-budget-s caps the whole run's training)",
    )
    train.add_argument(
        "--deadline",
        metavar="WHEN",
        type=_when,
        help="as --stop-after, by a moment: seconds since the epoch or an ISO 8601 time "
        "(2026-12-03T14:05:00, local unless it names its zone); with both, the earlier wins",
    )
    train.add_argument(
        "--unit-estimates",
        metavar="PATH",
        type=_unit_estimates,
        help="with --stop-after/--deadline: how long a unit (a stage's step, an evaluation) "
        "takes before this run has timed one, from another run (its directory or state.json) "
        "or a JSON object of kind to seconds; a kind never timed otherwise starts only first "
        "in an invocation. Not saved: give it again with --resume",
    )
    train.add_argument(
        "--preset",
        "--config",
        dest="preset",
        metavar="NAME|FILE.toml",
        action="append",
        default=[],
        help=f"settings from a shipped preset ({', '.join(presets())}; cpu-default when none "
        "is given) or a TOML file; "
        "repeatable, later ones win; flags override them",
    )
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        kind = type(field.default)
        help_text = {
            "out": "run directory (default runs/<timestamp>)",
            "tasks": "training tasks: a directory or file (KernelBench directories as they "
            "are), 'builtin', 'compact' (the built-in tasks with short CUDA solutions), 'synth', "
            "'synth-variants' (the synthesized row reductions, which have a second layout) or "
            "'starter' (default: the built-in starter suite)",
            "eval_tasks": "held-out tasks, never trained on: a directory or file, "
            "'heldout-ops' (six built-in tasks outside the starter suite: the default), "
            "'heldout-compositions' (synthesized, operator combinations no training set has) or "
            "'kernelbench-l1-subset' (needs --kernelbench); several joined by '+'",
            "kernelbench": "a KernelBench checkout for 'kernelbench-l1-subset' (default: "
            "$CUDA_AGENT_KERNELBENCH)",
            "train_sizes": "'small': train each task that has one at its smaller GPU variant "
            "(SMALL_SIZES; the shipped compositions' manifest): more candidates fit the "
            "sandbox's lanes at once",
            "eval_sizes": "'small': evaluate each held-out task that has one at its smaller GPU "
            "variant (the held-out compositions' manifest): on an 80 GB GPU beside the trainer "
            "their full sizes (4 GiB inputs) run out of memory; KernelBench keeps its sizes",
            "model": "smollm2-135m-gguf (embedded), a hub id, a local directory or a .gguf file",
            "init_from": "start from another run's weights: RUN_DIR (its final adapter, else "
            "its last checkpoint) or an adapter directory; e.g. RL and an SFT-only control "
            "both from one warm-start run (same --model and --lora-rank)",
            "warmstart_until_nll": "end the warm start once the median NLL per token of its "
            "last 20 steps is at or below this (0: every step); a policy trained far below "
            "0.01 samples one answer per prompt, which leaves RL nothing to choose between",
            "share_verdicts": "identical answers to one task in one evaluation call get one "
            "verdict (one program, judged once; false: each judged, as before 2026-12-05)",
            "curriculum": "which training tasks an RL step takes: uniform (a seeded draw) or "
            "signal (weighted by the chance their next group's rewards differ, Laplace's rule over "
            "their last 4 groups: tasks whose groups all scored alike are taken less)",
            "quiet_timing": "the policy samples apart from the sandbox's timings on its "
            "device: no candidate or baseline is timed beside the sampling (false: timings may "
            "share the GPU with it, as before 2026-12-05: faster, noisier speedups)",
            "max_new_tokens": "answer budget in tokens; 0 = auto: fits the longest warm-start "
            "answer (an explicit budget too small for it is refused)",
            "repetition_stop": "a window W in tokens (0: off, else >= 8): an answer ends, "
            "finish 'repetition', once its latest W tokens repeat with a period of at most W/4",
            "updates_per_batch": "optimizer steps an RL batch is split into (PPO mini-batches)",
            "ppo_epochs": "passes over each RL batch (PPO epochs, GRPO's mu): from the second "
            "on, ratios to the sampling policy move off 1 and the clip (--eps-low, --eps-high) "
            "bounds them",
        }.get(field.name, "")
        # default None: a flag given on the command line is told apart from a preset's value
        train.add_argument(
            flag,
            type=_boolean if kind is bool else kind,
            default=None,
            help=f"{help_text} (default: {field.default!r})",
        )
    solve = sub.add_parser(
        "solve",
        help="run the agent on one task file (a KernelBench problem as it is), turn by turn",
    )
    solve.add_argument("task", help="a task file: Model, get_inputs, get_init_inputs")
    for field in dataclasses.fields(SolveOptions):
        if field.name == "task":
            continue
        help_text = {
            "model": "smollm2-135m-gguf (embedded), a hub id, a local directory or a .gguf file",
            "endpoint": "an OpenAI-compatible API root (http://host:port/v1) instead of --model",
            "api_model": "the endpoint's model name (default: the first it lists)",
            "backend": "cpu or cuda (default: cuda when a GPU is visible)",
            "turns": "most turns of the episode",
            "protocol": "how answers are read: fenced (one ```python block a turn)",
        }.get(field.name, "")
        solve.add_argument(
            "--" + field.name.replace("_", "-"),
            type=type(field.default),
            default=field.default,
            help=f"{help_text} (default: {field.default!r})",
        )
    solve.add_argument("--quiet", action="store_true", help="no live display")
    _eval_parser(sub)
    from . import report, synth_command
    from .eval import comparison

    synth_command.add_parser(sub)
    comparison.add_parser(sub)
    report.add_parser(sub)
    return parser


def _eval_parser(sub: Any) -> None:
    from .eval.command import EvalOptions

    ev = sub.add_parser(
        "eval",
        help="evaluate a model on tasks: pass rate, fast_p, pass@k (eval.json, eval.md, "
        "report.html)",
    )
    help_text = {
        "tasks": "a task directory (KernelBench level directories as they are) or file, or a "
        "named set: 'builtin' (every built-in task), 'starter', 'compact', 'synth', "
        "'heldout-ops', 'heldout-compositions', 'kernelbench-l1-subset' (needs --kernelbench); "
        "several joined by '+'",
        "kernelbench": "a KernelBench checkout for 'kernelbench-l1-subset' (default: "
        "$CUDA_AGENT_KERNELBENCH)",
        "temperature": "sampling temperature (0: greedy; with --samples K > 1 use > 0)",
        "model": "smollm2-135m-gguf (embedded), a hub id, a local directory or a .gguf file "
        "(default: the adapter's base model, else smollm2-135m-gguf)",
        "adapter": "a trained adapter: RUN/adapter (or the run directory RUN)",
        "endpoint": "an OpenAI-compatible API root (http://host:port/v1) instead of --model",
        "api_model": "the endpoint's model name (default: the first it lists)",
        "device": "policy device: auto, cpu, cuda, cuda:1, ...",
        "turns": "most turns of each episode",
        "samples": "episodes per task: pass@1 is the mean over them, pass@k up to k = samples; "
        "each figure comes with a 95%% bootstrap interval over tasks",
        "out": "output directory; rerun on it to resume (default runs/eval-<timestamp>)",
        "backend": "sandbox backend: cpu, cuda or auto (cuda when a GPU is visible)",
        "time_compile": "time torch.compile too (default: only on CUDA)",
        "batch": "tasks that share one batch of episodes (a chunk, written as it ends; "
        "each '+'-joined set of --tasks is chunked on its own)",
        "set_samples": "SET=N[,SET=N...]: another number of samples for some '+'-joined sets "
        "of --tasks (e.g. kernelbench-l1-subset=1: each of its verdicts holds a GPU alone)",
        "sizes": "'small': each task at its smaller GPU variant where it has one (the shipped "
        "compositions' small_sizes, a task file's SMALL_SIZES), as `train --eval-sizes small`; "
        "'full': the module's sizes",
        "micro_batches": "a batch's episodes in this many turns of sampling, each judged while "
        "the next samples (0: 2 on the CUDA backend, 1 elsewhere, as train's evaluations)",
        "repetition_stop": "end an answer, finish 'repetition', once its latest W tokens "
        "repeat with a period of at most W/4 (0: off, also for an adapter trained with it)",
    }
    for field in dataclasses.fields(EvalOptions):
        flag = "--" + field.name.replace("_", "-")
        text = help_text.get(field.name, "")
        if isinstance(field.default, bool):
            ev.add_argument(flag, action="store_true", help=text)
            continue
        if "(default" not in text:
            text = f"{text} (default: {field.default!r})".strip()
        ev.add_argument(flag, type=type(field.default), default=field.default, help=text)
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    ev.add_argument("--json", action="store_true", help=_JSON_HELP.format("eval.json"))


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, not {text!r}")
    return value


def _when(text: str) -> float:
    """A moment as seconds since the epoch: a number, or an ISO 8601 time (naive: local)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected seconds since the epoch or an ISO 8601 time, not {text!r}"
        ) from None


def _unit_estimates(text: str) -> dict[str, float]:
    from .deadline import read_unit_estimates

    try:
        return read_unit_estimates(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _process_start() -> float:
    """When this process started, in seconds since the epoch (Linux: from /proc, to the
    second; elsewhere: now). ``--stop-after`` counts from it, so the interpreter's and
    torch's start-up are inside the limit a caller gives."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # starttime: clock ticks after boot
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        started = boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()
    return min(started, time.time())


def _deadline(args: argparse.Namespace) -> float | None:
    """The moment ``--stop-after`` and ``--deadline`` give (the earlier), or None."""
    moments = [args.deadline] if args.deadline is not None else []
    if args.stop_after is not None:
        moments.append(_process_start() + args.stop_after)
    return min(moments, default=None)


def _boolean(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")


def _config(args: argparse.Namespace) -> TrainConfig:
    """Defaults, then each preset in order, then the flags given; raises ValueError."""
    values: dict[str, Any] = {}  # checked by name and type (read_toml, argparse), then by value
    for preset in args.preset or ["cpu-default"]:
        values.update(read_toml(preset))
    for field in dataclasses.fields(TrainConfig):
        given = getattr(args, field.name)
        if given is not None:
            values[field.name] = given
    return TrainConfig(**values)


def _solve(args: argparse.Namespace) -> int:
    from cuda_agent.kernel_sandbox import TaskError
    from cuda_agent.policy import ModelNotAvailableError, RemotePolicyError

    from .solve import solve

    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(SolveOptions)}
    try:
        solve(SolveOptions(**values), live=not args.quiet)
    except (ModelNotAvailableError, TaskError, RemotePolicyError, ValueError) as exc:
        print(f"cuda-agent: {exc}", file=sys.stderr)
        return 2
    return 0


def _eval(args: argparse.Namespace) -> int:
    from cuda_agent.kernel_sandbox import TaskError
    from cuda_agent.policy import ModelNotAvailableError, RemotePolicyError

    from .eval.command import EvalOptions, run_eval
    from .eval.evaluate import EvaluationError

    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(EvalOptions)}
    try:
        result = run_eval(EvalOptions(**values), progress=not args.quiet, log=_log(args.json))
    except (ModelNotAvailableError, TaskError, RemotePolicyError, ValueError) as exc:
        print(f"cuda-agent: {exc}", file=sys.stderr)
        return 2
    except EvaluationError as exc:  # what was finished is kept: the same --out resumes
        print(f"cuda-agent: {exc}; rerun with the same --out to resume", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


def _log(to_stderr: bool) -> Any:
    """Where a command's lines go: stdout, or stderr when stdout is kept for ``--json``
    (through tqdm, so that a progress bar is not broken)."""
    from tqdm import tqdm

    return (lambda text: tqdm.write(text, file=sys.stderr)) if to_stderr else tqdm.write


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "solve":
        return _solve(args)
    if args.command == "eval":
        return _eval(args)
    if args.command == "synth":
        from . import synth_command

        return synth_command.run(args)
    if args.command == "compare":
        from .eval import comparison

        return comparison.run(args)
    if args.command == "report":
        from . import report

        return report.run(args)
    if args.command == "train":
        from . import distributed

        if args.unit_estimates is not None and args.stop_after is None and args.deadline is None:
            print("cuda-agent: --unit-estimates needs --stop-after or --deadline", file=sys.stderr)
            return 2

        try:
            if args.resume:
                run_dir = Path(args.resume)
                if not (run_dir / "config.json").exists():
                    print(
                        f"cuda-agent: {run_dir} is not a run directory (no config.json)",
                        file=sys.stderr,
                    )
                    return 2
                config = TrainConfig.from_json(run_dir / "config.json")
                # flags given with --resume change the saved settings (a stability bound, more
                # steps); presets are not re-read
                given = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)}
                changes = {k: v for k, v in given.items() if v is not None}
                config = dataclasses.replace(config, **{**changes, "out": str(run_dir)})
            else:
                config = _config(args)
            distributed.check(config)  # under torchrun: work for every process
        except ValueError as exc:
            print(f"cuda-agent: {exc}", file=sys.stderr)
            return 2
        try:
            return _train_command(args, config, _deadline(args))
        finally:
            distributed.shutdown()  # under torchrun: leave the process group cleanly
    return 0


def _train_command(args: argparse.Namespace, config: TrainConfig, at: float | None) -> int:
    """``cuda-agent train`` once its config is read: the run, and its exit code."""
    from cuda_agent.kernel_sandbox import TaskError
    from cuda_agent.policy import ModelNotAvailableError

    from . import distributed
    from .budget import BudgetError
    from .context import InitFromError, StabilityError
    from .deadline import EX_TEMPFAIL, Deadline, DeadlineStop
    from .run_lock import RunInUseError
    from .task_sets import TaskSetError
    from .train import train

    try:
        summary = train(
            config,
            log=_log(args.json) if args.json else print,
            progress=not args.quiet,
            deadline=None if at is None else Deadline(at, prior=args.unit_estimates or {}),
        )
    except DeadlineStop as exc:  # one line: where it stopped and how to go on
        if distributed.is_main():
            print(f"cuda-agent: {exc}", file=sys.stderr)
        return EX_TEMPFAIL
    except (
        ModelNotAvailableError,
        TaskError,
        BudgetError,
        TaskSetError,
        InitFromError,
        RunInUseError,
    ) as exc:
        # A user's mistake (a model or task that is not there): say what to do, no traceback.
        print(f"cuda-agent: {exc}", file=sys.stderr)
        return 2
    except StabilityError as exc:
        print(
            f"cuda-agent: {exc}; the run is resumable: --resume RUN_DIR with other bounds "
            "(--guard-...) or --guard-action skip",
            file=sys.stderr,
        )
        return 3
    if args.json and distributed.is_main():  # (rank 0 speaks for the run)
        print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
