"""Quantities to log during an update: how far the policy moved, how good the critic is.

Every diagnostic is detached and returns a 0-dim tensor (or `[B, T]` for per-token forms).
"""

import torch

from cuda_agent.rl_core._aggregation import Count, check_mask, masked_token_mean
from cuda_agent.rl_core._kl import kl_k3
from cuda_agent.rl_core._log_ratio import clamped_log_ratio


def clip_fraction(
    logprobs_bt: torch.Tensor,
    old_logprobs_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    *,
    num_tokens: Count | None = None,
) -> torch.Tensor:
    """Share of kept tokens whose ratio lies outside the clip range, a scalar in [0, 1].

        mean_{kept bt} 1[rho_bt < 1 - eps_low  or  rho_bt > 1 + eps_high],
        rho_bt = exp(clamp(logprobs_bt - old_logprobs_bt, -20, 20))

    The PPO diagnostic (arXiv 1707.06347): a large value means the update steps too far from
    the policy that sampled the data. The log-ratio's clamp is the policy loss's
    (`_log_ratio.py`); it moves no ratio across the clip range. Counts regardless of the
    advantage's sign. `num_tokens` as in `masked_token_mean` (sum over micro-batches).
    """
    ratio_bt = torch.exp(clamped_log_ratio(logprobs_bt.detach(), old_logprobs_bt))
    outside_bt = (ratio_bt < 1.0 - eps_low) | (ratio_bt > 1.0 + eps_high)
    return masked_token_mean(outside_bt.to(ratio_bt.dtype), mask_bt, num_tokens=num_tokens)


def approx_kl_k3(logprobs_bt: torch.Tensor, ref_logprobs_bt: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference), shape `[B, T]`, always >= 0.

        r_bt = ref_logprobs_bt - logprobs_bt,   k3_bt = exp(r_bt) - 1 - r_bt

    Schulman, "Approximating KL divergence" (2020): unbiased for tokens sampled from the
    policy, lower variance than -r. Used as GRPO's KL penalty (arXiv 2402.03300). Computed as
    `expm1(r) - r` to keep precision for small r. Gradients flow through `logprobs_bt` only.
    The same as `kl_k3` without `clamp`: its log-ratio is still clamped to +-20.
    """
    return kl_k3(logprobs_bt, ref_logprobs_bt)


def approx_kl(
    logprobs_bt: torch.Tensor,
    old_logprobs_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    *,
    num_tokens: Count | None = None,
) -> torch.Tensor:
    """How far the policy moved from the one that sampled the tokens, a scalar >= 0.

        mean_{kept bt} [rho_bt - 1 - log rho_bt],   rho_bt = exp(logprobs_bt - old_logprobs_bt)

    The k3 estimate (Schulman 2020) of KL(old || policy) per token, unbiased because the
    tokens were sampled from the old policy; PPO implementations log it (CleanRL's
    `approx_kl`) and some stop an epoch early when it grows. `num_tokens` as in
    `masked_token_mean`. The log-ratio is clamped to +-20, as in `kl_k3`.
    """
    kl_bt = kl_k3(old_logprobs_bt.detach(), logprobs_bt.detach())
    return masked_token_mean(kl_bt, mask_bt, num_tokens=num_tokens)


def explained_variance(
    values_bt: torch.Tensor, returns_bt: torch.Tensor, mask_bt: torch.Tensor
) -> torch.Tensor:
    """Share of the returns' variance the critic explains, over kept tokens, a scalar <= 1.

        EV = 1 - Var[R - V] / Var[R]     (population variances over kept tokens)

    1: perfect values; 0: no better than predicting the mean return; < 0: worse than that.
    NaN when the returns do not vary (nothing to explain), as in OpenAI baselines.
    """
    kept_bt = check_mask(values_bt, mask_bt)
    returns_bt = returns_bt.detach()
    error_bt = returns_bt - values_bt.detach()
    returns_variance = _masked_variance(returns_bt, kept_bt)
    explained = 1.0 - _masked_variance(error_bt, kept_bt) / returns_variance
    return torch.where(returns_variance > 0, explained, torch.nan)


def _masked_variance(x_bt: torch.Tensor, kept_bt: torch.Tensor) -> torch.Tensor:
    count = kept_bt.sum().clamp(min=1)
    x_bt = torch.where(kept_bt, x_bt, 0)
    mean = x_bt.sum() / count
    return torch.where(kept_bt, x_bt - mean, 0).square().sum() / count
