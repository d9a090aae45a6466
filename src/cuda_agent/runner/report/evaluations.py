"""An evaluation directory as the report reads it (``eval.json``, ``kernels/``, ``episodes/``),
and the tables of its figures: each metric with its 95% interval over tasks (``ci95``, as
``comparison.eval_intervals`` wrote it) and the paired gains of ``comparison.compare``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from cuda_agent.agent import Episode, episode_from_json
from cuda_agent.reward import renamed_keys

from .page import Raw, esc, interval, pct, table, times

# The figures shown with their intervals, in this order, and how a person reads their names
# (fast_1: correct and speedup > 1 against eager, KernelBench's fast_p at p = 1).
SHOWN = {
    "pass_at_1": "pass@1",
    "fast_1_at_1": "fast_1@1",
    "pass_rate": "pass rate (best sample)",
    "fast_1": "fast_1 (best sample)",
}
# An evaluation stage's name ending -> when it ran.
WHEN = {"before": "before training", "warmstart": "after the warm start", "after": "after training"}


@dataclass
class Evaluation:
    """One evaluation directory: ``name`` (``heldout_after``, or the directory's name), its
    ``eval.json`` and what it kept per task."""

    name: str
    path: Path
    result: dict[str, Any]

    @classmethod
    def read(cls, path: Path, name: str = "") -> Evaluation:
        """The evaluation in ``path``; an old ``eval.json`` names fast_1 faster_than_eager (and
        the others of ``OLD_NAMES``): its figures and intervals are read under the new names."""
        result = renamed_keys(json.loads((path / "eval.json").read_text()))
        if isinstance(result.get("ci95"), Mapping):
            result["ci95"] = renamed_keys(result["ci95"])
        return cls(name or path.name, path, result)

    @property
    def label(self) -> str:
        """``heldout, after training`` for a run's evaluation, else the name."""
        head, _, when = self.name.rpartition("_")
        return f"{head}, {WHEN[when]}" if head and when in WHEN else self.name

    @cached_property
    def rows(self) -> dict[str, dict[str, Any]]:
        return {r["task"]: r for r in self.result.get("per_task", [])}

    def episodes(self, task: str) -> list[Episode] | None:
        """The task's episodes as recorded (None: an evaluation from before they were)."""
        path = self.path / "episodes" / f"{task}.jsonl"
        if not path.is_file():
            return None
        lines = path.read_text().splitlines()
        return [episode_from_json(json.loads(line)) for line in lines if line.strip()]

    def kernel(self, task: str) -> str | None:
        path = self.path / "kernels" / f"{task}.py"
        return path.read_text() if path.is_file() else None


def figures_table(evaluations: Sequence[Evaluation]) -> str:
    """One row per evaluation: the tasks, each ``SHOWN`` figure with its interval, fast_1 against
    ``torch.compile`` and the geometric-mean speedups (over the correct kernels)."""
    shown = [m for m in SHOWN if any(m in (e.result.get("ci95") or {}) for e in evaluations)]
    if not shown:  # an eval.json from before the intervals: the figures alone
        shown = ["pass_rate", "fast_1"]
    head = ["evaluation", "tasks", *(SHOWN[m] for m in shown)]
    head += ["fast_1 vs compile", "geomean vs eager", "geomean vs compile"]
    rows, attrs = [], []
    for e in evaluations:
        r, ci = e.result, e.result.get("ci95") or {}
        cells: list[Any] = [e.label, r.get("tasks")]
        for m in shown:
            got = ci.get(m)
            cells.append(
                interval(got["estimate"], got["low"], got["high"]) if got else pct(r.get(m))
            )
        cells += [
            pct(r.get("fast_1_compile")),
            times(r.get("geomean_speedup_vs_eager")),
            times(r.get("geomean_speedup_vs_compile")),
        ]
        rows.append(cells)
        attrs.append({"data-eval": e.name})
    confidence = next((e.result["ci95"]["confidence"] for e in evaluations
                       if (e.result.get("ci95") or {}).get("confidence")), 0.95)  # fmt: skip
    note = (
        f'<p class="note">[low, high]: the {confidence:.0%} bootstrap interval over tasks. '
        "fast_1: correct and faster than eager (speedup > 1, KernelBench's fast_p at p = 1). "
        "@1: the mean over each task's samples; best sample: the best kernel of its samples. "
        "Geometric means are over the correct kernels; torch.compile is timed on CUDA only, "
        "unless the evaluation asked for it.</p>"
    )
    numeric = range(1, len(head))
    return table(head, rows, attrs, numeric=list(numeric)) + note


def gains_table(title: str, comparison: Mapping[str, Any]) -> str:
    """A ``comparison.compare`` result: each metric before and after with its own interval,
    the gain with its paired interval, marked where that interval excludes zero. An old run's
    comparison names fast_1 faster_than_eager: read under the new names."""
    rows, attrs = [], []
    for metric, v in renamed_keys(comparison).items():
        if not isinstance(v, Mapping) or "gain" not in v:
            continue
        rows.append(
            [
                SHOWN.get(metric, metric.replace("_", " ")),
                interval(v["before"], *v["before_ci95"]),
                interval(v["after"], *v["after_ci95"]),
                interval(v["gain"], v["ci95_low"], v["ci95_high"], signed=True),
                Raw('<span class="sig">yes</span>') if v["significant"] else "no",
            ]
        )
        attrs.append({"data-metric": metric})
    head = ["metric", "before", "after", "gain [paired interval]", "interval excludes 0"]
    caption = f"<h3>{esc(title)}: paired over {comparison.get('tasks')} tasks</h3>"
    return caption + table(head, rows, attrs, numeric=[1, 2, 3]) + _moves(comparison)


def _moves(comparison: Mapping[str, Any]) -> str:
    """Where the tasks went (``right_of_n``), under a comparison of several samples a task."""
    moved = comparison.get("right_of_n")
    if not isinstance(moved, Mapping):
        return ""
    n = moved["samples"]
    head = [f"tasks with c of {n} samples right", *map(str, range(n + 1))]
    rows = [[side, *moved[side]] for side in ("before", "after")]
    note = f"<p>{moved['up']} tasks up, {moved['down']} down, {moved['same']} the same.</p>"
    return table(head, rows, numeric=list(range(1, n + 2))) + note
