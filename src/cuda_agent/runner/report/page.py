"""The pieces of a report page: escaped text, tables, highlighted code, diffs, embedded images,
and the page around them (one self-contained file: its style inline, its images as data URIs,
no script and nothing fetched).

Everything a model wrote, and every name or value read from a run's files, goes through
``esc`` (``html.escape``, quotes included) or through Pygments' formatter, which escapes too:
an answer holding ``</pre><script>`` is shown as text, never run.
"""

from __future__ import annotations

import base64
import difflib
import html
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232b;
       margin: 0; background: #f6f7f9; }
main { max-width: 1180px; margin: 0 auto; padding: 12px 24px 48px; }
header.top { background: #1d2a3a; color: #fff; padding: 14px 24px; }
header.top h1 { margin: 0 0 4px; font-size: 21px; }
header.top p { margin: 0; color: #c9d3df; }
nav a { color: #9fc4ff; margin-right: 14px; }
section { background: #fff; border: 1px solid #dde2e8; border-radius: 6px;
          padding: 6px 18px 14px; margin: 16px 0; }
h2 { font-size: 18px; border-bottom: 1px solid #e4e8ed; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 18px 0 6px; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 14px; }
th, td { border-bottom: 1px solid #e4e8ed; padding: 3px 10px; text-align: left;
         vertical-align: top; }
th { background: #f0f3f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.note { color: #5b6673; font-size: 13px; }
.ok { color: #0a7a32; font-weight: 600; } .bad { color: #b3261e; font-weight: 600; }
.sig { color: #0a7a32; font-weight: 600; }
figure { display: inline-block; margin: 6px 10px 6px 0; vertical-align: top; }
figure img { max-width: 540px; max-height: 900px; border: 1px solid #e4e8ed; }
figcaption { font-size: 13px; color: #5b6673; }
pre { background: #f6f8fa; border: 1px solid #e4e8ed; padding: 8px; overflow-x: auto;
      font: 12.5px/1.4 ui-monospace, "SFMono-Regular", Menlo, monospace; white-space: pre;
      max-height: 460px; }
pre.wrap { white-space: pre-wrap; word-break: break-word; }
details { margin: 6px 0; } summary { cursor: pointer; font-weight: 600; }
article.task { border-top: 2px solid #e4e8ed; padding-top: 4px; margin-top: 14px; }
div.turn { border-left: 3px solid #c5cdd6; padding-left: 10px; margin: 8px 0; }
div.turn.best { border-left-color: #0a7a32; }
.diff .add { color: #0a6e2c; background: #e9f7ee; display: block; }
.diff .del { color: #a3241c; background: #fcebea; display: block; }
.diff .hunk { color: #6a4fb3; display: block; }
div.columns { display: flex; flex-wrap: wrap; gap: 0 28px; align-items: flex-start; }
.bar { background: #4d7cc4; height: 10px; display: inline-block; min-width: 1px; }
"""


def esc(value: Any) -> str:
    """``value`` as text safe in an element or an attribute."""
    return html.escape(str(value), quote=True)


def pct(x: Any) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def times(x: Any) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def duration(seconds: Any) -> str:
    """``14 min 56 s`` (``3.2 s`` under a minute)."""
    if seconds is None:
        return "n/a"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {rest} s"


def interval(estimate: Any, low: Any, high: Any, signed: bool = False) -> str:
    """``12.5% [0.0%, 37.5%]`` (``+12.5% [...]`` for a gain)."""
    if estimate is None:
        return "n/a"
    sign = "+" if signed else ""
    return f"{estimate:{sign}.1%} [{low:{sign}.1%}, {high:{sign}.1%}]"


def table(
    head: Sequence[str],
    rows: Iterable[Sequence[Any]],
    row_attrs: Iterable[Mapping[str, str]] | None = None,
    numeric: Sequence[int] = (),
) -> str:
    """An HTML table; cells are escaped unless given as ``Raw``; ``row_attrs`` sets each
    row's attributes (``data-...``, escaped); ``numeric`` columns are right-aligned."""
    attrs = iter(row_attrs) if row_attrs is not None else None
    out = ["<table><thead><tr>", *(f"<th>{esc(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        extra = "".join(f' {k}="{esc(v)}"' for k, v in next(attrs).items()) if attrs else ""
        cells = [
            f"<td{' class=num' if i in numeric else ''}>{cell(c)}</td>" for i, c in enumerate(row)
        ]
        out.append(f"<tr{extra}>{''.join(cells)}</tr>")
    return "".join(out) + "</tbody></table>"


class Raw(str):
    """Markup built here (already escaped), passed through ``table`` as it is."""


def cell(value: Any) -> str:
    return value if isinstance(value, Raw) else esc("" if value is None else value)


def verdict(correct: bool, status: Any) -> Raw:
    """``correct`` in green, else the sandbox's status in red."""
    if correct:
        return Raw('<span class="ok">correct</span>')
    return Raw(f'<span class="bad">{esc(status or "no answer")}</span>')


def code(source: str, filename: str = "kernel.py") -> str:
    """Source highlighted by Pygments (a dependency of rich), as plain escaped text without
    it; the lexer from the file name (Python for a kernel file, C++ for ``.cu``)."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import TextLexer, get_lexer_for_filename
        from pygments.util import ClassNotFound
    except ImportError:
        return f'<pre class="hl">{esc(source)}</pre>'
    try:
        lexer = get_lexer_for_filename(filename, stripnl=False)
    except ClassNotFound:
        lexer = TextLexer(stripnl=False)
    body = highlight(source, lexer, HtmlFormatter(nowrap=True))
    return f'<pre class="hl">{body}</pre>'


def sources(candidate: str | Mapping[str, str] | None) -> list[tuple[str, str]]:
    """A candidate's files as (name, source): one ``kernel.py``, or each file it named."""
    if candidate is None:
        return []
    if isinstance(candidate, str):
        return [("kernel.py", candidate)]
    return [(str(name), str(text)) for name, text in candidate.items()]


def diff(before: str, after: str, old: str, new: str) -> str:
    """A unified diff of two texts, added lines green and removed red; a note when equal."""
    lines = list(
        difflib.unified_diff(before.splitlines(), after.splitlines(), old, new, lineterm="", n=2)
    )
    if not lines:
        return '<p class="note">the same code as the previous turn</p>'
    out = []
    for line in lines:
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")
        if line.startswith(("+++", "---")):
            kind = "hunk"
        out.append(f'<span class="{kind}">{esc(line)}</span>' if kind else esc(line) + "\n")
    return f'<pre class="diff">{"".join(out)}</pre>'


def image(path: Path, caption: str) -> str:
    """A PNG embedded as a data URI, with its caption."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{esc(caption)}">'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )


def section(ident: str, title: str, body: str) -> str:
    return f'<section id="{esc(ident)}"><h2>{esc(title)}</h2>{body}</section>'


def document(title: str, subtitle: str, sections: Sequence[tuple[str, str, str]]) -> str:
    """The whole page: a header, a table of contents and the sections (id, title, body)."""
    try:
        from pygments.formatters import HtmlFormatter

        style = HtmlFormatter().get_style_defs(".hl")
    except ImportError:
        style = ""
    links = "".join(f'<a href="#{esc(i)}">{esc(t)}</a>' for i, t, _ in sections)
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}{style}</style></head><body>"
        f'<header class="top"><h1>{esc(title)}</h1><p>{esc(subtitle)}</p><nav>{links}</nav>'
        "</header><main>"
        + "".join(section(i, t, b) for i, t, b in sections)
        + "</main></body></html>\n"
    )
