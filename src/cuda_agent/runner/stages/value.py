"""Value pre-training (``value``): the critic fitted on the collected episodes before RL.

Targets are GAE returns from the turn rewards (gamma 1, lambda 0.95, ``loss.gae``) with the
critic's current values, recomputed every step; the loss is the value loss over the policy's
tokens (``loss.critic_loss``, unclipped). Each step reports the explained variance of the
values it started from (``rl_core.explained_variance``): 1 is a perfect critic, 0 the mean.
Uses the episodes of the ``rft`` stage (collected by it, or here when that stage is off).
"""

from __future__ import annotations

import time

from cuda_agent.agent import collate

from ..context import Run
from ..loss import counts, critic_loss, gae, value_fit
from ..update import _values, chunks, settings
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
    critic = ctx.critic()
    optimizer = ctx.optimizer(STAGE, config.value_lr, critic=True)
    s = settings(config, "gae")
    total = counts(batch)
    mask = batch.loss_mask_bt
    for step in ctx.steps(STAGE, config.value_steps):
        started = time.perf_counter()
        critic.eval()
        values = _values(critic, batch, config.micro_batch)
        returns = gae(batch, values, s).returns_bt
        explained = value_fit(values, returns, mask)
        critic.train()
        loss_sum = 0.0
        for part in chunks(range(len(batch)), config.micro_batch):
            sub = batch.select(part)
            out = critic.values(sub.prompt_ids, sub.response_ids).values.float()
            width = sub.width
            loss = critic_loss(
                out,
                returns[part, :width].to(out.device),
                None,
                sub.loss_mask_bt.to(out.device),
                total,
                s,
            )
            optimizer.backward(loss)
            loss_sum += loss.item()
        stats = optimizer.step()
        record = {
            "value_loss": loss_sum,
            "explained_variance": explained,
            "grad_norm": stats["grad_norm"],
            "rows": len(batch),
            "seconds": time.perf_counter() - started,
        }
        ctx.commit_step(STAGE, record, step)
        ctx.log(
            f"value step {step + 1}/{config.value_steps}: loss {loss_sum:.4f}, "
            f"explained variance {explained:.3f}"
        )
    ctx.finish_stage(STAGE)
