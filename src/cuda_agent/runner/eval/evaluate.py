"""Held-out evaluation: the multi-turn agent on each task, KernelBench's metrics over the tasks.

Used by ``cuda-agent eval`` (and by the trainer for held-out evaluation). Each task gets
``samples`` episodes of up to ``turns`` turns; its best kernel is the best turn over all of
them (``cuda_agent.agent.best_of``: highest reward; among equals a correct one, then the
highest speedup over eager). Layout
of an output directory::

    eval_config.json   the settings (a resumed evaluation must use the same ones)
    eval_tasks.jsonl   one row per finished task, appended and fsynced as each chunk finishes
    kernels/<task>.py  the best kernel of each task that had one
    episodes/<task>.jsonl  the task's episodes turn by turn (``episode_record``: answers,
                       verdicts, feedback; no token ids), for the report
    eval.json          the summary (``cuda_agent.reward.summary``), ``ci95`` (each metric's
                       bootstrap interval over tasks: ``comparison.eval_intervals``), per_task
                       rows and config
    eval.md, eval.png  the table and the fast_p chart (``eval.report``)
    report.html        the page a person reads (``report``): tables, kernels, episodes

An evaluation killed at any moment resumes on the same directory: the tasks already in
``eval_tasks.jsonl`` are skipped (a row cut short by the kill is dropped and redone). Its tasks
are judged in chunks (``batch`` tasks of one ``part`` at a time), each chunk's rows written as
it ends, so a kill loses at most the chunk under way; ``unit`` lets a caller wrap each chunk
(the trainer's deadline stops an evaluation between two chunks, not only before it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from tqdm import tqdm

from cuda_agent.agent import (
    AgentConfig,
    Episode,
    SamplingParams,
    best_of,
    best_outcome,
    episode_to_json,
    run_episodes,
)
from cuda_agent.kernel_sandbox import Task
from cuda_agent.reward import faster_than, summary

from ..checkpoint import MetricsWriter, write_json_atomic, write_text_atomic
from .comparison import eval_intervals

ROWS_FILE = "eval_tasks.jsonl"
CONFIG_FILE = "eval_config.json"


class EvaluationError(RuntimeError):
    """The policy failed on a task (nothing is recorded for it: a rerun resumes there)."""


def evaluate_tasks(
    policy: Any,
    sandbox: Any,
    tasks: Sequence[Task],
    *,
    turns: int = 1,
    samples: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int = 512,
    out_dir: str | Path | None = None,
    agent_config: AgentConfig | None = None,
    log: Callable[[str], None] = print,
    seed: int = 0,
    batch: int = 4,
    model: str = "",
    progress: bool = False,
    parts: Sequence[tuple[str, Sequence[str]]] | None = None,
    unit: Callable[[str, Sequence[Task]], AbstractContextManager[object]] | None = None,
    part_samples: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Evaluate ``policy`` on ``tasks`` through ``sandbox``; returns what ``eval.json`` holds.

    ``agent_config`` sets the agent (its ``max_turns`` is replaced by ``turns``); ``batch``
    tasks share each ``run_episodes`` call (a chunk), taken from one of ``parts`` (``(label,
    task names)`` that cover every task once, in the order to judge them; None: one part of
    all). ``unit(label, chunk)``, when given, is entered around each chunk that has work: it
    may raise to stop the evaluation before that chunk (the chunks before it stay written).
    ``part_samples`` gives some parts, by label, another number of samples than ``samples``
    (a set whose every verdict costs seconds, say; pass@k is then reported up to the fewest;
    a label no part has is ignored).
    With ``out_dir`` every finished chunk is persisted at once and a rerun resumes; without
    it nothing is written. ``model`` names the policy in
    the config. Raises EvaluationError when the policy produced no answer at all for a task.
    ``seconds`` says where this call's time went (``RolloutBatch.seconds`` summed: sampling,
    evaluation, sandbox, agent), how many answers were judged (``evaluations``) and how many
    programs the sandbox ran for them (``sandbox_jobs``: identical samples of a task share
    one verdict, ``AgentConfig.share_verdicts``); tasks resumed from disk took none of it.
    """
    # (AgentConfig checks the turns: max_turns >= 1)
    agent = dataclasses.replace(agent_config or AgentConfig(), max_turns=turns)
    part_samples = dict(part_samples or {})
    if samples < 1 or batch < 1 or any(n < 1 for n in part_samples.values()):
        raise ValueError("samples and batch must be >= 1")
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"task names must be unique; repeated: {', '.join(dupes)}")
    config = {
        "turns": turns,
        "samples": samples,
        "temperature": temperature,
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "part_samples": part_samples or None,  # (None: every part has ``samples``)
        "batch": batch,  # chunks, and so each sample's seed, follow from it
        "model": model or None,
        "backend": sandbox.backend,
        "time_compile": getattr(getattr(sandbox, "config", None), "time_compile", None),
    }
    out = Path(out_dir) if out_dir is not None else None
    done: dict[str, dict[str, Any]] = {}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        _check_config(out / CONFIG_FILE, config)
        done = read_rows(out / ROWS_FILE)
        extra = sorted(set(done) - set(names))
        if extra:
            log(f"ignoring {len(extra)} rows in {out / ROWS_FILE} for tasks not evaluated now")
    labelled = _checked_parts(parts, names)
    by_name = {t.name: t for t in tasks}
    # A chunk is cut from its whole part, so that a resumed evaluation samples each chunk as
    # an unkilled one does (its seed is its first task's); one cut short by a kill while its
    # rows were written is judged again whole, its rows written before dropped first (the
    # file rewritten atomically), so that the file holds each task once.
    chunks = [
        (label, chunk)
        for label, part in labelled
        for chunk in _pieces([by_name[n] for n in part], batch)
        if any(t.name not in done for t in chunk)
    ]
    redo = {t.name for _, chunk in chunks for t in chunk if t.name in done}
    if out is not None and redo:
        kept = "".join(json.dumps(row) + "\n" for name, row in done.items() if name not in redo)
        write_text_atomic(out / ROWS_FILE, kept)
    for name in redo:
        del done[name]
    todo = [t for _, chunk in chunks for t in chunk]
    if len(todo) < len(tasks):
        log(f"resuming: {len(tasks) - len(todo)} of {len(tasks)} tasks already evaluated")
    spent: dict[str, float] = {}  # where this invocation's time went (tasks done before: not)
    bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo), desc="cuda-agent eval",
               unit="task", disable=not progress)  # fmt: skip
    try:
        for label, chunk in chunks:
            with unit(label, chunk) if unit is not None else contextlib.nullcontext():
                sampling = SamplingParams(n=part_samples.get(label, samples),
                                          max_new_tokens=max_new_tokens,
                                          temperature=temperature,
                                          seed=seed + names.index(chunk[0].name))  # fmt: skip
                rollout = run_episodes(policy, sandbox, chunk, sampling, agent)
                for part, seconds in rollout.seconds.items():
                    spent[part] = spent.get(part, 0.0) + seconds
                spent["evaluations"] = spent.get("evaluations", 0) + rollout.evaluations
                spent["sandbox_jobs"] = spent.get("sandbox_jobs", 0) + rollout.sandbox_jobs
                failed = []
                for g, task in enumerate(chunk):
                    mine = [e for e in rollout.episodes if e.group == g]
                    if all(e.stop_reason == "error" and not e.turns for e in mine):
                        failed.append(f"{task.name}: {_error(mine)}")
                        continue
                    done[task.name] = _persist(out, task.name, mine)
                    log(_line(done[task.name]))
                    bar.update()
                if failed:
                    raise EvaluationError("the policy gave no answer for " + "; ".join(failed))
    finally:
        bar.close()
    rows = [done[n] for n in names]
    unjudged = sum(row.get("samples_unjudged", 0) for row in rows)
    if unjudged:
        log(f"{unjudged} of {sum(row['samples'] for row in rows)} samples unjudged: the "
            "sandbox's reference failed on them, alone too (see each episode's verdict); they "
            "count as not correct here, so these figures are lower bounds")  # fmt: skip
    result = {**summary(rows), "unjudged_samples": unjudged, "ci95": eval_intervals(rows),
              "per_task": rows, "config": config, "seconds": spent}  # fmt: skip
    if out is not None:
        from .report import write_report

        write_json_atomic(out / "eval.json", result)
        write_report(out, result, log)
    return result


def _checked_parts(
    parts: Sequence[tuple[str, Sequence[str]]] | None, names: list[str]
) -> list[tuple[str, Sequence[str]]]:
    """``parts``, checked to name every task once (ValueError saying what is amiss); None:
    one part of all the tasks."""
    if parts is None:
        return [("", names)]
    listed = [n for _, part in parts for n in part]
    missing = sorted(set(names) - set(listed))
    unknown = sorted(set(listed) - set(names))
    twice = sorted({n for n in listed if listed.count(n) > 1})
    if missing or unknown or twice:
        said = [f"{what}: {', '.join(which)}" for what, which in
                (("in no part", missing), ("not a task", unknown), ("in two parts", twice))
                if which]  # fmt: skip
        raise ValueError("an evaluation's parts must name each task once; " + "; ".join(said))
    return list(parts)


def _pieces(tasks: list[Task], size: int) -> list[list[Task]]:
    """``tasks`` in consecutive pieces of at most ``size``."""
    return [tasks[start : start + size] for start in range(0, len(tasks), size)]


def _persist(out: Path | None, task: str, episodes: Sequence[Episode]) -> dict[str, Any]:
    """The task's row; with ``out``, its best kernel, its episodes and the row (appended,
    flushed, fsynced: the row last, so a task is done only once all of it is written)."""
    row, kernel = task_row(task, episodes)
    if out is not None:
        if kernel is not None:
            (out / "kernels").mkdir(exist_ok=True)
            write_text_atomic(out / "kernels" / f"{task}.py", kernel)
        (out / "episodes").mkdir(exist_ok=True)
        records = "".join(json.dumps(episode_record(e)) + "\n" for e in episodes)
        write_text_atomic(out / "episodes" / f"{task}.jsonl", records)
        MetricsWriter(out / ROWS_FILE).write(row)
    return row


def episode_record(episode: Episode) -> dict[str, Any]:
    """``episode_to_json`` without the token ids and log-probs (what a reader of the answers
    needs, a fraction of the size); ``episode_from_json`` reads it back."""
    data = episode_to_json(episode)
    for turn in data["turns"]:
        turn.update(context_ids=[], response_ids=[], sampler_logprobs=[])
    return data


def task_row(task: str, episodes: Sequence[Episode]) -> tuple[dict[str, Any], str | None]:
    """A task's row (``cuda_agent.reward.TaskOutcome``'s fields and more) from its episodes,
    and the source of its best kernel (None when the best turn had no code). The best kernel
    is ``best_of`` the episodes; ``samples_correct`` and ``samples_fast_1`` count the episodes
    whose best kernel (``best_outcome``) is correct, and correct with speedup > 1 (fast_1);
    ``samples_unjudged`` those with a turn the sandbox could not judge (``unjudged``: its
    reference failed), counted as not correct."""
    best = best_of(episodes)
    outcomes = [best_outcome(e) for e in episodes]
    unjudged = sum(e.unjudged for e in episodes)
    row: dict[str, Any] = {"task": task, "correct": False, "speedup_vs_eager": None,
                           "speedup_vs_compile": None, "samples": len(episodes),
                           "samples_correct": sum(o.correct for o in outcomes),
                           "samples_fast_1": int(sum(faster_than([o], "eager", 1.0)
                                                     for o in outcomes)),
                           "samples_unjudged": unjudged}  # fmt: skip
    if best is None:  # no episode got as far as a turn
        row.update(best_reward=None, status="no_answer", flags=[], turns=0, best_turn=None,
                   stop_reason=episodes[0].stop_reason if episodes else "")  # fmt: skip
        return row, None
    episode, turn = best
    r = turn.result
    row.update(
        correct=r is not None and r.correct,
        speedup_vs_eager=r.speedup_vs_eager if r is not None else None,
        speedup_vs_compile=r.speedup_vs_compile if r is not None else None,
        best_reward=turn.reward,
        status=r.status if r is not None else "malformed",
        flags=list(r.flags) if r is not None else [],
        turns=len(episode.turns),
        best_turn=turn.index,
        stop_reason=episode.stop_reason,
        candidate_time_ms=r.candidate_time_ms if r is not None else None,
        eager_time_ms=r.eager_time_ms if r is not None else None,
        compile_time_ms=r.compile_time_ms if r is not None else None,
    )
    return row, turn.candidate if isinstance(turn.candidate, str) else None


def read_rows(path: Path) -> dict[str, dict[str, Any]]:
    """The rows in ``path`` by task. A last line cut short (a kill mid-append) is dropped and
    the file rewritten without it; a broken line anywhere else raises ValueError."""
    if not path.exists():
        return {}
    text = path.read_text()
    lines = text.split("\n")
    rows: dict[str, dict[str, Any]] = {}
    kept = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            task = row["task"]
        except (json.JSONDecodeError, TypeError, KeyError) as exc:
            if i == len(lines) - 1:
                break  # the tail of an append a kill cut short: that task is redone
            raise ValueError(f"{path} line {i + 1} is not a task row: {exc}") from exc
        rows[task] = row
        kept.append(line)
    if text and not text.endswith("\n"):
        write_text_atomic(path, "".join(line + "\n" for line in kept))
    return rows


def _check_config(path: Path, config: dict[str, Any]) -> None:
    """Write the settings, or check that a resumed evaluation uses the same ones."""
    if not path.exists():
        write_json_atomic(path, config)
        return
    saved = json.loads(path.read_text())
    changed = [f"{k}: {saved.get(k)!r} then, {v!r} now" for k, v in config.items()
               if saved.get(k) != v]  # fmt: skip
    if changed:
        raise ValueError(
            f"{path.parent} holds an evaluation with other settings ({'; '.join(changed)}); "
            "use another output directory"
        )


def _error(episodes: Sequence[Episode]) -> str:
    for e in episodes:
        for m in reversed(e.messages):
            if m.get("role") == "error":
                return str(m.get("content", ""))[:300]
    return "no answer"


def _line(row: dict[str, Any]) -> str:
    verdict = "correct" if row["correct"] else row["status"]
    fast = row["speedup_vs_eager"]
    speed = f", {fast:.2f}x eager" if row["correct"] and fast is not None else ""
    unjudged = f", {row['samples_unjudged']} unjudged" if row.get("samples_unjudged") else ""
    return (
        f"{row['task']}: {verdict}{speed} ({row['samples_correct']}/{row['samples']} samples "
        f"correct{unjudged}, best reward {row['best_reward']})"
    )


def micro_batches(requested: int, backend: str) -> int:
    """An evaluation's micro-batches (``TrainConfig.eval_micro_batches``): ``requested``, or
    with 0 two on the CUDA backend (sampling overlaps judging) and one elsewhere."""
    if requested:
        return requested
    return 2 if backend == "cuda" else 1
