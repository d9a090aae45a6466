"""Value pre-training (``value``): the critic fitted on the collected episodes before RL.

Targets are GAE returns from the turn rewards (gamma 1, lambda 0.95: ``TrainConfig.critic``,
``loss.gae``) with the critic's current values, recomputed every step; the loss is the value
loss over the policy's tokens (``update.critic_step``, ``loss.critic_loss``, unclipped), in the
trainer's one micro-batch loop (``collective.micro_batches``). Each step reports the explained variance of the
values it started from (``rl_core.explained_variance``): 1 is a perfect critic, 0 the mean.
Uses the episodes of the ``rft`` stage (collected by it, or here when that stage is off).
Under several processes each fits its part of the rows (all of them when there are fewer
rows than processes: the agreed denominators make that the same step), and the explained
variance is over every process's tokens (``distributed.value_fit``).
"""

from __future__ import annotations

import time

from cuda_agent.agent import collate

from .. import distributed as D
from ..context import Run
from ..trainer.loss import gae
from ..trainer.update import critic_step, critic_values
from .rft import collected, episodes_path

STAGE = "value"


def run(ctx: Run) -> None:
    config = ctx.config
    if ctx.out_of_time() and not episodes_path(ctx).exists():
        ctx.log("value pre-training: training budget spent; skipped")
        ctx.state.budget_cuts[STAGE] = config.value_steps
        ctx.finish_stage(STAGE)
        return
    episodes = collected(ctx)
    batch = collate(episodes)
    if not len(batch):
        ctx.log("value pre-training skipped: the episodes hold no generated token")
        ctx.finish_stage(STAGE)
        return
    rows = len(batch)
    if D.world_size() > 1 and rows >= D.world_size():
        batch = batch.select(D.share(range(len(batch))))
    critic = ctx.critic()
    settings = config.critic
    optimizer = ctx.optimizer(STAGE, settings.critic_lr, critic=True)
    mask = batch.loss_mask_bt
    for step in ctx.steps(STAGE, config.value_steps):
        started = time.perf_counter()
        critic.eval()
        values = critic_values(critic, batch, config.micro_batch)
        returns = gae(batch, values, settings).returns_bt
        explained = D.value_fit(values, returns, mask)
        stats = critic_step(critic, optimizer, batch, returns, settings, config.micro_batch)
        record = {
            "value_loss": stats["value_loss"],
            "explained_variance": explained,
            "grad_norm": stats["grad_norm"],
            "rows": rows,
            "seconds": time.perf_counter() - started,
        }
        ctx.commit_step(STAGE, record, step)
        ctx.log(
            f"value step {step + 1}/{config.value_steps}: loss {stats['value_loss']:.4f}, "
            f"explained variance {explained:.3f}"
        )
    ctx.finish_stage(STAGE)
