"""One optimizer update of the policy (and the critic) on a collated batch of episodes.

Two phases. First, without gradients, over the whole batch: the critic's values, GAE
advantages and value targets (``loss.gae``, whitened over the batch's tokens), or the group
advantages of each turn spread over its tokens (``loss.group_advantages``); and, when the batch
is split into several updates, the trainer's log-probs before any of them (PPO's old policy).
Then the batch's rows go through in micro-batches with gradients; the losses of the micro-batches
sum to the batch's (each uses the whole update's token and sequence counts), so the split does
not change the update. Before stepping, the update's statistics are checked against the
configured bounds (``UpdateConfig.guard``: largest importance ratio between trainer and
sampler, their effective sample size, the mean entropy): out of bounds, the update is skipped (its gradients dropped) or the run
stopped (``StabilityError``), with the reason in the message.

``update`` reads one typed value, ``UpdateConfig`` (``update_config.py``): the advantage (the
group kinds, or GAE with the critic's settings), the policy loss, the guard, the micro-batch
size, the updates per batch and the passes over it (``epochs``: the same mini-batches again,
each pass's ratios taken against the log-probs before the first, PPO's old policy, so that
``epochs * updates_per_batch`` optimizer steps share one clip region).

Under torchrun / accelerate launch each process brings its own share of the batch; the
processes agree on the number of micro-batches, the denominators and the skip decision
(``collective.py``, with the formula), so the update is the one a single process would make
on the whole batch, and no process waits for ever in another's collectives. Every micro-batch
loop here (the update's, ``supervised_step``'s, the critic's values and steps, the log-probs)
is ``collective.micro_batches``, so each of them is safe across processes.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import torch

from cuda_agent.agent import EpisodeBatch
from cuda_agent.policy import PolicyOptimizer, ValueModel
from cuda_agent.rl_core import AggregationCounts, aggregation_counts

from .. import distributed as D
from ..context import StabilityError
from . import collective as C
from . import loss as L
from .update_config import GaeAdvantage, GuardConfig, UpdateConfig


def _idle(forward: Callable[[], torch.Tensor], optimizer: Any = None) -> Callable[[], None]:
    """What a process runs for a micro-batch that only another process has (``collective``):
    ``forward`` on nothing and, with an ``optimizer``, the zero backward of its result when
    that has gradients (a sharded model: the backward's collectives need every process)."""

    def idle() -> None:
        out = forward()
        if optimizer is not None and out.requires_grad:
            optimizer.backward(out.sum() * 0.0)

    return idle


def supervised_step(
    policy: Any,
    optimizer: PolicyOptimizer,
    prompts: Sequence[list[int]],
    responses: Sequence[list[int]],
    masks: Sequence[list[int]],
    micro: int,
) -> dict[str, Any]:
    """One supervised step (warm start, rejection fine-tuning): the token-mean NLL of the
    responses' tokens that ``masks`` keep, ``-sum_{kept t} log p(y_t) / N`` with ``N`` the kept
    tokens of every process's share (``collective``), in micro-batches."""
    width = max((len(r) for r in responses), default=0)
    mask_all = torch.zeros(len(responses), width, dtype=torch.bool)
    for i, m in enumerate(masks):
        mask_all[i, : len(m)] = torch.tensor(m, dtype=torch.bool)
    here, world = policy.device, C.world_size()
    total = C.global_counts(aggregation_counts(mask_all), here)
    loss_sum = 0.0
    policy.train()
    for part in C.micro_batches(
        range(len(responses)),
        micro,
        here,
        _idle(lambda: policy.token_logprobs([], []).logprobs, optimizer),
    ):
        out = policy.token_logprobs([prompts[i] for i in part], [responses[i] for i in part])
        mask = mask_all[part, : out.logprobs.shape[1]].to(out.logprobs.device)
        loss = L.sft_loss(out.logprobs, mask, total)
        optimizer.backward(loss * world)  # collective.py: the gradients are averaged
        loss_sum += loss.item()
    stats = optimizer.step()
    nll = C.total([loss_sum], here)[0]
    return {
        "nll": nll,
        "tokens": int(total.num_tokens),
        "grad_norm": stats["grad_norm"],
        "lr": stats["lr"],  # the optimizer's, as it stepped
    }


def critic_values(critic: ValueModel, batch: EpisodeBatch, micro: int) -> torch.Tensor:
    """The critic's values of every row, ``[B, T]`` at the batch's width, without gradients."""
    out = torch.zeros(len(batch), batch.width)
    with torch.no_grad():
        for part in C.micro_batches(
            range(len(batch)), micro, critic.device, _idle(lambda: critic.values([], []).values)
        ):
            sub = batch.select(part)
            values = critic.values(sub.prompt_ids, sub.response_ids).values.float().cpu()
            out[part, : values.shape[1]] = values
    return out


def critic_step(
    critic: ValueModel,
    optimizer: PolicyOptimizer,
    batch: EpisodeBatch,
    returns_bt: torch.Tensor,
    settings: GaeAdvantage,
    micro: int,
) -> dict[str, float]:
    """One step of the critic towards ``returns_bt`` (value pre-training): the unclipped value
    loss ``sum_t (V_t - R_t)^2 / 2N`` over every process's kept tokens, in micro-batches."""
    here, world = critic.device, C.world_size()
    total = C.global_counts(L.counts(batch), here)
    critic.train()
    loss_sum = 0.0
    for part in C.micro_batches(
        range(len(batch)), micro, here, _idle(lambda: critic.values([], []).values, optimizer)
    ):
        sub = batch.select(part)
        out = critic.values(sub.prompt_ids, sub.response_ids).values.float()
        width = sub.width
        mask = sub.loss_mask_bt.to(out.device)
        loss = L.critic_loss(
            out, returns_bt[part, :width].to(out.device), None, mask, total, settings
        )
        optimizer.backward(loss * world)  # collective.py: the gradients are averaged
        loss_sum += loss.item()
    stats = optimizer.step()
    return {"value_loss": C.total([loss_sum], here)[0], "grad_norm": stats["grad_norm"]}


def _logprobs(
    policy: Any, batch: EpisodeBatch, micro: int, temperature: float, base: bool = False
) -> torch.Tensor:
    """Every row's log-probs at ``temperature`` without gradients: the policy's, or with
    ``base`` the base model's (the KL reference: the LoRA adapters switched off)."""
    out = torch.zeros(len(batch), batch.width)
    adapters_off = policy.adapters_disabled() if base else contextlib.nullcontext()
    with torch.no_grad(), adapters_off:
        for part in C.micro_batches(
            range(len(batch)),
            micro,
            policy.device,
            _idle(lambda: policy.token_logprobs([], []).logprobs),
        ):
            sub = batch.select(part)
            logprobs = policy.token_logprobs(
                sub.prompt_ids, sub.response_ids, temperature=temperature
            ).logprobs
            out[part, : logprobs.shape[1]] = logprobs.float().cpu()
    return out


def _scored(
    policy: Any, prompts: list[list[int]], responses: list[list[int]], temperature: float
) -> Any:
    """The update's forward at ``temperature``: log-probs with gradient, and the entropy as a
    plain value (a statistic: its [chunk, vocab] tensors are then not kept for, nor rebuilt
    in, the backward)."""
    return policy.token_logprobs(
        prompts, responses, with_entropy=True, entropy_grad=False, temperature=temperature
    )


def update(
    policy: Any,
    optimizer: PolicyOptimizer,
    batch: EpisodeBatch,
    config: UpdateConfig,
    critic: ValueModel | None = None,
    critic_optimizer: PolicyOptimizer | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """Train on ``batch`` as ``config`` says; returns the statistics of the update (see the
    module docstring). An advantage that needs the critic needs ``critic`` and its optimizer."""
    advantage = config.advantage
    mask_all = batch.loss_mask_bt
    record: dict[str, Any] = {}
    old_values = returns = None
    gae_settings: GaeAdvantage | None = None
    if isinstance(advantage, GaeAdvantage):
        if critic is None or critic_optimizer is None:
            raise ValueError(f"advantage {advantage.kind!r} needs the critic")
        gae_settings = advantage
        critic.eval()
        old_values = critic_values(critic, batch, config.micro_batch)
        gae = L.gae(batch, old_values, advantage)
        returns = gae.returns_bt
        # whitened, and fitted, over every process's tokens (distributed.py; one: as before)
        adv_bt = D.whitened(gae.advantages_bt, mask_all)
        record["explained_variance"] = D.value_fit(old_values, returns, mask_all)
    else:
        adv_bt = batch.per_row(L.group_advantages(batch, advantage))
    policy.eval()
    micro, loss_settings = config.micro_batch, config.loss
    temperature = config.scoring_temperature
    several = config.updates_per_batch > 1 or config.epochs > 1
    old_all = _logprobs(policy, batch, micro, temperature) if several else None
    ref_all = (
        _logprobs(policy, batch, micro, temperature, base=True) if loss_settings.kl_coef else None
    )

    sums = {"tokens": 0.0, "clip_fraction": 0.0, "kl": 0.0, "entropy": 0.0, "value_loss": 0.0}
    ratios: list[dict[str, float]] = []
    grad_norms: list[float] = []
    skipped: list[str] = []
    rows = list(range(len(batch)))
    world, here = C.world_size(), policy.device
    per_update = max(1, -(-len(rows) // config.updates_per_batch))
    idle = _idle(lambda: _scored(policy, [], [], temperature).logprobs, optimizer)
    # each pass the same mini-batches, padded alike on every process (one pass's count agreed)
    for minibatch in C.padded(C.chunks(rows, per_update), here) * config.epochs:
        mine = L.counts(batch.select(minibatch)) if minibatch else _no_counts()
        total = C.global_counts(mine, here)
        policy.train()
        checked: list[dict[str, float]] = []
        for part in C.micro_batches(minibatch, micro, here, idle):
            sub = batch.select(part)
            width = sub.width
            mask = sub.loss_mask_bt
            out = _scored(policy, sub.prompt_ids, sub.response_ids, temperature)
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
                loss_settings,
                ref_all[part, :width].to(device) if ref_all is not None else None,
            )
            optimizer.backward(loss * world)  # collective.py: the gradients are averaged
            for key in ("tokens", "clip_fraction", "kl"):
                sums[key] += stats[key]
            if out.entropy is not None:
                sums["entropy"] += float((out.entropy.detach().float().cpu() * mask).sum())
            checked.append(L.ratio_stats(old, sampler, mask, loss_settings.tis_max_weight))
            if critic is not None and critic_optimizer is not None and gae_settings is not None:
                assert old_values is not None and returns is not None
                critic.train()
                values = critic.values(sub.prompt_ids, sub.response_ids).values.float()
                vloss = L.critic_loss(
                    values,
                    returns[part, :width].to(values.device),
                    old_values[part, :width].to(values.device),
                    mask.to(values.device),
                    total,
                    gae_settings,
                )
                critic_optimizer.backward(vloss * world)
                sums["value_loss"] += vloss.item()
        ratios += checked
        reason = _out_of_bounds(checked, sums, config.guard)
        if world > 1 and C.anyone(bool(reason), here) and not reason:
            reason = "another process's share of the update was out of bounds"
        if reason:
            optimizer.zero_grad()
            if critic_optimizer is not None:
                critic_optimizer.zero_grad()
            if config.guard.action == "stop":
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
    ratios: list[dict[str, float]], sums: dict[str, float], guard: GuardConfig
) -> str:
    """Why the update must not be applied ("" when it may)."""
    if not ratios:
        return ""
    largest = max(r["ratio_max"] for r in ratios)
    if largest > guard.max_ratio:
        return f"an importance ratio of {largest:.3g} (bound guard_max_ratio = {guard.max_ratio})"
    ess = min(r["ratio_effective_sample_size"] for r in ratios)
    if ess < guard.min_ess:
        return f"importance-ratio effective sample size {ess:.3f} (bound guard_min_ess = {guard.min_ess})"
    entropy = sums["entropy"] / max(sums["tokens"], 1.0)
    if guard.min_entropy and entropy < guard.min_entropy:
        return f"mean entropy {entropy:.4f} (bound guard_min_entropy = {guard.min_entropy})"
    return ""
