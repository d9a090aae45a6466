"""The report of an evaluation directory (``cuda-agent eval``'s, or a run's ``eval/<name>``):
its figures with their intervals, fast_p and pass@k, per task its best kernel and episodes,
its settings."""

from __future__ import annotations

from pathlib import Path

from .evaluations import Evaluation, figures_table
from .page import document, image, pct, table
from .tasks import tasks_body


def eval_report(eval_dir: Path) -> str:
    """The page of the evaluation in ``eval_dir``."""
    e = Evaluation.read(eval_dir)
    result, config = e.result, e.result.get("config", {})
    fast_p = table(
        ["p", "fast_p vs eager", "fast_p vs compile"],
        [[p, pct(v), pct((result.get("fast_p_compile") or {}).get(p))]
         for p, v in (result.get("fast_p") or {}).items()],
        numeric=[1, 2],
    )  # fmt: skip
    pass_at_k = table(
        ["k", "pass@k"], [[k, pct(v)] for k, v in (result.get("pass_at_k") or {}).items()]
    )
    chart = eval_dir / "eval.png"
    figures = (
        figures_table([e])
        + "<h3>fast_p: the share of all tasks correct and faster than p times the baseline</h3>"
        + fast_p
        + (image(chart, "fast_p") if chart.is_file() else "")
        + "<h3>pass@k</h3>"
        + pass_at_k
    )
    settings = table(
        ["setting", "value"], [[k, v] for k, v in config.items()], [{"data-key": k} for k in config]
    )
    subtitle = (
        f"{eval_dir} | model {config.get('model') or '?'} | backend {config.get('backend')} | "
        f"{result.get('tasks')} tasks, {config.get('samples')} sample(s) of "
        f"{config.get('turns')} turn(s)"
    )
    sections = [
        ("results", "Results", figures),
        ("tasks-eval", "Tasks", tasks_body([e], "task")),
        ("config", "Settings", settings),
    ]
    return document(f"cuda-agent eval {eval_dir.name}", subtitle, sections)
