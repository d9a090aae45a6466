"""KernelGYM's tiered reward: its table, its boundaries, and our noise rule."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reward_strategies import Outcome, baselines, outcomes, tiered_values

from cuda_agent.reward import Baseline, TieredValues, tiered_reward

VALUES = TieredValues()


@pytest.mark.parametrize(
    ("speedup", "expected"),
    [
        # KernelGYM's calculate_reward_like_kernel: thresholds inclusive (speedup >= x).
        (0.5, -0.1),
        (0.999, -0.1),
        (1.0, 0.2),
        (1.1, 0.2),
        (1.2, 0.4),
        (1.5, 0.6),
        (1.99, 0.6),
        (2.0, 0.8),
        (3.0, 1.0),
        (50.0, 1.0),
    ],
)
def test_kernelgym_table(speedup: float, expected: float) -> None:
    o = Outcome(candidate_time_ms=1.0, eager_time_ms=speedup)  # t0 / t == speedup exactly
    assert tiered_reward(o) == expected


def test_failures() -> None:
    fast = Outcome(candidate_time_ms=1.0, eager_time_ms=10.0)
    assert tiered_reward(dataclasses.replace(fast, flags=("decoy_kernel",))) == -1.0
    assert tiered_reward(dataclasses.replace(fast, correct=False)) == -0.3
    assert tiered_reward(dataclasses.replace(fast, correct=False), compiled=False) == -0.5
    assert tiered_reward(Outcome()) == -0.1  # correct but untimed: speedup read as 0


def test_baseline_choice() -> None:
    o = Outcome(candidate_time_ms=1.0, eager_time_ms=2.0, compile_time_ms=1.2)
    assert tiered_reward(o) == 0.8
    assert tiered_reward(o, baseline="compile") == 0.4


@given(
    outcome=outcomes,
    values=tiered_values(),
    compiled=st.booleans(),
    baseline=baselines,
    noise_aware=st.booleans(),
)
def test_returns_one_of_the_values(
    outcome: Outcome, values: TieredValues, compiled: bool, baseline: Baseline, noise_aware: bool
) -> None:
    r = tiered_reward(
        outcome,
        compiled=compiled or outcome.correct,
        baseline=baseline,
        values=values,
        noise_aware=noise_aware,
    )
    allowed = {values.rejected, values.compile_fail, values.incorrect, values.slower}
    assert r in allowed | set(values.tier_values)


def test_user_mistakes_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="ordered"):
        TieredValues(rejected=0.0, compile_fail=-1.0)
    with pytest.raises(ValueError, match="ordered"):
        TieredValues(tier_speedups=(1.0, 1.0, 1.5, 2.0, 3.0))
    with pytest.raises(ValueError, match="ordered"):
        TieredValues(tier_speedups=(1.0,), tier_values=(0.2, 0.4))
    with pytest.raises(ValueError, match="ordered"):
        TieredValues(tier_speedups=(0.0,), tier_values=(0.2,))
    with pytest.raises(ValueError, match="compiled=True"):
        tiered_reward(Outcome(), compiled=False)
