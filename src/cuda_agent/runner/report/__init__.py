"""``report.html``: the page a person reads at the end of a run or an evaluation, one
self-contained file (style inline, curves as data URIs, no script, nothing fetched), written
from what the run already recorded:

    a run directory         held-out figures with their intervals and paired gains, the curves,
                            the stages' timeline and the invocations, per task its best kernel
                            and episodes turn by turn, the collected episodes, the config
    an evaluation directory its figures with their intervals, fast_p, per task the same,
                            its settings

``train`` and ``eval`` write it as they end (``write_report``); ``cuda-agent report DIR``
rebuilds it for a directory written before, or after a change here. ``terminal`` holds the
short table the two commands print.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..checkpoint import write_text_atomic

__all__ = ["ReportError", "add_parser", "kind", "run", "write_report"]

FILE = "report.html"


class ReportError(ValueError):
    """A directory that is neither a run's nor an evaluation's."""


def kind(directory: Path) -> str:
    """``"run"`` (config.json and state.json: ``train`` wrote it) or ``"eval"`` (eval.json);
    ``ReportError`` for anything else."""
    if (directory / "config.json").is_file() and (directory / "state.json").is_file():
        return "run"
    if (directory / "eval.json").is_file():
        return "eval"
    raise ReportError(
        f"{directory} is neither a run directory (config.json and state.json, written by "
        "'cuda-agent train') nor an evaluation directory (eval.json, written by 'cuda-agent "
        "eval' when it finishes)"
    )


def write_report(directory: str | Path) -> Path:
    """Write ``directory/report.html`` (a run's or an evaluation's, ``kind``); its path."""
    directory = Path(directory)
    if kind(directory) == "run":
        from .run_page import run_report

        page = run_report(directory)
    else:
        from .eval_page import eval_report

        page = eval_report(directory)
    path = directory / FILE
    write_text_atomic(path, page)
    return path


def add_parser(sub: Any) -> None:
    """``cuda-agent report DIR``."""
    parser = sub.add_parser(
        "report",
        help="(re)write report.html for a run or an evaluation directory",
        description="Write DIR/report.html from what DIR holds: a run directory (cuda-agent "
        "train) or an evaluation directory (cuda-agent eval, or a run's eval/<name>). One "
        "self-contained page to open in a browser, offline.",
    )
    parser.add_argument("directory", help="a run directory or an evaluation directory")


def run(args: Any) -> int:
    """The ``report`` command: 0 and the page's path, 2 and one line for a wrong directory."""
    try:
        path = write_report(args.directory)
    except ReportError as exc:
        print(f"cuda-agent: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0
