"""Evaluation stages: held-out (and training) tasks before and after training, with the
reference system's metrics (``evaluate.evaluate_tasks``: pass rate, fast_1 against eager and
against compile, geometric-mean speedups, fast_p; each with its 95% bootstrap interval over the
tasks in ``ci95``). ``eval_samples`` episodes of ``eval_turns`` turns per task at
``eval_temperature`` (1 and 0 by default: greedy); each writes ``eval/<name>/eval.json``
and resumes from the tasks it had finished.

Under several processes each evaluates its part of the tasks into ``eval-parts/<name>/<rank>``
(resumable as any evaluation), and rank 0 merges the parts' rows, kernels and episodes into
``eval/<name>``, where ``evaluate_tasks`` finds every task done and writes the summary and the
report as for one process; every process then holds that summary.
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from cuda_agent.agent import AgentConfig
from cuda_agent.kernel_sandbox import Task

from .. import distributed as D
from ..checkpoint import write_text_atomic
from ..context import Run
from ..eval.evaluate import CONFIG_FILE, ROWS_FILE, evaluate_tasks, micro_batches, read_rows
from ..task_sets import labelled_parts
from .rollouts import decode_delta, evaluations_per_min

KEYS = (
    "pass_rate",
    "fast_1",
    "fast_1_compile",
    "geomean_speedup_vs_eager",
    "geomean_speedup_vs_compile",
    "fast_p",
)


def run(ctx: Run, name: str, tasks: Sequence[Task]) -> dict[str, Any]:
    if name in ctx.state.finished_stages:
        return ctx.state.evaluations.get(name, {})
    kind = f"evaluation {name.rsplit('_', 1)[0]}"
    if D.world_size() > 1:  # one unit: a deadline stops the invocation before it, not in it
        with ctx.unit(kind, name):
            return _evaluate(ctx, name, tasks)
    return _evaluate(ctx, name, tasks)


def set_parts(ctx: Run, name: str, tasks: Sequence[Task]) -> list[tuple[str, list[str]]]:
    """The evaluation's parts: the held-out evaluations' tasks by the named set they come from
    (``--eval-tasks a+b``: ``a``'s, then ``b``'s), other evaluations' as one part. Where no
    deadline stops the invocation and every set has the same samples, one part of all: a
    chunk a set cannot stop anything then, and one batch of every task decodes faster (on the
    CPU a 12-row step costs 178 ms against 130 ms for 4 rows: the default run's two sets of 6
    as two chunks took 184 s an evaluation, as one about 126 s)."""
    config = ctx.config
    one = ctx.deadline is None and not config.eval_batch and not config.eval_set_samples
    if not name.startswith("heldout") or one:
        return [("", [t.name for t in tasks])]
    return labelled_parts(config.eval_tasks, tasks, config.kernelbench)


def _evaluate(ctx: Run, name: str, tasks: Sequence[Task]) -> dict[str, Any]:
    """Evaluate ``tasks`` into ``eval/<name>``, by ``set_parts`` (each part's samples:
    ``eval_set_samples``, else ``eval_samples``). One process: each chunk (a part, or
    ``eval_batch`` tasks of one) is a unit of its own, written as it ends and stopped before by
    the deadline; the kind of a named set's chunks is ``evaluation heldout: <set>``."""
    config = ctx.config
    settings: dict[str, Any] = dict(
        turns=config.eval_turns,
        samples=config.eval_samples,
        temperature=config.eval_temperature,
        max_new_tokens=config.max_new_tokens,
        log=ctx.log,
        seed=config.seed,
        model=config.model,
        part_samples=config.set_samples() if name.startswith("heldout") else {},
        agent_config=AgentConfig(
            history=config.history,
            micro_batches=micro_batches(config.eval_micro_batches, ctx.sandbox.backend),
            share_verdicts=config.share_verdicts,
            quiet_timing=config.quiet_timing,
        ),
    )
    out = ctx.run_dir / "eval" / name
    result: dict[str, Any] | None = None
    memory = ctx.policy.release_memory()  # the sandbox's workers share the GPU
    decoding = ctx.policy.decode_stats()
    if D.world_size() == 1:
        # each chunk in one call: one generate (or one per micro-batch, taking turns with
        # the sandbox), then the verdicts
        kind = f"evaluation {name.rsplit('_', 1)[0]}"
        batch = config.eval_batch or max(1, len(tasks))

        def unit(label: str, chunk: Sequence[Task]) -> AbstractContextManager[None]:
            whole = len(chunk) == len(tasks)
            what = name if whole else f"{name} ({label or 'tasks'}: {_span(chunk, tasks)})"
            return ctx.unit(f"{kind}: {label}" if label else kind, what)

        result = evaluate_tasks(ctx.policy, ctx.sandbox, tasks, out_dir=out, batch=batch,
                                parts=set_parts(ctx, name, tasks), unit=unit,
                                **settings)  # fmt: skip
    else:
        part = ctx.run_dir / "eval-parts" / name / str(D.rank())
        mine = D.share(tasks)
        if mine:
            evaluate_tasks(ctx.policy, ctx.sandbox, mine, out_dir=part, batch=len(mine),
                           parts=set_parts(ctx, name, mine), **settings)  # fmt: skip
        D.barrier()  # every part is written
        if D.is_main():
            _merge(part.parent, out, [t.name for t in tasks])
            quiet = {**settings, "log": lambda _line: None}  # every task is done: no new line
            result = evaluate_tasks(
                ctx.policy, ctx.sandbox, tasks, out_dir=out, batch=max(1, len(tasks)), **quiet
            )
        result = D.broadcast(result)
    assert result is not None
    rewards = [row.get("best_reward") for row in result["per_task"]]
    summary = {key: result.get(key) for key in KEYS}
    summary["pass_at_1"] = result["pass_at_k"].get("1")
    summary["ci95"] = {  # [low, high] of each figure over the tasks (comparison.py)
        m: [v["low"], v["high"]] for m, v in result["ci95"].items() if isinstance(v, dict)
    }
    summary["mean_reward"] = (
        statistics.fmean(r if r is not None else 0.0 for r in rewards) if rewards else None
    )
    summary["tasks"] = [row["task"] for row in result["per_task"]]
    statuses = [row.get("status", "") for row in result["per_task"]]
    summary["statuses"] = {k: statuses.count(k) for k in sorted(set(statuses))}
    summary["policy_gpu_bytes"] = memory  # what the trainer held on its device meanwhile
    # the sampling's compiling: a fresh process's first evaluation compiles the decoding step
    # (on the H200, 2026-12-05, most of a warm start's 104 s of sampling 24 answers)
    summary.update(decode_delta(decoding, ctx.policy.decode_stats()))
    summary["per_task_reward"] = {row["task"]: row.get("best_reward") for row in result["per_task"]}
    # where this invocation's evaluation time went (the rows resumed from disk took none)
    spent = result.get("seconds", {})
    for where in ("sampling", "evaluation", "sandbox"):
        if where in spent:
            summary[f"{where}_s"] = spent[where]
    if "sandbox" in spent:
        summary["evaluations_per_min"] = evaluations_per_min(spent["evaluations"], spent["sandbox"])
    if spent.get("evaluations"):  # the samples that were their own program (1/samples: all agree)
        summary["distinct_answers"] = spent.get("sandbox_jobs", 0) / spent["evaluations"]
    ctx.state.evaluations[name] = summary
    ctx.finish_stage(name, summary)
    ctx.advance(1)
    ctx.log(
        f"{name}: pass rate {summary['pass_rate']:.0%}, mean reward {summary['mean_reward']:.3f} "
        f"over {len(rewards)} tasks"
    )
    return summary


def _span(chunk: Sequence[Task], tasks: Sequence[Task]) -> str:
    """Which of the evaluation's tasks ``chunk`` is, by position: ``task 33 of 61``, or ``6
    tasks from task 33 of 61`` (not all of them next to each other after a resume)."""
    index = [t.name for t in tasks].index(chunk[0].name) + 1
    first = f"task {index} of {len(tasks)}"
    return first if len(chunk) == 1 else f"{len(chunk)} tasks from {first}"


def _merge(parts: Path, out: Path, names: list[str]) -> None:
    """The processes' parts of an evaluation made one: their settings, rows (in the tasks'
    order), kernels and episodes written into ``out`` as one process would have written them."""
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, dict] = {}
    for part in sorted(p for p in parts.iterdir() if p.is_dir()):
        if (part / CONFIG_FILE).exists():
            shutil.copyfile(part / CONFIG_FILE, out / CONFIG_FILE)
        rows.update(read_rows(part / ROWS_FILE))
        for sub in ("kernels", "episodes"):
            if (part / sub).is_dir():
                shutil.copytree(part / sub, out / sub, dirs_exist_ok=True)
    text = "".join(json.dumps(rows[n]) + "\n" for n in names if n in rows)
    write_text_atomic(out / ROWS_FILE, text)
    if (out / CONFIG_FILE).exists():  # a process's settings, but one chunk of every task:
        merged = json.loads((out / CONFIG_FILE).read_text())  # the merged evaluation reads
        merged["batch"] = max(1, len(names))  # its rows back as one (``_evaluate``)
        write_text_atomic(out / CONFIG_FILE, json.dumps(merged, indent=2))
