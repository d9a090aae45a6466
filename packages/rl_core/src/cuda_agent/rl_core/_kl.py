"""Estimators of KL(policy || reference) from log-probs of tokens sampled from the policy.

Schulman, "Approximating KL divergence" (2020, joschu.net/blog/kl-approx.html). With
`log_ratio = logprobs - ref_logprobs` at a token sampled from the policy:

    k1 = log_ratio                          unbiased, high variance, can be negative
    k2 = log_ratio^2 / 2                    biased (exact to second order), >= 0
    k3 = exp(-log_ratio) - 1 + log_ratio    unbiased, low variance, >= 0

Token forms are `[B, T]`; `sequence_kl` applies an estimator to the log-ratio of whole
sequences. Gradients flow through `logprobs_bt` only. As a loss term the estimators' gradients
differ from the gradient of the KL itself (only k2's matches it, to second order): see the blog.

Every token log-ratio is clamped to +-20 first, whatever `clamp` says (`_log_ratio.py`:
why, and why two equal infinite log-probs count as 0). Unclamped, k3's `exp(-log_ratio)`
overflows float32 past a log-ratio of about -88, and at a masked-out position (padding, whose
log-probs may be anything) k2's and k3's gradients are `0 * inf = NaN`, which flows into the
model although the aggregation ignores the value. With the clamp every estimate and its
gradient is finite for any log-probs but NaN, and nothing changes while |log_ratio| <= 20.
`sequence_kl` clamps each token's log-ratio before the sum and, for k3, the sum again.
"""

from typing import Literal

import torch

from cuda_agent.rl_core._aggregation import check_mask
from cuda_agent.rl_core._log_ratio import MAX_LOG_RATIO, clamped_log_ratio

KlEstimator = Literal["k1", "k2", "k3"]


def kl_k1(
    logprobs_bt: torch.Tensor, ref_logprobs_bt: torch.Tensor, *, clamp: float | None = None
) -> torch.Tensor:
    """Per-token k1 estimate `logprobs - ref_logprobs`, `[B, T]`, clamped to `[-clamp, clamp]`.

    The log-ratio is first clamped to +-20 (module docstring).
    """
    return _estimate(clamped_log_ratio(logprobs_bt, ref_logprobs_bt), "k1", clamp)


def kl_k2(
    logprobs_bt: torch.Tensor, ref_logprobs_bt: torch.Tensor, *, clamp: float | None = None
) -> torch.Tensor:
    """Per-token k2 estimate `(logprobs - ref_logprobs)^2 / 2`, `[B, T]`, clamped to `[0, clamp]`.

    The log-ratio is first clamped to +-20 (module docstring), so k2 <= 200.
    """
    return _estimate(clamped_log_ratio(logprobs_bt, ref_logprobs_bt), "k2", clamp)


def kl_k3(
    logprobs_bt: torch.Tensor, ref_logprobs_bt: torch.Tensor, *, clamp: float | None = None
) -> torch.Tensor:
    """Per-token k3 estimate, `[B, T]`, >= 0, zero only where the log-probs are equal.

        r = ref_logprobs - logprobs,   k3 = exp(r) - 1 - r      computed as expm1(r) - r

    GRPO's KL penalty (arXiv 2402.03300). The log-ratio is always first clamped to +-20 (as
    verl's k3), so that neither value nor gradient overflows: k3 <= exp(20) - 21 ~ 4.9e8.
    With `clamp` (verl uses 10) the result lies in `[0, clamp]`.
    """
    return _estimate(clamped_log_ratio(logprobs_bt, ref_logprobs_bt), "k3", clamp)


def sequence_kl(
    logprobs_bt: torch.Tensor,
    ref_logprobs_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    *,
    estimator: KlEstimator = "k1",
    clamp: float | None = None,
) -> torch.Tensor:
    """Estimate of KL(policy(y|x) || reference(y|x)) per sequence, `[B]`.

        R_b = sum_t m_bt * (logprobs_bt - ref_logprobs_bt),   kl_b = k(R_b)

    The log-ratio of a whole answer is the sum of its token log-ratios, so each estimator
    applies unchanged to `R_b` and stays unbiased (k1, k3) for answers sampled from the
    policy. For k1 this equals the sum of the per-token k1; for k3 it does not (the sum of
    token k3 values estimates the sum of per-position KLs instead). Each token's log-ratio is
    clamped to +-20 before the sum; k3 clamps `R_b` to +-20 again (a sequence's log-ratio can
    exceed the float range of `exp` with ordinary tokens); masked positions are dropped
    before the sum, whatever they hold (NaN included).
    """
    kept_bt = check_mask(logprobs_bt, mask_bt)
    log_ratio_bt = clamped_log_ratio(logprobs_bt, ref_logprobs_bt)
    log_ratio_b = torch.where(kept_bt, log_ratio_bt, 0).sum(dim=-1)
    return _estimate(log_ratio_b, estimator, clamp)


def _estimate(log_ratio: torch.Tensor, estimator: KlEstimator, clamp: float | None) -> torch.Tensor:
    if clamp is not None and clamp <= 0:
        raise ValueError(f"clamp must be > 0, got {clamp}")
    if estimator == "k1":
        kl = log_ratio
    elif estimator == "k2":
        kl = 0.5 * log_ratio.square()
    elif estimator == "k3":
        log_ratio = log_ratio.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)  # a no-op on token forms
        kl = torch.expm1(-log_ratio) + log_ratio
    else:
        raise ValueError(f"unknown KL estimator {estimator!r}; use 'k1', 'k2' or 'k3'")
    return kl if clamp is None else kl.clamp(-clamp, clamp)
