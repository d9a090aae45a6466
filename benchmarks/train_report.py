"""Summarise a finished ``cuda-agent train`` run as a figures JSON (CPU or GPU).

    python benchmarks/train_report.py RUN_DIR OUT.json --wall-s S [--label default]
        [--command "..."] [--machine "..."] [--learning LEARNING.json]

Fields: date, commit, machine, torch, model, wall_s, the held-out and training tasks, each
evaluation's pass rate, faster-than-eager rate, mean reward and per-task rewards (``before`` and
``after`` for both sets, which never meet, and ``warmstart`` where the run evaluated after the
warm start), seconds per stage, and the RL steps' statistics.

``--learning`` also writes issue 17's ``learning.json``: the held-out pass rate and
faster-than-eager rate before training, after the warm start and after RL (shares in 0..1),
the gains of RL over the warm start, whether both reach ``TARGET_GAIN``, ``training_s`` (the
seconds of the training stages, evaluations left out), ``model``, ``gpu`` and ``commit``;
with an evaluation after the warm start, ``gain_rl_over_warmstart_paired`` (each metric's
paired gain with its 95% bootstrap interval over the tasks, ``runner.comparison.compare``) and,
for each of ``heldout_compositions``, ``heldout_ops`` and ``kernelbench_l1_subset`` whose tasks
the run evaluated, issue 29's block (``per_set``: tasks, samples, each side with its
intervals, RL's gain with its interval's ends). ``--control RUN_DIR`` names the SFT-only
control (warm start alone, for as long as this run trained; ``--control-trained RUN_DIR`` where
it is an evaluation-only run of a control trained before, which that names): each block then
also holds the control against the warm start and RL's paired gain over the control
(``rl_over_control``).
The whole evaluation's rates (``heldout_*``, ``gain_rl_over_warmstart``, ``target_met``) are
over all its tasks; where its sets had different sample counts (``--eval-set-samples``) they mix
best-of-4 tasks with best-of-1 ones, so read the per-set blocks then.
``--also WARM_EVAL RL_EVAL [CONTROL_EVAL]`` adds evaluation-only runs of the same weights
(``--init-from`` each, no training: a set judged after the rest, e.g. the KernelBench problems
in ``gpu/plans/two_layouts_l1_last.json``) to each side of the per-set blocks.
``--warm RUN_DIR`` names the warm-start-only run that this run (and the control) started from
(``cuda-agent train --init-from RUN_DIR``): its final held-out evaluation is the warm-start
point, and ``warmstart_run`` says how it was trained. ``--warm-point before`` takes the
warm-start point from this run's own evaluation before training instead (``--eval-before
true`` in a run started from the warm start's weights: the same weights, evaluated the way
RL's run and the control are, e.g. at ``--eval-sizes small``).

    python benchmarks/train_report.py RL_RUN OUT.json --wall-s S --learning LEARNING.json \
        --warm WARM_RUN --control CONTROL_RUN [--warm-point before]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path

import torch

from cuda_agent.reward import renamed_keys
from cuda_agent.runner.eval.comparison import compare_files, learning_entry, read_rows

EVAL_KEYS = (
    "pass_rate",
    "fast_1",
    "fast_1_compile",
    "mean_reward",
    "per_task_reward",
    "statuses",
    "tasks",
)
STEP_KEYS = (
    "step",
    "mean_reward",
    "pass_rate",
    "turns_per_episode",
    "entropy",
    "clip_fraction",
    "ratio_max",
    "ratio_ess",
    "explained_variance",
    "skipped_updates",
    "seconds",
)
EVAL_POINTS = ("_before", "_warmstart", "_after")
TARGET_GAIN = 0.20  # issue 17: RL adds 20 points to each held-out rate over the warm start


def learning(report: dict) -> dict:
    """Issue 17's learning figure from a ``train_report`` report."""
    evals = report["evaluations"]

    def point(name: str) -> dict | None:
        got = evals.get(name)
        return None if got is None else {k: got.get(k) for k in ("pass_rate", "fast_1")}

    warm, after = point("heldout_warmstart"), point("heldout_after")
    gains = None
    if warm and after and None not in (*warm.values(), *after.values()):
        gains = {k: after[k] - warm[k] for k in warm}
    return {
        "benchmark": "learning",
        "set": "heldout (tasks never trained on)",
        "heldout_tasks": evals.get("heldout_after", {}).get("tasks"),
        "heldout_before": point("heldout_before"),
        "heldout_after_warmstart": warm,
        "heldout_after_rl": after,
        "gain_rl_over_warmstart": gains,
        "target_gain": TARGET_GAIN,
        "target_met": bool(gains) and all(g >= TARGET_GAIN for g in gains.values()),
        "training_s": sum(report["stage_seconds"].values()),
        **{k: report[k] for k in ("model", "gpu", "commit", "date", "command", "torch")},
    }


def per_set(
    warm: list[dict], after: list[dict], control: list[dict] | None = None
) -> dict[str, dict]:
    """Issue 29's blocks (``comparison.learning_entry``) for each named evaluation set whose
    tasks the held-out evaluation holds (``--eval-tasks heldout-compositions+heldout-ops+
    kernelbench-l1-subset`` evaluates all three at once). With the SFT-only control's final
    evaluation (``control``, the same tasks): ``control_sft_only``, the control against the
    same warm start (``after_warmstart``, ``after_sft``, ``gain``), and ``rl_over_control``,
    the gain of RL over the control, paired over the tasks, with its interval."""
    from cuda_agent.data import load_embedded
    from cuda_agent.runner.kernelbench_subset import L1_SUBSET
    from cuda_agent.runner.task_sets import HELDOUT

    sets = {
        "heldout_compositions": set(load_embedded("heldout_compositions").names),
        "heldout_ops": set(HELDOUT),
        "kernelbench_l1_subset": {f"L1_{stem}" for stem in L1_SUBSET},
    }
    out = {}
    for key, names in sets.items():
        mine = [[r for r in rows if r["task"] in names] for rows in (warm, after)]
        if mine[0] and mine[1]:
            out[key] = learning_entry(*mine)
            theirs = [r for r in control or [] if r["task"] in names]
            if theirs:
                out[key]["control_sft_only"] = learning_entry(
                    mine[0], theirs, sides=("after_warmstart", "after_sft")
                )
                out[key]["rl_over_control"] = learning_entry(
                    theirs, mine[1], sides=("after_sft", "after_rl")
                )["gain"]
    return out


def joined(
    sides: list[list[dict] | None],
    also: list[Path] | None,
    dirs: Sequence[Path | None] = (None, None, None),
) -> tuple[list[dict], list[dict], list[dict] | None]:
    """The rows of the warm start, RL and the control (None: no control), each with the final
    held-out rows of its evaluation-only run in ``also`` (``--also``: warm, RL[, control]; a
    control without one has no block for the sets they judged).
    Refused (ValueError): a task on both sides of a join (a set is judged in one place), and an
    evaluation-only run whose ``--init-from`` names another run than its side's (``dirs``: the
    warm, RL and control runs' directories where known; runs are matched by folder name, as a
    chain lays them out on the device and the figures here)."""
    warm, rl, control = sides
    assert warm is not None and rl is not None
    if not also:
        return warm, rl, control
    if len(also) not in ((2, 3) if control is not None else (2,)):
        raise ValueError("--also names a run for the warm start and RL, and may name one for "
                         "the control when there is a control")  # fmt: skip
    out: list[list[dict]] = []
    for rows, extra_run, side in zip((warm, rl, control), also, dirs, strict=False):
        assert rows is not None
        started = json.loads((extra_run / "config.json").read_text()).get("init_from")
        if started and side is not None and Path(started).name != side.resolve().name:
            raise ValueError(f"--also: {extra_run} started from {started}, not from {side} "
                             "(name them in the order warm, this run, control)")  # fmt: skip
        extra = read_rows(evaluation(extra_run, "heldout_after"))
        twice = sorted({r["task"] for r in rows} & {r["task"] for r in extra})
        if twice:
            raise ValueError(f"{extra_run}: tasks judged already: {', '.join(twice)}")
        out.append(rows + extra)
    return out[0], out[1], (out[2] if len(out) == 3 else None)


def evaluation(run_dir: Path, name: str) -> Path:
    """An evaluation's eval.json in a run directory (``eval/NAME/eval.json``) or in the
    figures a learning run copied out (``eval_NAME.json``, ``benchmarks/gpu/learning_run.py``),
    so that runs committed under ``benchmarks/results/`` can be compared later."""
    inside = run_dir / "eval" / name / "eval.json"
    return inside if inside.is_file() else run_dir / f"eval_{name}.json"


def read_records(run_dir: Path) -> list[dict]:
    """A run's metrics records (``metrics.jsonl``), in order."""
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def stage_seconds(records: list[dict]) -> dict[str, float]:
    """Seconds per stage over the records that are not evaluations."""
    seconds: dict[str, float] = {}
    for r in records:
        if not r["stage"].endswith(EVAL_POINTS):
            seconds[r["stage"]] = seconds.get(r["stage"], 0.0) + float(r.get("seconds") or 0.0)
    return seconds


def control_summary(control_dir: Path) -> dict:
    """What the SFT-only control run was: its training seconds and stages, the warm-start
    steps it took (a control given the RL run's training seconds as its budget asks for more
    steps than fit: ``--warmstart-steps 100000 --train-budget-s S``) and that budget."""
    config = json.loads((control_dir / "config.json").read_text())
    records = read_records(control_dir)
    stages = sorted({r["stage"] for r in records if r.get("step") is not None})
    return {
        "training_s": sum(stage_seconds(records).values()),
        "training_stages": stages,
        "warmstart_steps": sum(1 for r in records if r["stage"] == "warmstart"),
        "train_budget_s": config.get("train_budget_s"),
        "init_from": config.get("init_from") or None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--wall-s", type=float, required=True)
    parser.add_argument("--label", default="default")
    parser.add_argument("--command", default="")
    parser.add_argument("--machine", default="")
    parser.add_argument("--learning", type=Path, help="also write learning.json here")
    parser.add_argument(
        "--ran-on",
        type=Path,
        help="a JSON file the device wrote with 'gpu' (or 'machine') and 'torch' keys (a "
        "benchmark's provenance from the same calls), when the run directory lacks the "
        "device's learning.json (default: RUN_DIR/learning.json)",
    )
    parser.add_argument(
        "--control",
        type=Path,
        help="the SFT-only control's run directory (the same held-out tasks): its final "
        "evaluation is compared with this run's in learning.json",
    )
    parser.add_argument(
        "--warm",
        type=Path,
        help="the warm-start-only run this run started from (--init-from): its final held-out "
        "evaluation is the warm-start point",
    )
    parser.add_argument(
        "--also",
        type=Path,
        nargs="+",
        metavar="RUN_DIR",
        help="evaluation-only runs (--init-from, no training) of the warm start, of this run "
        "and, with --control, of the control, in that order: their final held-out tasks join "
        "each side's in the per-set blocks (a set judged last, on its own, e.g. the "
        "KernelBench problems)",
    )
    parser.add_argument(
        "--control-trained",
        type=Path,
        metavar="RUN_DIR",
        help="where --control is an evaluation-only run of a control trained earlier "
        "(--init-from its adapter, no steps), that control's run: how it was trained is read "
        "from there (its figures committed from an earlier session, say)",
    )
    parser.add_argument(
        "--warm-point",
        choices=("warmstart", "before"),
        default="warmstart",
        help="where the warm-start point is: after the warm start (this run's, or --warm's "
        "final evaluation), or this run's evaluation before training (a run started from the "
        "warm start's weights with --eval-before true)",
    )
    args = parser.parse_args()
    config = json.loads((args.run_dir / "config.json").read_text())
    records = read_records(args.run_dir)
    evals = {r["stage"]: r for r in records if r["stage"].endswith(EVAL_POINTS)}
    if args.warm_point == "before":  # this run's own weights before training are the warm start
        evals["heldout_warmstart"] = evals["heldout_before"]
    elif args.warm:  # the warm start is another run's end (this run started from its weights)
        warm_evals = {r["stage"]: r for r in read_records(args.warm)}
        evals["heldout_warmstart"] = warm_evals["heldout_after"]
    # The device's copy of the tree may carry an older .git: the caller names the commit.
    commit = (
        os.environ.get("CUDA_AGENT_COMMIT")
        or subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    )
    seconds = stage_seconds(records)
    # Reported off the device (the run's files fetched here): the device's own report of the
    # run, when it wrote one into the run directory, names the GPU and torch it ran on.
    ran_on = {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
              "torch": torch.__version__}  # fmt: skip
    device_report = args.ran_on or args.run_dir / "learning.json"
    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    if ran_on["gpu"] is None and device_report.is_file():
        written = json.loads(device_report.read_text())
        written.setdefault("gpu", written.get("machine"))  # (a provenance names the machine)
        ran_on = {k: written.get(k) or ran_on[k] for k in ran_on}
        # and the commit it ran and when, unless the caller names the commit: not this tree's
        commit = os.environ.get("CUDA_AGENT_COMMIT") or written.get("commit") or commit
        date = written.get("date") or date
    report = {
        "benchmark": f"train_{args.label}",
        "date": date,
        "command": args.command,
        "commit": commit or None,
        "machine": args.machine or f"{platform.machine()}, {os.cpu_count()} CPUs",
        **ran_on,
        "model": Path(config["model"]).name,
        "backend": config["backend"],
        "max_new_tokens": config["max_new_tokens"],
        "wall_s": args.wall_s,
        # a run from before issue 31 recorded fast_1 as faster_than_eager: read under the new name
        "evaluations": {
            k: {f: renamed_keys(v).get(f) for f in EVAL_KEYS} for k, v in evals.items()
        },
        "stage_seconds": seconds,
        "steps": {
            stage: [{k: r.get(k) for k in STEP_KEYS} for r in records if r["stage"] == stage]
            for stage in ("rl_warmup", "rl")
        },
        "rft": next((r.get("collection") for r in records if r["stage"] == "rft"), None),
        "value": [
            {k: r.get(k) for k in ("step", "value_loss", "explained_variance")}
            for r in records
            if r["stage"] == "value"
        ],
    }
    args.out.write_text(json.dumps(report, indent=2))
    if args.learning:
        figure = learning(report)
        # the gain of RL over the warm start, paired over the held-out tasks, with its interval
        if args.warm:
            figure["warmstart_run"] = control_summary(args.warm)
        if args.warm_point == "before":
            warm = evaluation(args.run_dir, "heldout_before")
        elif args.warm:
            warm = evaluation(args.warm, "heldout_after")
        else:
            warm = evaluation(args.run_dir, "heldout_warmstart")
        after = evaluation(args.run_dir, "heldout_after")
        control = None
        if args.control:
            control = read_rows(evaluation(args.control, "heldout_after"))
            figure["control_sft_only"] = control_summary(args.control_trained or args.control)
            if args.control_trained:  # judged again now, trained then
                figure["control_sft_only"]["evaluated_in"] = args.control.name
        figure["rl_steps"] = len(report["steps"]["rl"])
        book = args.run_dir / "learning_run.json"  # a learning run's calls (gpu/learning_run.py)
        if book.is_file():
            figure["device_calls"] = len(json.loads(book.read_text()).get("calls", []))
        if warm.is_file() and after.is_file():
            figure["gain_rl_over_warmstart_paired"] = compare_files(warm, after)
            dirs = (args.warm, args.run_dir, args.control)
            try:
                sides = joined([read_rows(warm), read_rows(after), control], args.also, dirs)
            except ValueError as exc:
                parser.error(str(exc))
            figure.update(per_set(*sides))
        elif args.also:
            parser.error(f"--also: no held-out evaluation to join them to ({warm}, {after})")
        args.learning.write_text(json.dumps(figure, indent=2) + "\n")
        print(json.dumps({k: figure[k] for k in ("gain_rl_over_warmstart", "target_met")}))
    short = {k: (v["mean_reward"], v["pass_rate"]) for k, v in report["evaluations"].items()}
    print(json.dumps({"wall_s": args.wall_s, "mean_reward, pass_rate": short}, indent=2))


if __name__ == "__main__":
    main()
