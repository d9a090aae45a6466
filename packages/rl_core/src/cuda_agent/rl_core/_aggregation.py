"""Reductions of per-token values `[B, T]` to a scalar, over the tokens a mask keeps.

`mask_bt` is bool (or 0/1) with the shape of `values_bt`; values at masked-out positions are
ignored, even if they are inf or NaN. An all-empty mask gives 0, not NaN.

Micro-batches and data-parallel ranks: every reduction takes its denominator as an optional
keyword (`num_tokens`, `num_sequences`). Pass the count of the whole batch, from
`aggregation_counts` summed over micro-batches (and all-reduced over ranks), and the sum of
the micro-batch results equals the whole-batch result, whatever the split: accumulate
gradients by summing (`loss.backward()` per micro-batch, no extra scaling). DDP averages
gradients over its `W` ranks, so multiply each rank's loss by `W` there.
"""

from typing import Literal, NamedTuple, get_args

import torch

AggregationMode = Literal[
    "token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"
]

Count = torch.Tensor | float


class AggregationCounts(NamedTuple):
    """Denominators of the aggregations, 0-dim tensors: sum them over micro-batches and ranks."""

    num_tokens: torch.Tensor  # kept tokens
    num_sequences: torch.Tensor  # sequences with at least one kept token


def aggregation_counts(mask_bt: torch.Tensor) -> AggregationCounts:
    """Kept tokens and non-empty sequences of a (micro-)batch, `sum m` and `sum_b 1[any_t m]`.

    Counts add up: the counts of a batch are the sums of the counts of its parts.
    """
    kept_bt = mask_bt.bool()
    return AggregationCounts(kept_bt.sum(), kept_bt.any(dim=-1).sum())


def masked_token_mean(
    values_bt: torch.Tensor, mask_bt: torch.Tensor, *, num_tokens: Count | None = None
) -> torch.Tensor:
    """Mean over all kept tokens of the batch, a scalar (DAPO's token-level loss, arXiv 2503.14476).

        sum_bt m_bt * v_bt / N,    N = num_tokens, by default sum_bt m_bt (0 counts as 1)

    Every token weighs the same, so long sequences weigh more than short ones.
    """
    kept_bt = check_mask(values_bt, mask_bt)
    total = torch.where(kept_bt, values_bt, 0).sum()
    return total / _denominator(kept_bt.sum() if num_tokens is None else num_tokens, total)


def masked_seq_mean_token_mean(
    values_bt: torch.Tensor, mask_bt: torch.Tensor, *, num_sequences: Count | None = None
) -> torch.Tensor:
    """Mean over sequences of each sequence's mean over its kept tokens, a scalar (GRPO).

        (1 / S) sum_b [ sum_t m_bt * v_bt / sum_t m_bt ],   S = num_sequences, by default
                                                             the number of non-empty sequences

    Every sequence weighs the same (DeepSeekMath, arXiv 2402.03300); sequences with no kept
    token (padding rows) add nothing and are not counted.
    """
    kept_bt = check_mask(values_bt, mask_bt)
    num_kept_b = kept_bt.sum(dim=-1)
    seq_mean_b = torch.where(kept_bt, values_bt, 0).sum(dim=-1) / num_kept_b.clamp(min=1)
    total = seq_mean_b.sum()
    default = (num_kept_b > 0).sum()
    return total / _denominator(default if num_sequences is None else num_sequences, total)


def masked_seq_mean_token_sum(
    values_bt: torch.Tensor, mask_bt: torch.Tensor, *, num_sequences: Count | None = None
) -> torch.Tensor:
    """Mean over sequences of each sequence's sum over its kept tokens, a scalar.

        (1 / S) sum_b sum_t m_bt * v_bt,   S = num_sequences, by default the non-empty ones

    The sequence-level loss of the original REINFORCE-style objectives (and verl's
    "seq-mean-token-sum"): a sequence's weight grows with its length.
    """
    kept_bt = check_mask(values_bt, mask_bt)
    total = torch.where(kept_bt, values_bt, 0).sum()
    default = kept_bt.any(dim=-1).sum()
    return total / _denominator(default if num_sequences is None else num_sequences, total)


def masked_seq_mean_token_sum_norm(
    values_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    *,
    max_tokens: int,
    num_sequences: Count | None = None,
) -> torch.Tensor:
    """Token sum per sequence over a constant length, averaged over sequences (Dr. GRPO).

        (1 / (S * L)) sum_b sum_t m_bt * v_bt,   L = max_tokens (a constant, e.g. the
                                                  generation budget), S = num_sequences

    Dr. GRPO (arXiv 2503.20783) replaces GRPO's per-sequence `1 / |o_i|` by one constant, which
    removes the length bias that favours long wrong answers. `max_tokens` must stay fixed
    through training; unlike verl's variant (which divides by the padded width `T` and not by
    `S`), the result does not move when padding or batch size change.
    """
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be a positive constant length, got {max_tokens}")
    return masked_seq_mean_token_sum(values_bt, mask_bt, num_sequences=num_sequences) / max_tokens


def aggregate_loss(
    values_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    mode: AggregationMode,
    *,
    num_tokens: Count | None = None,
    num_sequences: Count | None = None,
    max_tokens: int | None = None,
) -> torch.Tensor:
    """One of the four aggregations by name (verl's `loss_agg_mode` names), a scalar.

    "token-mean" uses `num_tokens`; the "seq-mean-*" modes use `num_sequences`;
    "seq-mean-token-sum-norm" needs `max_tokens`.
    """
    if mode == "token-mean":
        return masked_token_mean(values_bt, mask_bt, num_tokens=num_tokens)
    if mode == "seq-mean-token-mean":
        return masked_seq_mean_token_mean(values_bt, mask_bt, num_sequences=num_sequences)
    if mode == "seq-mean-token-sum":
        return masked_seq_mean_token_sum(values_bt, mask_bt, num_sequences=num_sequences)
    if mode == "seq-mean-token-sum-norm":
        if max_tokens is None:
            raise ValueError("mode 'seq-mean-token-sum-norm' needs max_tokens (a constant length)")
        return masked_seq_mean_token_sum_norm(
            values_bt, mask_bt, max_tokens=max_tokens, num_sequences=num_sequences
        )
    raise ValueError(f"unknown aggregation mode {mode!r}; use one of {get_args(AggregationMode)}")


def check_mask(values_bt: torch.Tensor, mask_bt: torch.Tensor) -> torch.Tensor:
    """The mask as bool, after checking it has the values' shape."""
    if mask_bt.shape != values_bt.shape:
        raise ValueError(
            f"mask_bt {tuple(mask_bt.shape)} must have the shape of values_bt "
            f"{tuple(values_bt.shape)}"
        )
    return mask_bt.bool()


def _denominator(count: Count, like: torch.Tensor) -> torch.Tensor:
    """`count` as a tensor of `like`'s dtype and device, with 0 replaced by 1 (empty batch)."""
    if isinstance(count, torch.Tensor):
        count_t = count.to(like.dtype)
    else:
        count_t = torch.tensor(float(count), dtype=like.dtype, device=like.device)
    return torch.where(count_t > 0, count_t, 1)
