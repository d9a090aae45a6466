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
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

from cuda_agent.rl_core import scheduled_lr

from .. import distributed as D
from ..budget import WarmStartExample
from ..context import Run
from ..trainer.update import supervised_step

STAGE = "warmstart"


def run(ctx: Run, examples: Sequence[WarmStartExample]) -> None:
    config = ctx.config
    if not examples:
        ctx.log(f"warm start skipped: no training task has a {ctx.backend} reference solution")
        ctx.finish_stage(STAGE)
        return
    optimizer = ctx.optimizer(STAGE, config.warmstart_lr)
    for step in ctx.steps(STAGE, config.warmstart_steps):
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
        ctx.log(f"warm start {step + 1}/{config.warmstart_steps}: nll/token {record['nll']:.3f}")
    ctx.finish_stage(STAGE)
