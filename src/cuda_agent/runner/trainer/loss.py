"""The losses of a training step, composed from ``rl_core`` on the agent's typed batch.

Nothing here is new math: each line names the ``rl_core`` function that holds the formula.

Advantages (``advantages``), per episode and turn ``[E, K]`` or per token ``[B, T]``:

- ``grpo`` / ``dr_grpo`` / ``rloo``: turn returns ``G_k = sum_{j>=k} gamma_turn^(j-k) r_j``
  (``discounted_returns`` over turns, Kevin's gamma 0.4), normalised against every turn of the
  episode's group (``group_normalized_advantages`` / ``leave_one_out_advantages`` with a mask),
  then spread over each turn's tokens;
- ``gae``: the turn rewards on each turn's last token (``turn_rewards_at_turn_ends``) and GAE
  over the policy's tokens with the critic's values (``gae_advantages``, gamma 1, lambda 0.95).

Each function takes the part of the typed update configuration it uses (``update_config.py``:
``GroupAdvantage``, ``GaeAdvantage``, ``LossConfig``).

Policy loss per token, aggregated by the configured mode over the whole batch's counts
(``aggregate_loss``; micro-batches then sum to the whole batch)::

    w_bt    = min(exp(old_bt - sampler_bt), C)            truncated_importance_weights
    loss_bt = w_bt * ppo_clipped_policy_loss(logp, old, A; 0.2, 0.28) [+ beta * kl_k3(logp, ref)]
"""

from __future__ import annotations

from typing import Any

import torch

from cuda_agent.agent import EpisodeBatch
from cuda_agent.rl_core import (
    AggregationCounts,
    aggregate_loss,
    aggregation_counts,
    clip_fraction,
    discounted_returns,
    explained_variance,
    gae_advantages,
    group_normalized_advantages,
    importance_ratio_stats,
    kl_k3,
    leave_one_out_advantages,
    masked_token_mean,
    ppo_clipped_policy_loss,
    truncated_importance_weights,
    turn_rewards_at_turn_ends,
    value_loss,
)

from .update_config import GaeAdvantage, GroupAdvantage, LossConfig


def counts(batch: EpisodeBatch) -> AggregationCounts:
    """The whole batch's denominators (pass them to every micro-batch's loss)."""
    return aggregation_counts(batch.loss_mask_bt)


def group_advantages(batch: EpisodeBatch, advantage: GroupAdvantage) -> torch.Tensor:
    """``[E, K]`` advantages of every episode's turns against its group's turns."""
    returns_ek = discounted_returns(
        batch.turn_rewards_ek, gamma=advantage.turn_discount, mask_bt=batch.turn_mask_ek
    )
    groups = sorted(set(batch.groups))
    members = [[e for e, g in enumerate(batch.groups) if g == group] for group in groups]
    k = returns_ek.shape[1]
    width = max(len(m) for m in members) * k
    padded_gn = torch.zeros(len(groups), width)
    mask_gn = torch.zeros(len(groups), width, dtype=torch.bool)
    for i, episodes in enumerate(members):
        padded_gn[i, : len(episodes) * k] = returns_ek[episodes].flatten()
        mask_gn[i, : len(episodes) * k] = batch.turn_mask_ek[episodes].flatten()
    if advantage.kind == "rloo":
        adv_gn = leave_one_out_advantages(padded_gn, mask_gn=mask_gn)
    else:
        scale = advantage.kind == "grpo"
        adv_gn = group_normalized_advantages(padded_gn, scale=scale, mask_gn=mask_gn)
    adv_ek = torch.zeros_like(returns_ek)
    for i, episodes in enumerate(members):
        adv_ek[episodes] = adv_gn[i, : len(episodes) * k].view(len(episodes), k)
    return adv_ek


def token_rewards(batch: EpisodeBatch) -> torch.Tensor:
    """``[B, T]``: each turn's reward on its last generated token (full-history rows)."""
    rows_ek = batch.turn_rewards_ek[batch.episode_of_row]
    return turn_rewards_at_turn_ends(rows_ek, batch.turn_bt.clamp(min=0), batch.loss_mask_bt)


def gae(batch: EpisodeBatch, values_bt: torch.Tensor, critic: GaeAdvantage) -> Any:
    """GAE advantages and value targets over each row's generated tokens."""
    mask_bt = batch.loss_mask_bt.to(values_bt.device)
    rewards_bt = token_rewards(batch).to(values_bt.device)
    return gae_advantages(
        rewards_bt, values_bt.detach(), gamma=critic.gamma, lam=critic.lam, mask_bt=mask_bt
    )


def _aggregate(
    loss_bt: torch.Tensor, mask_bt: torch.Tensor, total: AggregationCounts, settings: LossConfig
) -> torch.Tensor:
    return aggregate_loss(
        loss_bt,
        mask_bt,
        settings.aggregation,
        num_tokens=total.num_tokens,
        num_sequences=total.num_sequences,
        max_tokens=settings.max_tokens or None,
    )


def policy_loss(
    logprobs_bt: torch.Tensor,
    old_bt: torch.Tensor,
    sampler_bt: torch.Tensor,
    advantages_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    total: AggregationCounts,
    settings: LossConfig,
    ref_bt: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The micro-batch's share of the policy loss, and sums for its statistics."""
    weights_bt = truncated_importance_weights(
        old_bt, sampler_bt, mask_bt, max_weight=settings.tis_max_weight
    )
    loss_bt = weights_bt * ppo_clipped_policy_loss(
        logprobs_bt, old_bt, advantages_bt, eps_low=settings.eps_low, eps_high=settings.eps_high
    )
    kl = None
    if settings.kl_coef and ref_bt is None:
        raise ValueError("kl_coef > 0 needs the reference log-probs (ref_bt)")
    if settings.kl_coef and ref_bt is not None:
        kl = kl_k3(logprobs_bt, ref_bt)
        loss_bt = loss_bt + settings.kl_coef * kl
    loss = _aggregate(loss_bt, mask_bt, total, settings)
    with torch.no_grad():
        n = float(mask_bt.sum())
        stats = {
            "tokens": n,
            "clip_fraction": float(
                clip_fraction(logprobs_bt, old_bt, mask_bt, settings.eps_low, settings.eps_high)
            )
            * n,
            "kl": float(masked_token_mean(kl, mask_bt)) * n if kl is not None else 0.0,
        }
    return loss, stats


def sft_loss(
    logprobs_bt: torch.Tensor, mask_bt: torch.Tensor, total: AggregationCounts
) -> torch.Tensor:
    """Negative log-likelihood of the generated tokens, a token mean over the whole batch."""
    return masked_token_mean(-logprobs_bt, mask_bt, num_tokens=total.num_tokens)


def critic_loss(
    values_bt: torch.Tensor,
    returns_bt: torch.Tensor,
    old_values_bt: torch.Tensor | None,
    mask_bt: torch.Tensor,
    total: AggregationCounts,
    critic: GaeAdvantage,
) -> torch.Tensor:
    """Clipped value loss (when old values are given), a token mean over the whole batch."""
    clip = critic.value_clip if old_values_bt is not None else None
    loss_bt = value_loss(values_bt, returns_bt, old_values_bt=old_values_bt, clip_eps=clip)
    return masked_token_mean(loss_bt, mask_bt, num_tokens=total.num_tokens)


def ratio_stats(
    old_bt: torch.Tensor, sampler_bt: torch.Tensor, mask_bt: torch.Tensor, high: float
) -> dict[str, float]:
    """The trainer / sampler mismatch of a micro-batch, as plain numbers."""
    stats = importance_ratio_stats(old_bt, sampler_bt, mask_bt, high=high)
    return {f"ratio_{k}": float(v) for k, v in stats._asdict().items()}


def value_fit(values_bt: torch.Tensor, returns_bt: torch.Tensor, mask_bt: torch.Tensor) -> float:
    return float(explained_variance(values_bt.detach(), returns_bt, mask_bt))
