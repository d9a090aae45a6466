"""``eval.md`` (the reference system's table, the bootstrap intervals, fast_p, pass@k and a
line per task) and ``eval.png`` (fast_p against p, vs eager and vs torch.compile) from an
``eval.json`` dict, then ``report.html`` (``report``) from the directory."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..checkpoint import write_text_atomic


def _share(x: float) -> str:
    return f"{100 * x:.1f}%"


def _times(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def markdown(result: dict[str, Any]) -> str:
    """The evaluation as a Markdown document."""
    config = result["config"]
    rows = result["per_task"]
    lines = [
        "# cuda-agent eval",
        "",
        f"{result['tasks']} tasks; model {config.get('model') or '?'}; backend "
        f"{config.get('backend')}; turns {config['turns']}, samples {config['samples']}, "
        f"temperature {config['temperature']}, {config['max_new_tokens']} new tokens a turn.",
        "",
        "| Pass rate | fast_1 (vs eager) | fast_1 vs compile | Geomean speedup vs eager "
        "| Geomean speedup vs compile |",
        "|---|---|---|---|---|",
        f"| {_share(result['pass_rate'])} | {_share(result['fast_1'])} "
        f"| {_share(result['fast_1_compile'])} "
        f"| {_times(result['geomean_speedup_vs_eager'])} "
        f"| {_times(result['geomean_speedup_vs_compile'])} |",
        "",
        "Shares are over all tasks; fast_1 is KernelBench's fast_p at p = 1 (correct and "
        "speedup > 1); geometric means are over the correct kernels.",
    ]
    unmeasured = sum(1 for r in rows if r["correct"] and r["speedup_vs_compile"] is None)
    if unmeasured:
        why = "no compile time was measured"
        if not config.get("time_compile"):
            why = "time_compile off: the default on the CPU; --time-compile turns it on"
        lines += [
            "",
            f"torch.compile was not timed for {unmeasured} correct kernels ({why}): they "
            "count as not faster than compile.",
        ]
    lines += _interval_lines(result.get("ci95") or {})
    lines += ["", "## fast_p", "", "| p | fast_p vs eager | fast_p vs compile |", "|---|---|---|"]
    for p, value in result["fast_p"].items():
        lines.append(f"| {p} | {_share(value)} | {_share(result['fast_p_compile'][p])} |")
    if result["pass_at_k"]:
        lines += ["", "## pass@k", "", "| k | pass@k |", "|---|---|"]
        lines += [f"| {k} | {_share(v)} |" for k, v in result["pass_at_k"].items()]
    lines += [
        "",
        "## Tasks",
        "",
        "| Task | Correct | Status | Speedup vs eager | Speedup vs compile | Best reward "
        "| Correct samples | Turns |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['task']} | {'yes' if r['correct'] else 'no'} | {r['status']} "
            f"| {_times(r['speedup_vs_eager'])} | {_times(r['speedup_vs_compile'])} "
            f"| {r['best_reward']} | {r['samples_correct']}/{r['samples']} | {r['turns']} |"
        )
    return "\n".join(lines) + "\n"


def _interval_lines(ci95: dict[str, Any]) -> list[str]:
    shown = {m: v for m, v in ci95.items() if isinstance(v, dict)}
    if not shown:
        return []
    lines = [
        "",
        f"## How sure: {ci95['confidence']:.0%} bootstrap intervals over tasks",
        "",
        "| Metric | Estimate | Interval |",
        "|---|---|---|",
    ]
    for metric, v in shown.items():
        lines.append(
            f"| {metric} | {_share(v['estimate'])} | {_share(v['low'])} to {_share(v['high'])} |"
        )
    lines += [
        "",
        "`_at_1`: the mean over each task's samples; `pass_rate`, `fast_1`: the "
        f"task's best kernel over its samples ({ci95['resamples']} resamples of the tasks, "
        f"seed {ci95['seed']}).",
    ]
    return lines


def chart(result: dict[str, Any], path: Path) -> None:
    """A bar chart of fast_p against p, vs eager and vs torch.compile (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ps = list(result["fast_p"])
    eager = [result["fast_p"][p] for p in ps]
    compiled = [result["fast_p_compile"][p] for p in ps]
    x = range(len(ps))
    width = 0.4
    fig, ax = plt.subplots(figsize=(7, 4))
    try:
        ax.bar([i - width / 2 for i in x], eager, width, label="vs eager")
        timed = "" if result["config"].get("time_compile") else " (not timed)"
        ax.bar([i + width / 2 for i in x], compiled, width, label=f"vs torch.compile{timed}")
        ax.set_xticks(list(x), ps)
        ax.set_ylim(0, 1)
        ax.set_xlabel("p (speedup threshold)")
        ax.set_ylabel("fast_p (share of all tasks)")
        ax.set_title(f"fast_p over {result['tasks']} tasks")
        ax.legend()
        fig.tight_layout()
        tmp = path.with_name(f".{path.name}.tmp.png")  # replaced whole (a kill mid-write)
        fig.savefig(tmp, dpi=100)
        os.replace(tmp, path)
    finally:
        plt.close(fig)


def write_report(out: Path, result: dict[str, Any], log: Callable[[str], None] = print) -> None:
    """Write ``out/eval.md``, ``out/eval.png`` (skipped, with a note, where matplotlib is not
    installed) and ``out/report.html`` (``report``: the page with each task's kernel and
    episodes; ``out/eval.json`` is written before)."""
    write_text_atomic(out / "eval.md", markdown(result))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        log("matplotlib is not installed: no eval.png (pip install matplotlib)")
    else:
        chart(result, out / "eval.png")
    from ..report import write_report as write_page

    try:  # the evaluation is recorded: a failing page says so and leaves it as it is
        write_page(out)
    except Exception as exc:
        log(f"report.html not written ({type(exc).__name__}: {exc}); 'cuda-agent report {out}' "
            "retries it")  # fmt: skip
