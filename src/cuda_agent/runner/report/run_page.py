"""The report of a training run, from the files its directory holds: ``config.json``,
``summary.json`` (absent until the run ends: the report says so), ``state.json`` (the
invocations), ``metrics.jsonl`` (the timeline), ``curves/*.png``, ``eval/<name>/`` (figures,
kernels, episodes) and ``rft/episodes.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cuda_agent.agent import episode_from_json

from ..eval.comparison import compare_files
from .evaluations import Evaluation, figures_table, gains_table
from .page import Raw, document, duration, esc, image, table
from .tasks import episodes_list, tasks_body

POINTS = ("before", "warmstart", "after")  # evaluation stages' name endings, in run order
SETS = ("heldout", "train")
CURVES = ("reward", "heldout", "stability", "value", "lengths", "throughput")
EPISODES_SHOWN = 12  # collected episodes drawn turn by turn (all are listed)


def _json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def records(run_dir: Path) -> list[dict[str, Any]]:
    """The lines of ``metrics.jsonl`` (a line cut by a kill is skipped)."""
    out = []
    path = run_dir / "metrics.jsonl"
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return [r for r in out if isinstance(r, dict)]


def timeline(run_records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's stages in the order they ran: consecutive records of one stage make one entry
    (its records, steps, recorded seconds and its first and last figures)."""
    out: list[dict[str, Any]] = []
    for r in run_records:
        stage = str(r.get("stage", "run"))
        if not out or out[-1]["stage"] != stage:
            out.append({"stage": stage, "records": []})
        out[-1]["records"].append(r)
    return out


def _figure(records_: list[dict[str, Any]]) -> str:
    """What a stage moved, first to last: an evaluation's pass rate, else the mean reward
    (RL), nll (supervised), explained variance (value), or what it collected or measured."""
    evaluation = all("step" not in r and "pass_rate" in r for r in records_)
    keys = ("pass_rate",) if evaluation else ("mean_reward", "nll", "explained_variance")
    for key in (*keys, "measured"):
        got = [r[key] for r in records_ if isinstance(r.get(key), int | float)]
        if got:
            shown = f"{got[0]:.3g}" if len(got) == 1 else f"{got[0]:.3g} to {got[-1]:.3g}"
            return f"{key.replace('_', ' ')} {shown}"
    if isinstance(c := records_[0].get("collection"), dict):
        return f"collected {c.get('collected')}, kept {c.get('kept')}"
    return ""


def _timeline_body(run_dir: Path, state: dict[str, Any] | None) -> str:
    entries = timeline(records(run_dir))
    seconds = [sum(r.get("seconds") or 0.0 for r in e["records"]) for e in entries]
    longest = max(seconds, default=0.0) or 1.0
    rows, attrs = [], []
    for n, (e, s) in enumerate(zip(entries, seconds, strict=True)):
        steps = [r["step"] for r in e["records"] if isinstance(r.get("step"), int)]
        bar = Raw(f'<span class="bar" style="width:{round(240 * s / longest)}px"></span>')
        rows.append(
            [
                n + 1,
                e["stage"],
                len(e["records"]),
                f"{min(steps) + 1}-{max(steps) + 1}" if steps else "",
                duration(s) if s else "not recorded",
                bar if s else "",
                _figure(e["records"]),
            ]
        )
        attrs.append({"data-stage": e["stage"], "data-records": str(len(e["records"]))})
    head = ["#", "stage", "records", "steps", "seconds", "", "first to last"]
    body = table(head, rows, attrs, numeric=[0, 2, 4]) + (
        '<p class="note">From metrics.jsonl, in run order: seconds are the steps\' recorded '
        "wall times (an evaluation records none).</p>"
    )
    sessions = (state or {}).get("sessions") or []
    if sessions:
        srows = [
            [i + 1, s.get("started"), duration(s.get("seconds")), s.get("end") or "killed",
             s.get("stopped_before", ""),
             ", ".join(f"{k} {v}" for k, v in (s.get("stage_steps") or {}).items())]
            for i, s in enumerate(sessions)
        ]  # fmt: skip
        head = ["invocation", "started", "wall time", "end", "stopped before", "steps reached"]
        body += "<h3>Invocations</h3>" + table(head, srows, numeric=[0, 2])
    return body


def _evaluations(run_dir: Path) -> dict[str, list[Evaluation]]:
    """The run's evaluations by task set, in run order."""
    out: dict[str, list[Evaluation]] = {}
    for name in SETS:
        for when in POINTS:
            path = run_dir / "eval" / f"{name}_{when}"
            if (path / "eval.json").is_file():
                out.setdefault(name, []).append(Evaluation.read(path, f"{name}_{when}"))
    return out


def _results_body(evaluations: dict[str, list[Evaluation]], summary: dict[str, Any] | None) -> str:
    parts = []
    for name, evals in evaluations.items():
        parts.append(f"<h3>{esc(name)} tasks</h3>{figures_table(evals)}")
        after = next((e for e in evals if e.name.endswith("_after")), None)
        for first in evals:
            if after is None or first is after:
                continue
            when = first.name.rsplit("_", 1)[1]
            gain = (summary or {}).get(f"{name}_gain_after_over_{when}")
            if gain is None:  # a run from before the summary held its gains
                gain = compare_files(first.path, after.path)
            parts.append(gains_table(f"{name}: after training over {first.label}", gain))
    return "".join(parts) or '<p class="note">no evaluation has finished yet</p>'


def _config_body(config: dict[str, Any]) -> str:
    """The options in three side-by-side tables (a long list otherwise)."""
    items = [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in config.items()]
    third = -(-len(items) // 3) or 1
    tables = [
        table(["option", "value"], chunk, [{"data-key": k} for k, _ in chunk])
        for chunk in (items[i : i + third] for i in range(0, len(items), third))
    ]
    return f'<div class="columns">{"".join(tables)}</div>' + (
        '<p class="note">The resolved configuration (config.json): preset, file and flags; '
        "'cuda-agent train --resume' reads it.</p>"
    )


def _curves_body(run_dir: Path) -> str:
    found = sorted((run_dir / "curves").glob("*.png"))
    order = {name: i for i, name in enumerate(CURVES)}
    found.sort(key=lambda p: (order.get(p.stem, len(order)), p.stem))
    if not found:
        return '<p class="note">no curves: they are drawn when the run ends</p>'
    return "".join(image(p, p.stem) for p in found)


def _episodes_body(run_dir: Path) -> str:
    path = run_dir / "rft" / "episodes.jsonl"
    lines = [x for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []
    episodes = [episode_from_json(json.loads(line)) for line in lines]
    intro = (
        '<p class="note">The rft stage\'s collection (rft/episodes.jsonl) with the policy '
        "of that point: what rejection fine-tuning and the value pre-training learnt from.</p>"
    )
    return intro + episodes_list(episodes, EPISODES_SHOWN)


def run_report(run_dir: Path) -> str:
    """The page of the run in ``run_dir``."""
    config = _json(run_dir / "config.json") or {}
    summary = _json(run_dir / "summary.json")
    state = _json(run_dir / "state.json")
    evaluations = _evaluations(run_dir)
    sessions = (state or {}).get("sessions") or []
    wall = sum(s.get("seconds") or 0.0 for s in sessions)
    status = "finished" if summary is not None else "not finished (no summary.json yet)"
    subtitle = (
        f"{run_dir} | model {config.get('model', '?')} | backend "
        f"{(summary or {}).get('backend') or config.get('backend', '?')} | {status} | "
        f"{duration(wall)} over {len(sessions)} invocation(s)"
    )
    sections = [
        ("results", "Results", _results_body(evaluations, summary)),
        ("curves", "Curves", _curves_body(run_dir)),
        ("timeline", "Timeline of the training stages", _timeline_body(run_dir, state)),
    ]
    for name, evals in evaluations.items():
        sections.append((f"tasks-{name}", f"Tasks: {name}", tasks_body(evals, f"{name}-task")))
    if (run_dir / "rft" / "episodes.jsonl").is_file():
        sections.append(("episodes", "Collected episodes", _episodes_body(run_dir)))
    sections.append(("config", "Configuration", _config_body(config)))
    return document(f"cuda-agent run {run_dir.name}", subtitle, sections)
