"""Laws of the masked aggregations (padding, micro-batch splitting) and the clip fraction."""

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.rl_core import (
    aggregate_loss,
    aggregation_counts,
    clip_fraction,
    group_normalized_advantages,
    masked_seq_mean_token_mean,
    masked_seq_mean_token_sum,
    masked_seq_mean_token_sum_norm,
    masked_token_mean,
)

# torch's first calls (dispatch, vmap set-up) are slow: a deadline would make tests flaky.
TORCH_SETTINGS = settings(deadline=None, max_examples=40)

MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]


def _by_mode(mode: str):
    def aggregate(values_bt: torch.Tensor, mask_bt: torch.Tensor) -> torch.Tensor:
        return aggregate_loss(values_bt, mask_bt, mode, max_tokens=16)  # type: ignore[arg-type]

    aggregate.__name__ = mode
    return aggregate


AGGREGATIONS = [_by_mode(mode) for mode in MODES]


@st.composite
def values_and_mask(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor]:
    b, t = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    values = draw(st.lists(st.floats(-10, 10), min_size=b * t, max_size=b * t))
    mask = draw(st.lists(st.booleans(), min_size=b * t, max_size=b * t))
    return (
        torch.tensor(values, dtype=torch.float64).reshape(b, t),
        torch.tensor(mask).reshape(b, t),
    )


@pytest.mark.parametrize("aggregate", AGGREGATIONS)
@TORCH_SETTINGS
@given(data=values_and_mask(), pad_t=st.integers(0, 3), pad_b=st.integers(0, 2))
def test_invariant_to_extra_padding(
    aggregate, data: tuple[torch.Tensor, torch.Tensor], pad_t: int, pad_b: int
) -> None:
    values_bt, mask_bt = data
    b, t = values_bt.shape
    # Padding holds garbage (inf, nan): a masked-out value must never leak in.
    padded_values = torch.full((b + pad_b, t + pad_t), math.nan, dtype=torch.float64)
    padded_values[:, :1] = math.inf
    padded_values[:b, :t] = values_bt
    padded_mask = torch.zeros(b + pad_b, t + pad_t, dtype=torch.bool)
    padded_mask[:b, :t] = mask_bt
    torch.testing.assert_close(aggregate(padded_values, padded_mask), aggregate(values_bt, mask_bt))


@pytest.mark.parametrize("aggregate", AGGREGATIONS)
def test_empty_mask_gives_zero_and_finite_gradients(aggregate) -> None:
    values_bt = torch.full((2, 3), math.inf, dtype=torch.float64, requires_grad=True)
    mean = aggregate(values_bt, torch.zeros(2, 3, dtype=torch.bool))
    assert mean.item() == 0.0
    (grad_bt,) = torch.autograd.grad(mean, values_bt)
    assert (grad_bt == 0).all()


@TORCH_SETTINGS
@given(data=values_and_mask())
def test_token_mean_weighs_tokens_and_seq_mean_weighs_sequences(
    data: tuple[torch.Tensor, torch.Tensor],
) -> None:
    values_bt, mask_bt = data
    kept = values_bt[mask_bt]
    expected_token = kept.mean() if kept.numel() else torch.tensor(0.0, dtype=torch.float64)
    torch.testing.assert_close(masked_token_mean(values_bt, mask_bt), expected_token)
    seq_means = [row[m].mean() for row, m in zip(values_bt, mask_bt, strict=True) if m.any()]
    expected_seq = torch.stack(seq_means).mean() if seq_means else expected_token
    torch.testing.assert_close(masked_seq_mean_token_mean(values_bt, mask_bt), expected_seq)
    full_bt = torch.ones_like(mask_bt)
    torch.testing.assert_close(masked_seq_mean_token_mean(values_bt, full_bt), values_bt.mean())
    seq_sums = [row[m].sum() for row, m in zip(values_bt, mask_bt, strict=True) if m.any()]
    expected_sum = torch.stack(seq_sums).mean() if seq_sums else expected_token
    torch.testing.assert_close(masked_seq_mean_token_sum(values_bt, mask_bt), expected_sum)
    torch.testing.assert_close(
        masked_seq_mean_token_sum_norm(values_bt, mask_bt, max_tokens=8), expected_sum / 8
    )


@TORCH_SETTINGS
@given(data=values_and_mask())
def test_vmap_token_mean_per_sequence(data: tuple[torch.Tensor, torch.Tensor]) -> None:
    values_bt, mask_bt = data
    per_seq_b = torch.func.vmap(masked_token_mean)(values_bt, mask_bt)
    expected_b = torch.stack(
        [masked_token_mean(v[None], m[None]) for v, m in zip(values_bt, mask_bt, strict=True)]
    )
    torch.testing.assert_close(per_seq_b, expected_b)


@TORCH_SETTINGS
@given(data=values_and_mask(), shift=st.floats(-1, 1))
def test_clip_fraction(data: tuple[torch.Tensor, torch.Tensor], shift: float) -> None:
    logprobs_bt, mask_bt = data
    logprobs_bt = -logprobs_bt.abs()
    assert clip_fraction(logprobs_bt, logprobs_bt.clone(), mask_bt).item() == 0.0
    old_bt = logprobs_bt + shift
    fraction = clip_fraction(logprobs_bt, old_bt, mask_bt, eps_low=0.2, eps_high=0.28)
    ratio = math.exp(-shift)
    expected = float(mask_bt.any()) if (ratio < 0.8 or ratio > 1.28) else 0.0
    assert fraction.item() == pytest.approx(expected)


@TORCH_SETTINGS
@given(data=values_and_mask())
def test_no_input_is_mutated(data: tuple[torch.Tensor, torch.Tensor]) -> None:
    values_bt, mask_bt = data
    before = (values_bt.clone(), mask_bt.clone(), values_bt._version, mask_bt._version)
    masked_token_mean(values_bt, mask_bt)
    masked_seq_mean_token_mean(values_bt, mask_bt)
    clip_fraction(values_bt, values_bt * 0.5, mask_bt)
    group_normalized_advantages(values_bt)
    assert torch.equal(values_bt, before[0]) and torch.equal(mask_bt, before[1])
    assert (values_bt._version, mask_bt._version) == before[2:]


def test_mask_shape_mistake_raises() -> None:
    with pytest.raises(ValueError, match="mask_bt"):
        masked_token_mean(torch.zeros(2, 3), torch.ones(2, 4, dtype=torch.bool))


@pytest.mark.parametrize("mode", MODES)
@TORCH_SETTINGS
@given(data=values_and_mask(), cuts=st.lists(st.integers(0, 4), max_size=3), st_data=st.data())
def test_micro_batches_with_global_counts_sum_to_the_whole_batch(
    mode: str, data: tuple[torch.Tensor, torch.Tensor], cuts: list[int], st_data: st.DataObject
) -> None:
    """Split the batch anywhere (empty parts too), trim or pad each part to its own width as
    a data loader would, aggregate each part with the whole batch's counts: the parts sum to
    the whole. The same holds across data-parallel ranks once the counts are all-reduced."""
    values_bt, mask_bt = data
    batch = values_bt.shape[0]
    bounds = [0, *sorted(min(c, batch) for c in cuts), batch]
    counts = [aggregation_counts(mask_bt[lo:hi]) for lo, hi in itertools.pairwise(bounds)]
    num_tokens = sum(c.num_tokens for c in counts)
    num_sequences = sum(c.num_sequences for c in counts)
    assert (num_tokens, num_sequences) == tuple(aggregation_counts(mask_bt))

    def aggregate(v: torch.Tensor, m: torch.Tensor, **global_counts: torch.Tensor) -> torch.Tensor:
        return aggregate_loss(v, m, mode, max_tokens=16, **global_counts)  # type: ignore[arg-type]

    total = torch.zeros((), dtype=torch.float64)
    for lo, hi in itertools.pairwise(bounds):
        extra = st_data.draw(st.integers(0, 2))
        part_values = torch.nn.functional.pad(values_bt[lo:hi], (0, extra), value=math.nan)
        part_mask = torch.nn.functional.pad(mask_bt[lo:hi], (0, extra), value=False)
        total = total + aggregate(
            part_values, part_mask, num_tokens=num_tokens, num_sequences=num_sequences
        )
    torch.testing.assert_close(total, aggregate(values_bt, mask_bt))


def test_dispatch_and_mistakes() -> None:
    values_bt, mask_bt = torch.arange(6.0).reshape(2, 3), torch.ones(2, 3, dtype=torch.bool)
    torch.testing.assert_close(aggregate_loss(values_bt, mask_bt, "token-mean"), values_bt.mean())
    with pytest.raises(ValueError, match="max_tokens"):
        aggregate_loss(values_bt, mask_bt, "seq-mean-token-sum-norm")
    with pytest.raises(ValueError, match="token-mean"):
        aggregate_loss(values_bt, mask_bt, "sum")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens"):
        masked_seq_mean_token_sum_norm(values_bt, mask_bt, max_tokens=0)
