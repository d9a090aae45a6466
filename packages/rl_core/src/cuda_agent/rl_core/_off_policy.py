"""Correction for the mismatch between the sampler (vLLM, SGLang) and the trainer.

The sampler's log-probs differ from the trainer's for the same weights (other kernels, other
precision), so the samples are slightly off-policy. With

    rho = exp(trainer_logprobs - sampler_logprobs)      (the trainer's old-policy log-probs)

at one of three levels (token: each token's own ratio; sequence: the product over the
sequence's kept tokens; geometric: its geometric mean, the per-token average log-ratio), a
correction either multiplies the per-token loss by a truncated ratio (TIS, Yao et al., "Your
Efficient RL Framework Secretly Brings You Off-Policy RL Training", 2025) or drops the tokens
or sequences whose ratio leaves a trusted range (masked IS, Liu et al., "When Speed Kills
Stability: Demystifying RL Collapse from the Training-Inference Mismatch", 2025; IcePop, Ring-1T,
arXiv 2510.18855). CUDA Agent reports that such ratios blew up and collapsed naive RL.
Everything here is detached: weights and masks are constants of the update.
"""

from typing import Literal, NamedTuple

import torch

from cuda_agent.rl_core._aggregation import check_mask
from cuda_agent.rl_core._log_ratio import MAX_LOG_RATIO, clamped_log_ratio

RatioLevel = Literal["token", "sequence", "geometric"]


class ImportanceRatioStats(NamedTuple):
    """Statistics of the importance ratios over kept tokens (token level) or non-empty
    sequences (sequence and geometric levels); every field is a 0-dim tensor."""

    mean: torch.Tensor
    std: torch.Tensor  # population std
    min: torch.Tensor
    max: torch.Tensor
    fraction_above: torch.Tensor  # share with rho > high: truncated by TIS, dropped by masking
    fraction_below: torch.Tensor  # share with rho < low: dropped by masking
    effective_sample_size: torch.Tensor  # (sum rho)^2 / (n sum rho^2), in (0, 1]; 1: on-policy
    mismatch_kl: torch.Tensor  # mean of k3 over kept tokens: KL(sampler || trainer) estimate


def importance_log_ratio(
    trainer_logprobs_bt: torch.Tensor,
    sampler_logprobs_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    *,
    level: RatioLevel = "token",
) -> torch.Tensor:
    """`log rho` at the given level, broadcast to `[B, T]`, 0 where the mask is False.

        token:     l_bt = trainer_bt - sampler_bt
        sequence:  l_bt = sum_s m_bs l_bs                   (same value on every token of b)
        geometric: l_bt = sum_s m_bs l_bs / sum_s m_bs

    Each token's log-ratio is clamped to +-20 (`_log_ratio.py`) and masked before the
    sum; the result is clamped to +-20 again, since a sequence's log-ratio (a sum over
    thousands of tokens) can pass the float range of `exp` with ordinary tokens. So `exp` of
    it is finite for any log-probs but NaN, at any position. Detached.
    """
    kept_bt = check_mask(trainer_logprobs_bt, mask_bt)
    if sampler_logprobs_bt.shape != trainer_logprobs_bt.shape:
        raise ValueError(
            f"sampler_logprobs_bt {tuple(sampler_logprobs_bt.shape)} must have the shape of "
            f"trainer_logprobs_bt {tuple(trainer_logprobs_bt.shape)}"
        )
    log_ratio_bt = torch.where(
        kept_bt, clamped_log_ratio(trainer_logprobs_bt.detach(), sampler_logprobs_bt), 0
    )
    if level == "token":
        pass
    elif level in ("sequence", "geometric"):
        log_ratio_b1 = log_ratio_bt.sum(dim=-1, keepdim=True)
        if level == "geometric":
            log_ratio_b1 = log_ratio_b1 / kept_bt.sum(dim=-1, keepdim=True).clamp(min=1)
        log_ratio_bt = torch.where(kept_bt, log_ratio_b1, 0)
    else:
        raise ValueError(f"unknown level {level!r}; use 'token', 'sequence' or 'geometric'")
    return log_ratio_bt.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)


def truncated_importance_weights(
    trainer_logprobs_bt: torch.Tensor,
    sampler_logprobs_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    *,
    level: RatioLevel = "token",
    max_weight: float = 2.0,
) -> torch.Tensor:
    """Truncated importance weights (TIS), `[B, T]`, 0 where the mask is False; detached.

        w_bt = min(rho_bt, C),   C = max_weight (2 in Yao et al. and verl's default)

    Multiply the per-token policy loss by `w_bt` before aggregation. Truncation trades a
    little bias for bounded variance (Ionides 2008): a ratio above C counts as C.
    """
    if max_weight <= 0:
        raise ValueError(f"max_weight must be > 0, got {max_weight}")
    log_ratio_bt = importance_log_ratio(
        trainer_logprobs_bt, sampler_logprobs_bt, mask_bt, level=level
    )
    weights_bt = torch.exp(log_ratio_bt).clamp(max=max_weight)
    return torch.where(mask_bt.bool(), weights_bt, 0)


def importance_sampling_mask(
    trainer_logprobs_bt: torch.Tensor,
    sampler_logprobs_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    *,
    level: RatioLevel = "token",
    low: float | None = None,
    high: float = 2.0,
) -> torch.Tensor:
    """The loss mask minus the tokens (or whole sequences) whose ratio leaves `[low, high]`.

        m'_bt = m_bt and low <= rho_bt <= high,   low = 1 / high by default

    Masked importance sampling: rather than down-weighting an untrustworthy sample, drop it.
    At the sequence and geometric levels a sequence is kept or dropped whole. Bool `[B, T]`.
    """
    low = 1.0 / high if low is None else low
    if not 0.0 <= low <= 1.0 <= high:
        raise ValueError(f"need 0 <= low <= 1 <= high, got low={low}, high={high}")
    ratio_bt = torch.exp(
        importance_log_ratio(trainer_logprobs_bt, sampler_logprobs_bt, mask_bt, level=level)
    )
    return mask_bt.bool() & (ratio_bt >= low) & (ratio_bt <= high)


def importance_ratio_stats(
    trainer_logprobs_bt: torch.Tensor,
    sampler_logprobs_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    *,
    level: RatioLevel = "token",
    low: float | None = None,
    high: float = 2.0,
) -> ImportanceRatioStats:
    """Diagnostics of the sampler / trainer mismatch, as data (`ImportanceRatioStats`).

    Over kept tokens at the token level, over non-empty sequences otherwise. The effective
    sample size is Kong's (1992) `(sum w)^2 / (n sum w^2)`, 1 when all ratios are equal; the
    mismatch KL is the k3 estimate of KL(sampler || trainer) per kept token (the samples come
    from the sampler), on token log-ratios clamped to +-20 like every ratio here. An empty
    mask gives mean 1, std 0, fractions 0 and ESS 1.
    """
    low = 1.0 / high if low is None else low
    kept_bt = check_mask(trainer_logprobs_bt, mask_bt)
    log_ratio_bt = importance_log_ratio(
        trainer_logprobs_bt, sampler_logprobs_bt, mask_bt, level=level
    )
    if level == "token":
        kept_n, log_ratio_n = kept_bt, log_ratio_bt
    else:  # every kept token carries its sequence's log-ratio: their mean is that log-ratio
        kept_n = kept_bt.any(dim=-1)
        log_ratio_n = log_ratio_bt.sum(dim=-1) / kept_bt.sum(dim=-1).clamp(min=1)
    ratio_n = torch.exp(log_ratio_n)
    any_kept = kept_n.any()
    count = kept_n.sum().clamp(min=1)
    sum_ratio = torch.where(kept_n, ratio_n, 0).sum()
    mean = torch.where(any_kept, sum_ratio / count, 1)
    variance = torch.where(kept_n, (ratio_n - mean).square(), 0).sum() / count
    sum_sq_ratio = torch.where(kept_n, ratio_n.square(), 0).sum()
    token_log_ratio_bt = torch.where(
        kept_bt, clamped_log_ratio(trainer_logprobs_bt.detach(), sampler_logprobs_bt), 0
    )
    k3_bt = torch.expm1(token_log_ratio_bt) - token_log_ratio_bt
    return ImportanceRatioStats(
        mean=mean,
        std=variance.sqrt(),
        min=torch.where(kept_n, ratio_n, mean).amin(),
        max=torch.where(kept_n, ratio_n, mean).amax(),
        fraction_above=(kept_n & (ratio_n > high)).sum() / count,
        fraction_below=(kept_n & (ratio_n < low)).sum() / count,
        effective_sample_size=torch.where(
            any_kept, sum_ratio.square() / (count * sum_sq_ratio).clamp(min=1e-30), 1
        ),
        mismatch_kl=k3_bt.sum() / kept_bt.sum().clamp(min=1),
    )
