"""Stateless RL update math on tensors: advantages, per-token losses, aggregation, diagnostics.

Losses return per-element values; reduce them with an explicit aggregation function.
"""

from cuda_agent.rl_core._src.advantages import group_normalized_advantages
from cuda_agent.rl_core._src.aggregation import masked_seq_mean_token_mean, masked_token_mean
from cuda_agent.rl_core._src.diagnostics import approx_kl_k3, clip_fraction
from cuda_agent.rl_core._src.policy_loss import ppo_clipped_policy_loss

__all__ = [
    "approx_kl_k3",
    "clip_fraction",
    "group_normalized_advantages",
    "masked_seq_mean_token_mean",
    "masked_token_mean",
    "ppo_clipped_policy_loss",
]
