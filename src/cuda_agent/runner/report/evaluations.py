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

from .page import Raw, esc, interval, pct, table, times

# The figures shown with their intervals, in this order, and how a person reads their names.
SHOWN = {
    "pass_at_1": "pass@1",
    "faster_than_eager_at_1": "faster than eager@1",
    "pass_rate": "pass rate (best sample)",
    "faster_than_eager": "faster than eager (best sample)",
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
        return cls(name or path.name, path, json.loads((path / "eval.json").read_text()))

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
    """One row per evaluation: the tasks, each ``SHOWN`` figure with its interval, faster than
    ``torch.compile`` and the geometric-mean speedups (over the correct kernels)."""
    shown = [m for m in SHOWN if any(m in (e.result.get("ci95") or {}) for e in evaluations)]
    if not shown:  # an eval.json from before the intervals: the figures alone
        shown = ["pass_rate", "faster_than_eager"]
    head = ["evaluation", "tasks", *(SHOWN[m] for m in shown)]
    head += ["faster than compile", "geomean vs eager", "geomean vs compile"]
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
            pct(r.get("faster_than_compile")),
            times(r.get("geomean_speedup_vs_eager")),
            times(r.get("geomean_speedup_vs_compile")),
        ]
        rows.append(cells)
        attrs.append({"data-eval": e.name})
    confidence = next((e.result["ci95"]["confidence"] for e in evaluations
                       if (e.result.get("ci95") or {}).get("confidence")), 0.95)  # fmt: skip
    note = (
        f'<p class="note">[low, high]: the {confidence:.0%} bootstrap interval over tasks. '
        "@1: the mean over each task's samples; best sample: the best kernel of its samples. "
        "Geometric means are over the correct kernels; torch.compile is timed on CUDA only, "
        "unless the evaluation asked for it.</p>"
    )
    numeric = range(1, len(head))
    return table(head, rows, attrs, numeric=list(numeric)) + note


def gains_table(title: str, comparison: Mapping[str, Any]) -> str:
    """A ``comparison.compare`` result: each metric before and after with its own interval,
    the gain with its paired interval, marked where that interval excludes zero."""
    rows, attrs = [], []
    for metric, v in comparison.items():
        if not isinstance(v, Mapping):
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
    return caption + table(head, rows, attrs, numeric=[1, 2, 3])
