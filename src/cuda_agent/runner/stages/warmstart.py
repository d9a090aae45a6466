"""Warm start: supervised fine-tuning on the training tasks' reference solutions.

The prompt is a task's first prompt as rollouts render it (``cuda_agent.agent.first_prompt_ids``)
and the answer is in exactly the format rollouts parse: one fenced Python block with ModelNew
(``cuda_agent.agent.answer_text``); the run's answer budget holds the longest (``budget.py``,
which builds the examples). The loss is
the token-mean negative log-likelihood of the answers (``loss.sft_loss``). Under several
processes each step's examples (drawn from the seed, the same on every process) are split
over them, and the step's NLL is the whole batch's (``update.supervised_step``). The learning
rate of each step is ``warmstart_schedule``'s (``cuda_agent.rl_core.scheduled_lr``) over
``warmstart_steps``; a training budget that ends the stage sooner does not compress it.
With ``warmstart_until_nll`` the stage also ends once the median NLL per token of its last
``NLL_WINDOW`` steps is at or below it (the steps after it are not run; the schedule is not
compressed either): a resumed run reads the window back from its committed records.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from cuda_agent.rl_core import scheduled_lr

from .. import distributed as D
from ..budget import WarmStartExample
from ..context import Run
from ..trainer.update import supervised_step

STAGE = "warmstart"
NLL_WINDOW = 20  # steps whose median NLL the stop rule reads


def run(ctx: Run, examples: Sequence[WarmStartExample]) -> None:
    config = ctx.config
    if not examples:
        ctx.log(f"warm start skipped: no training task has a {ctx.backend} reference solution")
        ctx.finish_stage(STAGE)
        return
    optimizer = ctx.optimizer(STAGE, config.warmstart_lr)
    recent = committed_nlls(ctx.run_dir)[-NLL_WINDOW:]  # (a resumed run's last steps)
    for step in ctx.steps(STAGE, config.warmstart_steps):
        if reached(recent, config.warmstart_until_nll):
            ctx.log(
                f"warm start: median NLL per token of the last {NLL_WINDOW} steps "
                f"{statistics.median(recent):.4f} <= {config.warmstart_until_nll:g}; steps "
                f"{step + 1} to {config.warmstart_steps} not run"
            )
            break
        started = time.perf_counter()
        rng = random.Random(config.seed * 7_919 + step)
        batch = rng.sample(list(examples), min(config.warmstart_batch, len(examples)))
        mine = D.share(batch)
        optimizer.set_lr(
            scheduled_lr(
                config.warmstart_schedule,
                config.warmstart_lr,
                step,
                config.warmstart_steps,
                config.warmstart_lr_floor,
            )
        )
        responses = [e.response_ids for e in mine]
        record = supervised_step(
            ctx.policy,
            optimizer,
            [e.prompt_ids for e in mine],
            responses,
            [[1] * len(r) for r in responses],
            config.micro_batch,
        )
        record.update(tasks=[e.task for e in batch], seconds=time.perf_counter() - started)
        ctx.commit_step(STAGE, record, step)
        recent = [*recent, record["nll"]][-NLL_WINDOW:]
        ctx.log(f"warm start {step + 1}/{config.warmstart_steps}: nll/token {record['nll']:.3f}")
    ctx.finish_stage(STAGE)


def reached(recent: Sequence[float], until: float) -> bool:
    """Whether the stop rule holds: a full window whose median NLL is at or below ``until``
    (never with ``until`` 0)."""
    return until > 0 and len(recent) >= NLL_WINDOW and statistics.median(recent) <= until


def committed_nlls(run_dir: Path) -> list[float]:
    """The NLL per token of every warm-start step the run's metrics record, in order."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    with path.open() as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    return [r["nll"] for r in records if r.get("stage") == STAGE and "nll" in r]
