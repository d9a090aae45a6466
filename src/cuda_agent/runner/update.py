"""One optimizer update of the policy (and the critic) on a collated batch of episodes.

Two phases. First, without gradients, over the whole batch: the critic's values, GAE
advantages and value targets (``loss.gae``, whitened over the batch's tokens), or the group
advantages of each turn spread over its tokens (``loss.group_advantages``); and, when the batch
is split into several updates, the trainer's log-probs before any of them (PPO's old policy).
Then the batch's rows go through in micro-batches with gradients; the losses of the micro-batches
sum to the batch's (each uses the whole update's token and sequence counts), so the split does
not change the update. Before stepping, the update's statistics are checked against the
configured bounds (largest importance ratio between trainer and sampler, their effective sample
size, the mean entropy): out of bounds, the update is skipped (its gradients dropped) or the run
stopped (``StabilityError``), with the reason in the message.

Under torchrun / accelerate launch each process brings its own share of the batch; the
processes agree on the number of micro-batches, the denominators and the skip decision
(``collective.py``, with the formula), so the update is the one a single process would make
on the whole batch, and no process waits for ever in another's collectives.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Sequence
from typing import Any

import torch

from cuda_agent.agent import EpisodeBatch
from cuda_agent.policy import PolicyOptimizer, ValueModel
from cuda_agent.rl_core import AggregationCounts, aggregation_counts, batch_normalized_advantages

from . import collective as C
from . import loss as L
from .config import TrainConfig
from .context import StabilityError


def chunks(items: Sequence[int], size: int) -> list[list[int]]:
    items = list(items)
    return [items[i : i + size] for i in range(0, len(items), size)]


def _padded(groups: list[list[int]], device: torch.device) -> list[list[int]]:
    """``groups``, then empty ones up to the largest count of any process (``collective``)."""
    want = C.largest([len(groups)], device)[0]
    return groups + [[] for _ in range(want - len(groups))]


def _global_counts(local: AggregationCounts, device: torch.device) -> AggregationCounts:
    """The denominators over every process's share (``local`` itself with one process)."""
    if C.world_size() == 1:
        return local
    tokens, sequences = C.total([float(local.num_tokens), float(local.num_sequences)], device)
    return AggregationCounts(torch.tensor(int(tokens)), torch.tensor(int(sequences)))


def supervised_step(
    policy: Any,
    optimizer: PolicyOptimizer,
    prompts: Sequence[list[int]],
    responses: Sequence[list[int]],
    masks: Sequence[list[int]],
    micro: int,
) -> dict[str, Any]:
    """One supervised step (warm start, rejection fine-tuning): the token-mean NLL of the
    responses' tokens that ``masks`` keep, over the whole step, in micro-batches."""
    width = max((len(r) for r in responses), default=0)
    mask_all = torch.zeros(len(responses), width, dtype=torch.bool)
    for i, m in enumerate(masks):
        mask_all[i, : len(m)] = torch.tensor(m, dtype=torch.bool)
    total = aggregation_counts(mask_all)
    loss_sum = 0.0
    policy.train()
    for part in chunks(range(len(responses)), micro):
        out = policy.token_logprobs([prompts[i] for i in part], [responses[i] for i in part])
        mask = mask_all[part, : out.logprobs.shape[1]].to(out.logprobs.device)
        loss = L.sft_loss(out.logprobs, mask, total)
        optimizer.backward(loss)
        loss_sum += loss.item()
    stats = optimizer.step()
    return {"nll": loss_sum, "tokens": int(total.num_tokens), "grad_norm": stats["grad_norm"]}


def settings(config: TrainConfig, advantage: str | None = None) -> L.LossSettings:
    return L.LossSettings(
        advantage=advantage or config.advantage,
        turn_discount=config.turn_discount,
        gamma=1.0,
        lam=config.gae_lambda,
        eps_low=config.eps_low,
        eps_high=config.eps_high,
        aggregation=config.aggregation,
        max_tokens=config.max_new_tokens,
        tis_max_weight=config.tis_max_weight,
        kl_coef=config.kl_coef,
        value_clip=config.value_clip,
    )


def _values(critic: ValueModel, batch: EpisodeBatch, micro: int) -> torch.Tensor:
    """The critic's values of every row, ``[B, T]`` at the batch's width, without gradients."""
    out = torch.zeros(len(batch), batch.width)
    with torch.no_grad():
        for part in chunks(range(len(batch)), micro):
            sub = batch.select(part)
            values = critic.values(sub.prompt_ids, sub.response_ids).values.float().cpu()
            out[part, : values.shape[1]] = values
    return out


def _logprobs(policy: Any, batch: EpisodeBatch, micro: int, base: bool = False) -> torch.Tensor:
    """Every row's log-probs without gradients: the policy's, or with ``base`` the base
    model's (the KL reference: the LoRA adapters switched off)."""
    out = torch.zeros(len(batch), batch.width)
    adapters_off = policy.adapters_disabled() if base else contextlib.nullcontext()
    with torch.no_grad(), adapters_off:
        for part in _padded(chunks(range(len(batch)), micro), policy.device):
            if not part:  # another process has more: take part in its collectives
                policy.token_logprobs([], [])
                continue
            sub = batch.select(part)
            logprobs = policy.token_logprobs(sub.prompt_ids, sub.response_ids).logprobs
            out[part, : logprobs.shape[1]] = logprobs.float().cpu()
    return out


def update(
    policy: Any,
    optimizer: PolicyOptimizer,
    batch: EpisodeBatch,
    config: TrainConfig,
    advantage: str,
    critic: ValueModel | None = None,
    critic_optimizer: PolicyOptimizer | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """Train on ``batch``; returns the statistics of the update (see the module docstring)."""
    s = settings(config, advantage)
    mask_all = batch.loss_mask_bt
    record: dict[str, Any] = {}
    old_values = returns = None
    if advantage == "gae":
        if critic is None or critic_optimizer is None:
            raise ValueError("advantage 'gae' needs the critic")
        critic.eval()
        old_values = _values(critic, batch, config.micro_batch)
        gae = L.gae(batch, old_values, s)
        returns = gae.returns_bt
        adv_bt = batch_normalized_advantages(gae.advantages_bt, mask_all)
        record["explained_variance"] = L.value_fit(old_values, returns, mask_all)
    else:
        adv_bt = batch.per_row(L.group_advantages(batch, s))
    policy.eval()
    old_all = _logprobs(policy, batch, config.micro_batch) if config.updates_per_batch > 1 else None
    ref_all = _logprobs(policy, batch, config.micro_batch, base=True) if config.kl_coef else None

    sums = {"tokens": 0.0, "clip_fraction": 0.0, "kl": 0.0, "entropy": 0.0, "value_loss": 0.0}
    ratios: list[dict[str, float]] = []
    grad_norms: list[float] = []
    skipped: list[str] = []
    rows = list(range(len(batch)))
    world, here = C.world_size(), policy.device
    per_update = max(1, -(-len(rows) // config.updates_per_batch))
    for minibatch in _padded(chunks(rows, per_update), here):
        mine = L.counts(batch.select(minibatch)) if minibatch else _no_counts()
        total = _global_counts(mine, here)
        policy.train()
        checked: list[dict[str, float]] = []
        for part in _padded(chunks(minibatch, config.micro_batch), here):
            if not part:  # another process has more micro-batches: take part, add nothing
                idle = policy.token_logprobs([], [], with_entropy=True).logprobs
                if idle.requires_grad:  # sharded: the backward's collectives need us
                    optimizer.backward(idle.sum() * 0.0)
                continue
            sub = batch.select(part)
            width = sub.width
            mask = sub.loss_mask_bt
            out = policy.token_logprobs(sub.prompt_ids, sub.response_ids, with_entropy=True)
            device = out.logprobs.device
            logprobs = out.logprobs.float()
            old = old_all[part, :width] if old_all is not None else logprobs.detach().cpu()
            sampler = sub.sampler_logprobs_bt
            loss, stats = L.policy_loss(
                logprobs,
                old.to(device),
                sampler.to(device),
                adv_bt[part, :width].to(device),
                mask.to(device),
                total,
                s,
                ref_all[part, :width].to(device) if ref_all is not None else None,
            )
            optimizer.backward(loss * world)  # collective.py: the gradients are averaged
            for key in ("tokens", "clip_fraction", "kl"):
                sums[key] += stats[key]
            if out.entropy is not None:
                sums["entropy"] += float((out.entropy.detach().float().cpu() * mask).sum())
            checked.append(L.ratio_stats(old, sampler, mask, s.tis_max_weight))
            if critic is not None and critic_optimizer is not None and returns is not None:
                assert old_values is not None
                critic.train()
                values = critic.values(sub.prompt_ids, sub.response_ids).values.float()
                vloss = L.critic_loss(
                    values,
                    returns[part, :width].to(values.device),
                    old_values[part, :width].to(values.device),
                    mask.to(values.device),
                    total,
                    s,
                )
                critic_optimizer.backward(vloss * world)
                sums["value_loss"] += vloss.item()
        ratios += checked
        reason = _out_of_bounds(checked, sums, config)
        if world > 1 and C.anyone(bool(reason), here) and not reason:
            reason = "another process's share of the update was out of bounds"
        if reason:
            optimizer.zero_grad()
            if critic_optimizer is not None:
                critic_optimizer.zero_grad()
            if config.guard_action == "stop":
                raise StabilityError(f"update stopped: {reason} (guard_action = 'stop')")
            log(f"update skipped: {reason}")
            skipped.append(reason)
            continue
        if total.num_tokens > 0:
            grad_norms.append(optimizer.step()["grad_norm"])
            if critic_optimizer is not None and returns is not None:
                critic_optimizer.step()
    n = max(sums["tokens"], 1.0)
    record.update(
        trained_tokens=int(sums["tokens"]),
        clip_fraction=sums["clip_fraction"] / n,
        kl=sums["kl"] / n,
        entropy=sums["entropy"] / n,
        grad_norm=max(grad_norms) if grad_norms else 0.0,
        updates=len(grad_norms),
        skipped_updates=len(skipped),
        skip_reasons=skipped,
    )
    if critic is not None and returns is not None:
        record["value_loss"] = sums["value_loss"]
    if ratios:
        record["ratio_max"] = max(r["ratio_max"] for r in ratios)
        record["ratio_mean"] = statistics.fmean(r["ratio_mean"] for r in ratios)
        record["ratio_ess"] = min(r["ratio_effective_sample_size"] for r in ratios)
        record["ratio_mismatch_kl"] = statistics.fmean(r["ratio_mismatch_kl"] for r in ratios)
        record["ratio_fraction_above"] = statistics.fmean(r["ratio_fraction_above"] for r in ratios)
    return record


def _no_counts() -> AggregationCounts:
    return AggregationCounts(torch.tensor(0), torch.tensor(0))


def _out_of_bounds(
    ratios: list[dict[str, float]], sums: dict[str, float], config: TrainConfig
) -> str:
    """Why the update must not be applied ("" when it may)."""
    if not ratios:
        return ""
    largest = max(r["ratio_max"] for r in ratios)
    if largest > config.guard_max_ratio:
        return f"an importance ratio of {largest:.3g} (bound guard_max_ratio = {config.guard_max_ratio})"
    ess = min(r["ratio_effective_sample_size"] for r in ratios)
    if ess < config.guard_min_ess:
        return f"importance-ratio effective sample size {ess:.3f} (bound guard_min_ess = {config.guard_min_ess})"
    entropy = sums["entropy"] / max(sums["tokens"], 1.0)
    if config.guard_min_entropy and entropy < config.guard_min_entropy:
        return f"mean entropy {entropy:.4f} (bound guard_min_entropy = {config.guard_min_entropy})"
    return ""
