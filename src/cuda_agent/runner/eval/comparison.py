"""How sure an evaluation is, and whether one beats another: ``cuda_agent.reward.confidence``
composed over ``eval.json`` rows (no math here).

    eval_intervals(rows)            the 95% bootstrap interval of each metric over tasks
    compare(before, after)          the paired gain of each metric and its interval
    compare_files(a.json, b.json)   the same from two eval.json files (``cuda-agent compare``)
    compare_sets(before, after, s)  ``compare`` of each named set's tasks within the evaluation
    learning_entry(warm, rl)        one set's block of a learning figure (after the warm start,
                                    after RL, RL's gain)

The metrics (``METRICS``), each a mean over tasks of a per-task value:

- ``pass_at_1``: the share of a task's samples whose best kernel is correct (c / n), averaged;
- ``fast_1_at_1``: the share of a task's samples whose best kernel is correct and faster than
  eager (speedup > 1, KernelBench's fast_p at p = 1), averaged;
- ``pass_rate`` and ``fast_1``: the same of the task's best kernel over all its samples (pass@n
  and "fast_1@n"): ``eval.json``'s figures of the same names;
- ``pass_at_<k>`` for the other k of the evaluation's ``pass_at_k``.

With one greedy sample per task the ``_at_1`` figures equal the best-kernel ones.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from cuda_agent.reward import intervals, paired_gains, renamed_keys, right_of_n

METRICS = ("pass_at_1", "fast_1_at_1", "pass_rate", "fast_1")
CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0  # fixed: the same rows always give the same interval


def _metrics(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    least = min((int(r.get("samples", 1)) for r in rows), default=1)
    ks = [k for k in (2, 5, 10, 20, 50, 100) if k <= least]
    # rows written before the per-sample count was recorded (several samples, no count) have
    # no fast_1_at_1: left out rather than failing a finished evaluation (a row of an old run
    # has the count under its old name, samples_faster_than_eager: renamed_keys reads it)
    known = all(
        renamed_keys(r).get("samples_fast_1") is not None or int(r.get("samples", 1)) == 1
        for r in rows
    )
    metrics = [m for m in METRICS if known or m != "fast_1_at_1"]
    return [*metrics, *(f"pass_at_{k}" for k in ks)]


def eval_intervals(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{metric: {"estimate", "low", "high"}, ..., "confidence", "resamples", "seed"}``: the
    bootstrap interval over tasks of each metric of ``rows`` (an ``eval.json``'s
    ``per_task``); ``{}`` for no rows."""
    if not rows:
        return {}
    got = intervals(rows, _metrics(rows), confidence=CONFIDENCE, resamples=RESAMPLES, seed=SEED)
    return {
        **{m: i.to_dict() for m, i in got.items()},
        "confidence": CONFIDENCE,
        "resamples": RESAMPLES,
        "seed": SEED,
    }


def compare(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The paired comparison of two evaluations of the same tasks (rows matched by task):
    per metric ``{"before", "before_ci95", "after", "after_ci95", "gain", "ci95_low",
    "ci95_high", "significant"}`` (each side's interval as ``[low, high]``; ``significant``:
    the gain's paired interval excludes zero), with ``tasks``, ``confidence``,
    ``resamples``, ``seed`` and, where every task has the same n > 1 samples, ``right_of_n``
    (``reward.right_of_n``: how many tasks had each count of right samples, before and after).
    ``ValueError`` naming the tasks when the sets differ."""
    metrics = _metrics([*before, *after])
    gains = paired_gains(
        before, after, metrics, confidence=CONFIDENCE, resamples=RESAMPLES, seed=SEED
    )
    sides = [
        intervals(rows, metrics, confidence=CONFIDENCE, resamples=RESAMPLES, seed=SEED)
        for rows in (before, after)
    ]
    out: dict[str, Any] = {}
    for m, gain in gains.items():
        out[m] = {
            "before": sides[0][m].estimate,
            "before_ci95": [sides[0][m].low, sides[0][m].high],
            "after": sides[1][m].estimate,
            "after_ci95": [sides[1][m].low, sides[1][m].high],
            "gain": gain.estimate,
            "ci95_low": gain.low,
            "ci95_high": gain.high,
            "significant": gain.excludes_zero,
        }
    moved = right_of_n(before, after)
    return {
        **out,
        **({"right_of_n": moved} if moved else {}),
        "tasks": len(before),
        "confidence": CONFIDENCE,
        "resamples": RESAMPLES,
        "seed": SEED,
    }


def compare_sets(
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    sets: Mapping[str, Collection[str]],
) -> dict[str, dict[str, Any]]:
    """``compare`` of each set's tasks (``sets``: name -> task names) where the two evaluations
    hold some of them: one held-out evaluation of several sets (``--eval-tasks A+B``) read per
    set, each with its own intervals over its own tasks."""
    out = {}
    for name, tasks in sets.items():
        wanted = set(tasks)
        mine = [[r for r in rows if r.get("task") in wanted] for rows in (before, after)]
        if mine[0] and mine[1]:
            out[name] = compare(*mine)
    return out


def learning_entry(
    warmstart: Sequence[Mapping[str, Any]],
    rl: Sequence[Mapping[str, Any]],
    sides: tuple[str, str] = ("after_warmstart", "after_rl"),
) -> dict[str, Any]:
    """One evaluation set's block of a learning figure: the same tasks evaluated after the warm
    start and after RL, each side's ``pass_at_1``, ``fast_1`` (best kernel of the task's
    samples), ``fast_1_at_1`` and their ``ci95`` (``[low, high]``), and the
    ``gain`` of RL with ``ci95_low``, ``ci95_high`` and ``significant`` for each (``compare``),
    and with several samples a task, where the tasks went (``right_of_n``).
    ``sides`` names the two sides (the SFT-only control's block: ``after_sft``)."""
    c = compare(warmstart, rl)
    shown = [m for m in ("pass_at_1", "fast_1", "fast_1_at_1") if m in c]

    def side(which: str) -> dict[str, Any]:
        return {
            **{m: c[m][which] for m in shown},
            "ci95": {m: c[m][f"{which}_ci95"] for m in shown},
        }

    return {
        "tasks": c["tasks"],
        "samples": min((int(r.get("samples", 1)) for r in [*warmstart, *rl]), default=0),
        sides[0]: side("before"),
        sides[1]: side("after"),
        "gain": {
            **{m: c[m]["gain"] for m in shown},
            **{key: {m: c[m][key] for m in shown} for key in ("ci95_low", "ci95_high")},
            "significant": {m: c[m]["significant"] for m in shown},
        },
        **({"right_of_n": c["right_of_n"]} if "right_of_n" in c else {}),
    }


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The per-task rows of an ``eval.json`` (or of an evaluation directory holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "eval.json"
    if not path.is_file():
        raise ValueError(f"no evaluation at {path} (an eval.json or a directory holding one)")
    data = json.loads(path.read_text())
    rows = data.get("per_task") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{path} has no per_task rows: is it an eval.json?")
    return rows


def compare_files(before: str | Path, after: str | Path) -> dict[str, Any]:
    """``compare`` of two ``eval.json`` files (or evaluation directories)."""
    return compare(read_rows(before), read_rows(after))


def table(comparison: Mapping[str, Any]) -> str:
    """A short text table of a ``compare`` result: metric, before, after, gain [interval]."""
    lines = [f"{'metric':<24} {'before':>7} {'after':>7} {'gain':>7}  95% interval"]
    for m, v in comparison.items():
        if not isinstance(v, Mapping) or "gain" not in v:  # (right_of_n: below)
            continue
        mark = "  significant" if v["significant"] else ""
        lines.append(
            f"{m:<24} {v['before']:>7.1%} {v['after']:>7.1%} {v['gain']:>+7.1%}  "
            f"[{v['ci95_low']:+.1%}, {v['ci95_high']:+.1%}]{mark}"
        )
    moved = comparison.get("right_of_n")
    if moved:
        n = moved["samples"]
        lines += [
            "",
            f"{f'tasks by right of {n}':<24} " + " ".join(f"{c:>4}" for c in range(n + 1)),
            f"{'before':<24} " + " ".join(f"{t:>4}" for t in moved["before"]),
            f"{'after':<24} " + " ".join(f"{t:>4}" for t in moved["after"]),
            f"{moved['up']} tasks up, {moved['down']} down, {moved['same']} the same; "
            + ", ".join(
                f"{k} x{v}" for k, v in moved["moves"].items() if len(set(k.split("->"))) == 2
            ),
        ]
    return "\n".join(lines)


def add_parser(sub: Any) -> None:
    """``cuda-agent compare BEFORE AFTER [--out FILE.json]``."""
    parser = sub.add_parser(
        "compare",
        help="the paired gain of two evaluations of the same tasks, with 95%% intervals",
        description="Compare two evaluations of the same tasks (eval.json files or the "
        "directories holding them, e.g. RUN/eval/heldout_warmstart and RUN/eval/heldout_after): "
        "each metric before and after, the gain and its paired bootstrap interval over tasks.",
    )
    parser.add_argument("before", help="the first evaluation: eval.json or its directory")
    parser.add_argument("after", help="the second evaluation, of the same tasks")
    parser.add_argument("--out", default="", help="also write the comparison as JSON here")


def run(args: Any) -> int:
    """The ``compare`` command: prints the table (and writes ``--out``); 2 on a bad input."""
    import sys

    try:
        result = compare_files(args.before, args.after)
    except (ValueError, OSError) as exc:
        print(f"cuda-agent: {exc}", file=sys.stderr)
        return 2
    print(f"{result['tasks']} tasks; gains of {args.after} over {args.before}")
    print(table(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0
