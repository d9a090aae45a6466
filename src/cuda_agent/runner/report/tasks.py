"""Per task: its verdict at every evaluation, its best kernel (highlighted, with the sandbox's
verdict and speedups) and the episodes that led there, turn by turn: the answer, the verdict
and the sandbox's message, the feedback the next turn read, and what the code changed from the
previous turn. Also any list of episodes (the rft stage's collection)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cuda_agent.agent import Episode, Turn, best_of

from .evaluations import Evaluation
from .page import code, diff, esc, sources, table, times, verdict


def _speedups(result: Any) -> str:
    if result is None or not result.correct:
        return ""
    return (
        f"{times(result.speedup_vs_eager)} vs eager, "
        f"{times(result.speedup_vs_compile)} vs torch.compile"
    )


def _times_ms(result: Any) -> str:
    parts = [
        f"{name} {value:.4g} ms"
        for name, value in (
            ("kernel", result.candidate_time_ms),
            ("eager", result.eager_time_ms),
            ("compile", result.compile_time_ms),
        )
        if value is not None
    ]
    return ", ".join(parts)


def turn_block(turn: Turn, previous: Turn | None, best: bool) -> str:
    """One turn: what the model answered and what the sandbox said of it."""
    r = turn.result
    status = r.status if r is not None else "no code" if turn.candidate is None else "unjudged"
    facts = [f"reward {turn.reward:g}", f"action {turn.action}", f"finish {turn.finish_reason}"]
    if r is not None and (speed := _speedups(r)):
        facts.append(speed)
    if r is not None and r.flags:
        facts.append("flags " + ", ".join(r.flags))
    head = (
        f"<p><b>turn {turn.index + 1}</b>{' (best)' if best else ''}: "
        f"{verdict(r is not None and r.correct, status)}; {esc('; '.join(facts))}</p>"
    )
    parts = [head, f'<p class="note">answer</p><pre class="wrap">{esc(turn.text)}</pre>']
    if previous is not None:
        parts.append('<p class="note">what changed from the previous turn</p>')
        old, new = _joined(previous.candidate), _joined(turn.candidate)
        if old is None or new is None:
            gone = "the previous turn had no code" if old is None else "this turn has no code"
            parts.append(f'<p class="note">{gone}</p>')
        else:
            parts.append(diff(old, new, f"turn {previous.index + 1}", f"turn {turn.index + 1}"))
    if r is not None and r.message:
        parts.append(f'<p class="note">sandbox</p><pre class="wrap">{esc(r.message)}</pre>')
    if turn.feedback:
        parts.append(
            f'<p class="note">feedback (what the next turn read)</p>'
            f'<pre class="wrap">{esc(turn.feedback)}</pre>'
        )
    kind = "turn best" if best else "turn"
    return f'<div class="{kind}" data-turn="{turn.index}">{"".join(parts)}</div>'


def _joined(candidate: Any) -> str | None:
    files = sources(candidate)
    if not files:
        return None
    if len(files) == 1:
        return files[0][1]
    return "".join(f"// file {name}\n{text}\n" for name, text in files)


def episode_block(episode: Episode, title: str, best_turn: int | None, open_: bool) -> str:
    """An episode turn by turn, in a collapsible block."""
    turns = "".join(
        turn_block(t, episode.turns[i - 1] if i else None, t.index == best_turn)
        for i, t in enumerate(episode.turns)
    )
    summary = (
        f"{title}: {len(episode.turns)} turn(s), stopped: {episode.stop_reason or 'n/a'}, "
        f"best reward {episode.best_reward if episode.best_reward is not None else 'n/a'}"
    )
    return (
        f'<details class="episode"{" open" if open_ else ""}><summary>{esc(summary)}</summary>'
        f"{turns or '<p class=note>no turn</p>'}</details>"
    )


def _kernel_block(row: dict[str, Any], best: tuple[Episode, Turn] | None, kept: str | None) -> str:
    """The task's best kernel: the sandbox's verdict, speedups and times, the source."""
    if best is not None:
        files, r = sources(best[1].candidate), best[1].result
    else:  # an evaluation from before episodes were kept: its kernels/ file
        files, r = ([("kernel.py", kept)] if kept is not None else []), None
    line = (
        f"{verdict(row.get('correct', False), row.get('status'))}; "
        f"{esc(times(row.get('speedup_vs_eager')))} vs eager, "
        f"{esc(times(row.get('speedup_vs_compile')))} vs torch.compile"
    )
    if r is not None and _times_ms(r):
        line += esc(f" ({_times_ms(r)})")
    if row.get("flags"):
        line += esc("; flags " + ", ".join(row["flags"]))
    body = "".join(
        (f'<p class="note">{esc(name)}</p>' if len(files) > 1 else "") + code(text, name)
        for name, text in files
    )
    return (
        f'<div class="kernel"><p><b>best kernel</b>: {line}</p>'
        f"{body or '<p class=note>no code: the model wrote no kernel for this task</p>'}</div>"
    )


def evaluation_block(e: Evaluation, task: str, open_: bool) -> str:
    """One evaluation of a task: its best kernel, then its episodes (the best one first)."""
    row = e.rows[task]
    episodes = e.episodes(task)
    best = best_of(episodes) if episodes else None
    parts = [_kernel_block(row, best, e.kernel(task))]
    if episodes is None:
        parts.append('<p class="note">episodes not recorded by this evaluation</p>')
    else:
        top = best[0] if best is not None else None
        order = sorted(range(len(episodes)), key=lambda i: episodes[i] is not top)
        for n, i in enumerate(order):
            mark = episodes[i] is top and best is not None
            title = f"sample {i + 1} of {len(episodes)}" + (" (best kernel)" if mark else "")
            best_turn = best[1].index if mark and best is not None else None
            parts.append(episode_block(episodes[i], title, best_turn, open_=n == 0))
    summary = f"{e.label}: best kernel and episode{'s' if len(episodes or ()) > 1 else ''}"
    return (
        f'<details class="evaluation" data-eval="{esc(e.name)}"{" open" if open_ else ""}>'
        f"<summary>{esc(summary)}</summary>{''.join(parts)}</details>"
    )


def task_article(task: str, evaluations: Sequence[Evaluation], anchor: str) -> str:
    """A task: a line per evaluation, then each evaluation's kernel and episodes (latest
    open)."""
    mine = [e for e in evaluations if task in e.rows]
    rows, attrs = [], []
    for e in mine:
        r = e.rows[task]
        rows.append(
            [
                e.label,
                verdict(r.get("correct", False), r.get("status")),
                times(r.get("speedup_vs_eager")),
                times(r.get("speedup_vs_compile")),
                r.get("best_reward"),
                f"{r.get('samples_correct')}/{r.get('samples')}",
                r.get("turns"),
            ]
        )
        attrs.append({"data-eval": e.name, "data-status": str(r.get("status"))})
    head = ["evaluation", "verdict", "vs eager", "vs compile", "best reward", "correct", "turns"]
    blocks = [evaluation_block(e, task, open_=i == 0) for i, e in enumerate(reversed(mine))]
    return (
        f'<article class="task" id="{esc(anchor)}" data-task="{esc(task)}">'
        f"<h3>{esc(task)}</h3>{table(head, rows, attrs, numeric=[2, 3, 4, 5, 6])}"
        f"{''.join(blocks)}</article>"
    )


def tasks_body(evaluations: Sequence[Evaluation], prefix: str) -> str:
    """Every task of these evaluations (one task set), in their first evaluation's order."""
    names = list(dict.fromkeys(t for e in evaluations for t in e.rows))
    index = ", ".join(f'<a href="#{esc(f"{prefix}-{t}")}">{esc(t)}</a>' for t in names)
    articles = "".join(task_article(t, evaluations, f"{prefix}-{t}") for t in names)
    return f'<p class="note">{len(names)} tasks: {index}</p>{articles}'


def episodes_list(episodes: Sequence[Episode], shown: int) -> str:
    """The first ``shown`` of a list of episodes, each collapsed, with a line per episode."""
    rows = [
        [
            i + 1,
            e.task,
            len(e.turns),
            e.stop_reason,
            e.best_reward,
            verdict(any(t.result is not None and t.result.correct for t in e.turns),
                    _last_status(e)),
        ]
        for i, e in enumerate(episodes)
    ]  # fmt: skip
    head = ["#", "task", "turns", "stopped", "best reward", "verdict"]
    blocks = "".join(
        episode_block(e, f"episode {i + 1}: {e.task}", e.best_turn, open_=False)
        for i, e in enumerate(episodes[:shown])
    )
    more = len(episodes) - shown
    note = f'<p class="note">{more} more in rft/episodes.jsonl</p>' if more > 0 else ""
    return table(head, rows, numeric=[0, 2, 4]) + blocks + note


def _last_status(e: Episode) -> str:
    judged = [t.result.status for t in e.turns if t.result is not None]
    return judged[-1] if judged else "no code"
