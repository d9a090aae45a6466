"""Stateless RL update math on tensors: advantages, credit, losses, KL, aggregation, diagnostics,
and the learning-rate schedule of a step.

Losses return per-element values; reduce them with an explicit aggregation function.
"""

from cuda_agent.rl_core._advantages import (
    GaeOutput,
    batch_normalized_advantages,
    gae_advantages,
    group_normalized_advantages,
    informative_groups,
    leave_one_out_advantages,
)
from cuda_agent.rl_core._aggregation import (
    AggregationCounts,
    AggregationMode,
    aggregate_loss,
    aggregation_counts,
    masked_seq_mean_token_mean,
    masked_seq_mean_token_sum,
    masked_seq_mean_token_sum_norm,
    masked_token_mean,
)
from cuda_agent.rl_core._credit import (
    discounted_returns,
    spread_turns_to_tokens,
    turn_index_from_loss_mask,
    turn_rewards_at_turn_ends,
)
from cuda_agent.rl_core._curriculum import signal_weights, weighted_pick
from cuda_agent.rl_core._diagnostics import (
    approx_kl,
    approx_kl_k3,
    clip_fraction,
    explained_variance,
)
from cuda_agent.rl_core._entropy import entropy_from_logits
from cuda_agent.rl_core._kl import KlEstimator, kl_k1, kl_k2, kl_k3, sequence_kl
from cuda_agent.rl_core._off_policy import (
    ImportanceRatioStats,
    RatioLevel,
    importance_log_ratio,
    importance_ratio_stats,
    importance_sampling_mask,
    truncated_importance_weights,
)
from cuda_agent.rl_core._policy_loss import gspo_policy_loss, ppo_clipped_policy_loss
from cuda_agent.rl_core._schedule import LR_SCHEDULES, LrSchedule, scheduled_lr
from cuda_agent.rl_core._value_loss import value_loss

__all__ = [
    "LR_SCHEDULES",
    "AggregationCounts",
    "AggregationMode",
    "GaeOutput",
    "ImportanceRatioStats",
    "KlEstimator",
    "LrSchedule",
    "RatioLevel",
    "aggregate_loss",
    "aggregation_counts",
    "approx_kl",
    "approx_kl_k3",
    "batch_normalized_advantages",
    "clip_fraction",
    "discounted_returns",
    "entropy_from_logits",
    "explained_variance",
    "gae_advantages",
    "group_normalized_advantages",
    "gspo_policy_loss",
    "importance_log_ratio",
    "importance_ratio_stats",
    "importance_sampling_mask",
    "informative_groups",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "leave_one_out_advantages",
    "masked_seq_mean_token_mean",
    "masked_seq_mean_token_sum",
    "masked_seq_mean_token_sum_norm",
    "masked_token_mean",
    "ppo_clipped_policy_loss",
    "scheduled_lr",
    "sequence_kl",
    "signal_weights",
    "spread_turns_to_tokens",
    "truncated_importance_weights",
    "turn_index_from_loss_mask",
    "turn_rewards_at_turn_ends",
    "value_loss",
    "weighted_pick",
]
