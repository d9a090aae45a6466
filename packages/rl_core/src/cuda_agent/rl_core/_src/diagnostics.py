"""Quantities to log during an update: how far the policy moved."""

import torch

from cuda_agent.rl_core._src.aggregation import masked_token_mean


def clip_fraction(
    logprobs_bt: torch.Tensor,
    old_logprobs_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> torch.Tensor:
    """Share of kept tokens whose ratio lies outside the clip range, a scalar in [0, 1].

        mean_{kept bt} 1[rho_bt < 1 - eps_low  or  rho_bt > 1 + eps_high],
        rho_bt = exp(logprobs_bt - old_logprobs_bt)

    The PPO diagnostic (arXiv 1707.06347): a large value means the update steps too far from
    the policy that sampled the data. Counts regardless of the advantage's sign.
    """
    ratio_bt = torch.exp(logprobs_bt.detach() - old_logprobs_bt.detach())
    outside_bt = (ratio_bt < 1.0 - eps_low) | (ratio_bt > 1.0 + eps_high)
    return masked_token_mean(outside_bt.to(ratio_bt.dtype), mask_bt)


def approx_kl_k3(logprobs_bt: torch.Tensor, ref_logprobs_bt: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference), shape `[B, T]`, always >= 0.

        r_bt = ref_logprobs_bt - logprobs_bt,   k3_bt = exp(r_bt) - 1 - r_bt

    Schulman, "Approximating KL divergence" (2020): unbiased for tokens sampled from the
    policy, lower variance than -r. Used as GRPO's KL penalty (arXiv 2402.03300). Computed as
    `expm1(r) - r` to keep precision for small r. Gradients flow through `logprobs_bt` only.
    """
    log_ratio_bt = ref_logprobs_bt.detach() - logprobs_bt
    return torch.expm1(log_ratio_bt) - log_ratio_bt
