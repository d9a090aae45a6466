"""Reductions of per-token values `[B, T]` to a scalar, over the tokens a mask keeps.

`mask_bt` is bool (or 0/1) with the shape of `values_bt`; values at masked-out positions are
ignored, even if they are inf or NaN. An all-empty mask gives 0, not NaN.
"""

import torch


def masked_token_mean(values_bt: torch.Tensor, mask_bt: torch.Tensor) -> torch.Tensor:
    """Mean over all kept tokens of the batch, a scalar (DAPO's token-level loss, arXiv 2503.14476).

        sum_bt m_bt * v_bt / max(sum_bt m_bt, 1)

    Every token weighs the same, so long sequences weigh more than short ones.
    """
    kept_bt = _check_mask(values_bt, mask_bt)
    num_kept = kept_bt.sum().clamp(min=1)
    return torch.where(kept_bt, values_bt, 0).sum() / num_kept


def masked_seq_mean_token_mean(values_bt: torch.Tensor, mask_bt: torch.Tensor) -> torch.Tensor:
    """Mean over sequences of each sequence's mean over its kept tokens, a scalar (GRPO).

        (1 / |S|) sum_{b in S} [ sum_t m_bt * v_bt / sum_t m_bt ],   S = {b : sum_t m_bt > 0}

    Every sequence weighs the same (DeepSeekMath, arXiv 2402.03300); sequences with no kept
    token (padding rows) are left out of the mean over sequences.
    """
    kept_bt = _check_mask(values_bt, mask_bt)
    num_kept_b = kept_bt.sum(dim=-1)
    seq_mean_b = torch.where(kept_bt, values_bt, 0).sum(dim=-1) / num_kept_b.clamp(min=1)
    return seq_mean_b.sum() / (num_kept_b > 0).sum().clamp(min=1)


def _check_mask(values_bt: torch.Tensor, mask_bt: torch.Tensor) -> torch.Tensor:
    """The mask as bool, after checking it has the values' shape."""
    if mask_bt.shape != values_bt.shape:
        raise ValueError(
            f"mask_bt {tuple(mask_bt.shape)} must have the shape of values_bt "
            f"{tuple(values_bt.shape)}"
        )
    return mask_bt.bool()
