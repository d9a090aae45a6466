"""Trajectory collection and rejection fine-tuning (``rft``).

Collection (once, kept on disk in ``rft/episodes.jsonl``): ``rft_samples`` multi-turn episodes
(up to ``rft_turns`` turns) on each of ``rft_tasks`` training tasks with the current policy.
The rejection filter (``agent.rejection_filter``) keeps those whose best reward is above 0 and
drops loops, malformed answers and budget cuts; the record says how many went for which reason.
Then ``rft_steps`` supervised steps on the kept episodes' rows, the loss on the policy's own
tokens only (the loss mask), never on prompts or feedback. Under several processes the
collection's tasks and each step's rows are split over them (``distributed``); rank 0 writes
the episodes, which every process then holds.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from cuda_agent.agent import Episode, collate, episode_from_json, episode_to_json, rejection_filter

from .. import distributed as D
from ..checkpoint import write_text_atomic
from ..context import Run
from ..trainer.update import supervised_step
from .rollouts import collect_split, episode_stats, pick_tasks

STAGE = "rft"


def episodes_path(ctx: Run) -> Path:
    return ctx.run_dir / "rft" / "episodes.jsonl"


def collected(ctx: Run) -> list[Episode]:
    """The stage's episodes: read back, or collected now and written whole (atomically)."""
    path = episodes_path(ctx)
    if path.exists():
        return [episode_from_json(json.loads(line)) for line in path.read_text().splitlines()]
    with ctx.unit("collection", "the rft collection"):  # a deadline stops before it
        return _collect(ctx, path)


def _collect(ctx: Run, path: Path) -> list[Episode]:
    config = ctx.config
    tasks = pick_tasks(ctx, STAGE, 0, config.rft_tasks)
    started = time.perf_counter()
    episodes = collect_split(
        ctx, tasks, config.rft_samples, config.rft_turns, config.seed * 31 + 1
    ).episodes
    ctx.state.train_seconds += time.perf_counter() - started  # training time (the budget)
    if D.is_main():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(episode_to_json(e)) + "\n" for e in episodes)
        write_text_atomic(path, text)
    D.barrier()  # the file is there before any process looks for it (``collected``)
    ctx.log(f"rft: collected {len(episodes)} episodes in {time.perf_counter() - started:.0f} s")
    return episodes


def run(ctx: Run) -> None:
    config = ctx.config
    if ctx.out_of_time() and not episodes_path(ctx).exists():
        ctx.log("rft: training budget spent; collection and fine-tuning skipped")
        ctx.state.budget_cuts[STAGE] = config.rft_steps
        ctx.finish_stage(STAGE)
        return
    episodes = collected(ctx)
    report = rejection_filter(episodes)
    summary = {**report.as_dict(), **episode_stats(episodes)}
    if ctx.state.steps_done(STAGE) == 0:
        ctx.log(
            f"rft: kept {len(report.kept)} of {len(episodes)} episodes; dropped {report.dropped}"
        )
    if len(report.kept) < max(1, config.rft_min_kept):
        ctx.log(
            f"rft: {len(report.kept)} episode(s) kept, fewer than rft_min_kept "
            f"({config.rft_min_kept}); fine-tuning skipped"
        )
        ctx.finish_stage(STAGE, {"collection": summary, "steps": 0})
        return
    batch = collate(report.kept)
    optimizer = ctx.optimizer(STAGE, config.rft_lr)
    for step in ctx.steps(STAGE, config.rft_steps):
        started = time.perf_counter()
        rng = random.Random(f"{config.seed}/rft/{step}")
        rows = rng.sample(range(len(batch)), min(config.rft_batch, len(batch)))
        mine = D.share(rows)
        if mine:
            sub = batch.select(mine)
            masks = [[int(m) for m in row] for row in sub.loss_mask_bt.tolist()]
            prompts, responses = sub.prompt_ids, sub.response_ids
        else:  # more processes than rows: this one takes part in the step with none
            masks, prompts, responses = [], [], []
        record = supervised_step(
            ctx.policy, optimizer, prompts, responses, masks, config.micro_batch
        )
        record["seconds"] = time.perf_counter() - started
        if step == 0:
            record["collection"] = summary
        ctx.commit_step(STAGE, record, step)
        ctx.log(f"rft step {step + 1}/{config.rft_steps}: nll/token {record['nll']:.3f}")
    ctx.finish_stage(STAGE)
