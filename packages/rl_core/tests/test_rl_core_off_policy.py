"""Laws of the sampler / trainer mismatch correction: TIS weights, IS masks, ratio statistics."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.rl_core import (
    importance_log_ratio,
    importance_ratio_stats,
    importance_sampling_mask,
    truncated_importance_weights,
)

TORCH_SETTINGS = settings(deadline=None, max_examples=40)
LEVELS = ["token", "sequence", "geometric"]


@st.composite
def mismatch(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(trainer_bt, sampler_bt, mask_bt), log-ratios within [-1.5, 1.5], NaN padding."""
    b, t = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    n = b * t
    trainer = torch.tensor(
        draw(st.lists(st.floats(-5, 0), min_size=n, max_size=n)), dtype=torch.float64
    ).reshape(b, t)
    log_ratio = torch.tensor(
        draw(st.lists(st.floats(-1.5, 1.5), min_size=n, max_size=n)), dtype=torch.float64
    ).reshape(b, t)
    mask = torch.tensor(draw(st.lists(st.booleans(), min_size=n, max_size=n))).reshape(b, t)
    nan = torch.tensor(math.nan, dtype=torch.float64)
    return torch.where(mask, trainer, nan), trainer - log_ratio, mask


def level_ratio(trainer: torch.Tensor, sampler: torch.Tensor, mask: torch.Tensor, level: str):
    """rho per unit the slow way: `[B, T]` for tokens, `[B]` for sequences."""
    log_ratio = torch.where(mask, trainer - sampler, 0)
    if level == "token":
        return log_ratio.exp()
    total = log_ratio.sum(-1)
    return (total if level == "sequence" else total / mask.sum(-1).clamp(min=1)).exp()


@pytest.mark.parametrize("level", LEVELS)
@TORCH_SETTINGS
@given(data=mismatch())
def test_truncated_weights_are_min_of_ratio_and_cap(
    level: str, data: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
) -> None:
    trainer, sampler, mask = data
    weights = truncated_importance_weights(trainer, sampler, mask, level=level, max_weight=2.0)
    rho = level_ratio(trainer, sampler, mask, level)
    rho_bt = rho if level == "token" else rho[:, None].expand_as(trainer)
    torch.testing.assert_close(weights, torch.where(mask, rho_bt.clamp(max=2.0), 0))
    assert (weights <= 2.0).all() and not weights.requires_grad


@pytest.mark.parametrize("level", LEVELS)
@TORCH_SETTINGS
@given(data=mismatch())
def test_mask_keeps_exactly_the_units_within_range(
    level: str, data: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
) -> None:
    trainer, sampler, mask = data
    kept = importance_sampling_mask(trainer, sampler, mask, level=level, high=2.0)
    rho = level_ratio(trainer, sampler, mask, level)
    rho_bt = rho if level == "token" else rho[:, None].expand_as(trainer)
    assert torch.equal(kept, mask & (rho_bt >= 0.5) & (rho_bt <= 2.0))
    if level != "token":  # whole sequences are kept or dropped
        assert torch.equal(kept.any(-1), (kept | ~mask).all(-1) & mask.any(-1))


@pytest.mark.parametrize("level", LEVELS)
@TORCH_SETTINGS
@given(data=mismatch())
def test_ratio_stats_are_the_explicit_statistics(
    level: str, data: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
) -> None:
    trainer, sampler, mask = data
    stats = importance_ratio_stats(trainer, sampler, mask, level=level, high=2.0)
    rho = level_ratio(trainer, sampler, mask, level)
    units = rho[mask] if level == "token" else rho[mask.any(-1)]
    if units.numel() == 0:
        assert float(stats.mean) == 1.0 and float(stats.effective_sample_size) == 1.0
        return
    torch.testing.assert_close(stats.mean, units.mean())
    torch.testing.assert_close(stats.std, units.std(correction=0))
    torch.testing.assert_close(stats.min, units.min())
    torch.testing.assert_close(stats.max, units.max())
    assert float(stats.fraction_above) == pytest.approx(float((units > 2.0).double().mean()))
    assert float(stats.fraction_below) == pytest.approx(float((units < 0.5).double().mean()))
    ess = units.sum() ** 2 / (units.numel() * (units**2).sum())
    torch.testing.assert_close(stats.effective_sample_size, ess)
    assert 0 < float(stats.effective_sample_size) <= 1 + 1e-12
    assert float(stats.mismatch_kl) >= 0


@pytest.mark.parametrize("level", LEVELS)
@TORCH_SETTINGS
@given(data=mismatch())
def test_on_policy_data_needs_no_correction(
    level: str, data: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
) -> None:
    trainer, _, mask = data
    sampler = trainer.clone()
    weights = truncated_importance_weights(trainer, sampler, mask, level=level)
    assert torch.equal(weights, mask.to(weights.dtype))
    assert torch.equal(importance_sampling_mask(trainer, sampler, mask, level=level), mask)
    stats = importance_ratio_stats(trainer, sampler, mask, level=level)
    assert (float(stats.mean), float(stats.std)) == (1.0, 0.0)
    assert float(stats.effective_sample_size) == pytest.approx(1.0)
    assert (float(stats.fraction_above), float(stats.mismatch_kl)) == (0.0, 0.0)


def test_huge_sequence_log_ratios_stay_finite() -> None:
    trainer = torch.zeros(1, 5000)
    sampler = torch.full((1, 5000), -1.0)  # sequence log-ratio 5000
    mask = torch.ones(1, 5000, dtype=torch.bool)
    assert float(importance_log_ratio(trainer, sampler, mask, level="sequence").max()) == 20.0
    stats = importance_ratio_stats(trainer, sampler, mask, level="sequence")
    assert all(math.isfinite(float(x)) for x in stats)
    assert float(stats.fraction_above) == 1.0


def test_mistakes_raise() -> None:
    x, mask = torch.zeros(1, 2), torch.ones(1, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="level"):
        truncated_importance_weights(x, x, mask, level="batch")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="low"):
        importance_sampling_mask(x, x, mask, high=0.5)
    with pytest.raises(ValueError, match="sampler_logprobs_bt"):
        importance_ratio_stats(x, torch.zeros(1, 3), mask)
