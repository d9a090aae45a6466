"""What ``train`` and ``eval`` print when they end: a short table of the figures a person
wants first (held-out sets before and after, with their 95% intervals), the time taken and
where the report is. The figures are the summary's (``comparison.compare`` and
``comparison.eval_intervals`` computed them); nothing is computed here."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .page import duration, interval

# the two figures shown: pass@1 and fast_1, correct and speedup > 1 (the per-sample mean where
# recorded)
PASS, FAST, FAST_BEST = "pass_at_1", "fast_1_at_1", "fast_1"
WHEN = {"before": "before", "warmstart": "after warm start", "after": "after"}


def _row(label: str, a: str, b: str) -> str:
    return f"  {label:<28} {a:<26} {b}"


def _block(gains: Mapping[str, Mapping[str, Any]], indent: str, header: bool = True) -> list[str]:
    """One set's rows: its evaluations (before, after the warm start, after) with their
    intervals, then each paired gain."""
    any_gain = next(iter(gains.values()))
    fast = FAST if FAST in any_gain else FAST_BEST
    lines = [_row("", "pass@1", "fast_1@1" if fast == FAST else fast)] if header else []
    sides = [(first, g, "before") for first, g in gains.items()]
    sides.append(("after", any_gain, "after"))
    for when, g, side in sides:
        cells = [interval(g[m][side], *g[m][f"{side}_ci95"]) for m in (PASS, fast)]
        lines.append(_row(indent + WHEN[when], *cells))
    for first, g in gains.items():
        cells = []
        for m in (PASS, fast):
            mark = " *" if g[m]["significant"] else ""
            cells.append(interval(g[m]["gain"], g[m]["ci95_low"], g[m]["ci95_high"], True) + mark)
        lines.append(_row(f"{indent}gain over {WHEN[first]}", *cells))
    return lines


def train_table(summary: Mapping[str, Any]) -> str:
    """The end of ``cuda-agent train``: per evaluated set its evaluations (before, after the
    warm start, after) with their intervals and the paired gains, then time and paths."""
    run_dir = Path(summary["run_dir"])
    lines = [
        f"run finished: {run_dir} in {duration(summary.get('wall_seconds'))} "
        f"({summary.get('invocations', 1)} invocation(s); training stages "
        f"{duration(summary.get('train_seconds'))}); model {summary.get('model')}"
    ]
    for name in ("heldout", "train"):
        gains = {
            first: summary[key]
            for first in ("before", "warmstart")
            if isinstance(summary.get(key := f"{name}_gain_after_over_{first}"), Mapping)
        }
        if not gains:
            continue
        any_gain = next(iter(gains.values()))
        lines.append(
            f"{name} tasks ({any_gain['tasks']}), {any_gain['confidence']:.0%} intervals over tasks:"
        )
        lines += _block(gains, "")
        # one evaluation of several named sets (--eval-tasks A+B): each set's own rows
        for part, by_first in (summary.get(f"{name}_sets") or {}).items():
            mine = {
                f: by_first[f"gain_after_over_{f}"]
                for f in gains
                if f"gain_after_over_{f}" in by_first
            }
            if mine:
                lines.append(f"  {part} ({next(iter(mine.values()))['tasks']} tasks):")
                lines += _block(mine, "  ", header=False)
    if len(lines) > 1:
        lines.append("  (gains: paired intervals; * the interval excludes 0)")
    if summary.get("report"):
        lines.append(f"report:  {summary['report']}")
    lines.append(f"summary: {run_dir / 'summary.json'}  (--json prints it)")
    return "\n".join(lines)


def eval_table(result: Mapping[str, Any], out: Path, seconds: float) -> str:
    """The end of ``cuda-agent eval``: each figure with its interval over tasks, the time,
    where the report and ``eval.json`` are."""
    config, ci = result["config"], result.get("ci95") or {}
    lines = [
        f"evaluated {config.get('model') or '?'} on {result['tasks']} tasks "
        f"({config.get('backend')}, {config['samples']} sample(s) a task, "
        f"{config['turns']} turn(s)) in {duration(seconds)}",
        f"  {'metric':<32} {'estimate [95% interval over tasks]'}",
    ]
    names = {
        PASS: "pass@1",
        FAST: "fast_1@1",
        "pass_rate": "pass rate (best sample)",
        FAST_BEST: "fast_1 (best sample)",
    }
    for metric, label in names.items():
        if isinstance(got := ci.get(metric), Mapping):
            lines.append(f"  {label:<32} {interval(got['estimate'], got['low'], got['high'])}")
    timed = "" if config.get("time_compile") else " (torch.compile not timed)"
    lines.append(f"  {'fast_1 vs compile':<32} {result['fast_1_compile']:.1%}{timed}")
    lines.append(f"report:  {out / 'report.html'}")
    lines.append(f"results: {out / 'eval.json'}  (--json prints it)")
    return "\n".join(lines)
