"""Laws of the noise-aware speedup and the clipped log-speedup reward."""

import dataclasses
import functools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reward_strategies import (
    Outcome,
    baselines,
    good_outcomes,
    log_speedup_ranges,
    outcomes,
    times,
)

from cuda_agent.reward import (
    Baseline,
    is_faster,
    log_speedup_reward,
    outcome_speedup,
    speedup,
)

noise = st.floats(min_value=0.0, max_value=10.0)


@given(t=times, t0=times)
def test_speedup_without_noise_is_the_time_ratio(t: float, t0: float) -> None:
    assert speedup(t, t0) == t0 / t


@given(t=times, t0=times, s=noise, s0=noise)
def test_speedup_above_one_only_if_faster_beyond_the_noise(
    t: float, t0: float, s: float, s0: float
) -> None:
    if speedup(t, t0, time_spread_ms=s, baseline_spread_ms=s0) > 1.0:
        assert is_faster(t, t0, margin=0.0, time_spread_ms=s, baseline_spread_ms=s0)
    if not is_faster(t, t0, margin=0.0, time_spread_ms=s, baseline_spread_ms=s0):
        assert speedup(t, t0, time_spread_ms=s, baseline_spread_ms=s0) <= 1.0


@given(t=times, t0=times, s=noise, s0=noise, extra=noise)
def test_speedup_is_pessimistic_and_more_noise_lowers_it(
    t: float, t0: float, s: float, s0: float, extra: float
) -> None:
    s_noisy = speedup(t, t0, time_spread_ms=s, baseline_spread_ms=s0)
    assert 0.0 <= s_noisy <= speedup(t, t0)
    assert speedup(t, t0, time_spread_ms=s + extra, baseline_spread_ms=s0 + extra) <= s_noisy


@pytest.mark.parametrize(
    ("t", "t0", "s", "s0"),
    [
        (0.0, 1.0, 0.0, 0.0),  # a zero time would be an infinite speedup: bogus
        (-1.0, 1.0, 0.0, 0.0),
        (math.nan, 1.0, 0.0, 0.0),
        (math.inf, 1.0, 0.0, 0.0),
        (1.0, 0.0, 0.0, 0.0),
        (1.0, math.inf, 0.0, 0.0),
        (0.1, 1.0, math.nan, 0.0),  # unknown noise
        (0.1, 1.0, 0.0, math.inf),
        (0.1, 1.0, 0.0, 1.0),  # the baseline is no faster than its own noise
    ],
)
def test_no_valid_measurement_is_speedup_zero(t: float, t0: float, s: float, s0: float) -> None:
    assert speedup(t, t0, time_spread_ms=s, baseline_spread_ms=s0) == 0.0


def test_outcome_speedup_picks_the_baseline_and_reads_missing_as_zero() -> None:
    o = Outcome(candidate_time_ms=1.0, eager_time_ms=2.0, compile_time_ms=1.5)
    assert outcome_speedup(o) == 2.0
    assert outcome_speedup(o, baseline="compile") == 1.5
    assert outcome_speedup(dataclasses.replace(o, compile_time_ms=None), baseline="compile") == 0.0
    assert outcome_speedup(dataclasses.replace(o, candidate_time_ms=None)) == 0.0
    noisy = dataclasses.replace(o, candidate_time_spread_ms=0.25, eager_time_spread_ms=0.5)
    assert outcome_speedup(noisy) == 1.5 / 1.25
    assert outcome_speedup(noisy, noise_aware=False) == 2.0


@given(t=times, t0=times)
def test_log_speedup_reward_formula(t: float, t0: float) -> None:
    o = Outcome(candidate_time_ms=t, eager_time_ms=t0)
    expected = min(max(math.log(t0 / t), -1.0), 1.0)
    assert log_speedup_reward(o) == expected


def test_log_speedup_reward_examples() -> None:
    o = Outcome(candidate_time_ms=1.0, eager_time_ms=2.0, compile_time_ms=0.5)
    assert log_speedup_reward(o) == math.log(2.0)
    assert log_speedup_reward(o, baseline="compile") == math.log(0.5)
    assert log_speedup_reward(dataclasses.replace(o, eager_time_ms=100.0)) == 1.0  # clipped
    assert log_speedup_reward(o, max_log_speedup=0.5) == 0.5
    assert log_speedup_reward(dataclasses.replace(o, correct=False)) == -2.0
    assert log_speedup_reward(dataclasses.replace(o, flags=("side_stream",))) == -2.0
    assert log_speedup_reward(Outcome()) == -1.0  # correct but untimed: the floor


@given(t1=times, t2=times, t0=times)
def test_log_speedup_reward_is_symmetric_in_ratios(t1: float, t2: float, t0: float) -> None:
    # Twice as fast and twice as slow are equal and opposite steps (inside the clip).
    wide = functools.partial(
        log_speedup_reward, min_log_speedup=-100.0, max_log_speedup=100.0, failure=-200.0
    )
    fast = wide(Outcome(candidate_time_ms=t1, eager_time_ms=t0))
    slow = wide(Outcome(candidate_time_ms=t0, eager_time_ms=t1))
    assert math.isclose(fast, -slow, abs_tol=1e-12)


@given(
    outcome=outcomes,
    ranges=log_speedup_ranges(),
    baseline=baselines,
    noise_aware=st.booleans(),
)
def test_log_speedup_reward_range(
    outcome: Outcome, ranges: tuple[float, float, float], baseline: Baseline, noise_aware: bool
) -> None:
    failure, low, high = ranges
    r = log_speedup_reward(
        outcome,
        baseline=baseline,
        min_log_speedup=low,
        max_log_speedup=high,
        failure=failure,
        noise_aware=noise_aware,
    )
    assert r == failure or low <= r <= high
    if outcome.correct and not outcome.flags:
        assert low <= r <= high


@given(outcome=good_outcomes, extra=noise)
def test_log_speedup_more_noise_never_raises_the_reward(outcome: Outcome, extra: float) -> None:
    noisier = dataclasses.replace(
        outcome,
        candidate_time_spread_ms=(outcome.candidate_time_spread_ms or 0.0) + extra,
        eager_time_spread_ms=(outcome.eager_time_spread_ms or 0.0) + extra,
    )
    r = log_speedup_reward(outcome)
    assert log_speedup_reward(noisier) <= r <= log_speedup_reward(outcome, noise_aware=False)


def test_user_mistakes_raise_clear_errors() -> None:
    o = Outcome(candidate_time_ms=1.0, eager_time_ms=2.0)
    with pytest.raises(ValueError, match="min_log_speedup < max_log_speedup"):
        log_speedup_reward(o, min_log_speedup=1.0, max_log_speedup=-1.0)
    with pytest.raises(ValueError, match="failure <= min_log_speedup"):
        log_speedup_reward(o, failure=0.0)
    with pytest.raises(ValueError, match="baseline"):
        outcome_speedup(o, baseline="inductor")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="spreads"):
        speedup(1.0, 2.0, time_spread_ms=-0.1)
