"""Laws of the milestone reward, the speed comparison and the format reward."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reward_strategies import (
    Outcome,
    bad_outcomes,
    good_outcomes,
    margins,
    ordered_values,
    outcomes,
    times,
)

from cuda_agent.reward import (
    EvalOutcome,
    MilestoneValues,
    format_reward,
    is_faster,
    milestone_reward,
)

VALUES = MilestoneValues()
ALL_VALUES = {VALUES.fail, VALUES.correct, VALUES.faster_than_eager, VALUES.faster_than_compile}


def test_dataclass_satisfies_protocol() -> None:
    assert isinstance(Outcome(), EvalOutcome)


def test_paper_examples() -> None:
    base = Outcome(candidate_time_ms=1.0, eager_time_ms=2.0, compile_time_ms=1.5)
    assert milestone_reward(base) == 3.0
    assert milestone_reward(dataclasses.replace(base, compile_time_ms=1.0)) == 2.0
    assert milestone_reward(dataclasses.replace(base, eager_time_ms=1.0)) == 1.0
    assert milestone_reward(dataclasses.replace(base, correct=False)) == -1.0
    assert milestone_reward(dataclasses.replace(base, flags=("no_kernel_launched",))) == -1.0
    assert milestone_reward(Outcome()) == 1.0  # correct but untimed


@settings(max_examples=200)
@given(outcome=outcomes, margin=margins, noise_aware=st.booleans())
def test_returns_exactly_one_of_the_four_values(
    outcome: Outcome, margin: float, noise_aware: bool
) -> None:
    assert milestone_reward(outcome, margin=margin, noise_aware=noise_aware) in ALL_VALUES


@given(outcome=outcomes, t1=times, t2=times, margin=margins, noise_aware=st.booleans())
def test_monotone_as_candidate_gets_faster(
    outcome: Outcome, t1: float, t2: float, margin: float, noise_aware: bool
) -> None:
    slow, fast = max(t1, t2), min(t1, t2)

    def reward(t: float) -> float:
        o = dataclasses.replace(outcome, candidate_time_ms=t)
        return milestone_reward(o, margin=margin, noise_aware=noise_aware)

    assert reward(fast) >= reward(slow)


@given(bad=bad_outcomes, good=good_outcomes, values=ordered_values, margin=margins)
def test_failure_never_beats_a_correct_outcome(
    bad: Outcome, good: Outcome, values: MilestoneValues, margin: float
) -> None:
    r_bad = milestone_reward(bad, margin=margin, values=values)
    assert r_bad == values.fail
    assert r_bad <= milestone_reward(good, margin=margin, values=values)


@given(t0=times, margin=margins)
def test_margin_is_strict_at_the_boundary(t0: float, margin: float) -> None:
    boundary = t0 * (1.0 - margin)
    just_faster = math.nextafter(boundary, 0.0)
    at = Outcome(candidate_time_ms=boundary, eager_time_ms=t0)
    below = Outcome(candidate_time_ms=just_faster, eager_time_ms=t0)
    assert milestone_reward(at, margin=margin) == VALUES.correct
    assert milestone_reward(below, margin=margin) == VALUES.faster_than_eager


def test_paper_margin_five_percent() -> None:
    assert not is_faster(0.95, 1.0)  # exactly 5% faster is not more than 5%
    assert is_faster(0.9499, 1.0)


@given(outcome=good_outcomes, margin=margins)
def test_no_compile_time_makes_the_top_milestone_unreachable(
    outcome: Outcome, margin: float
) -> None:
    o = dataclasses.replace(outcome, compile_time_ms=None)
    assert milestone_reward(o, margin=margin) < VALUES.faster_than_compile


@given(outcome=good_outcomes, margin=margins, noise_aware=st.booleans())
def test_top_milestone_needs_both_baselines_beaten(
    outcome: Outcome, margin: float, noise_aware: bool
) -> None:
    if (
        milestone_reward(outcome, margin=margin, noise_aware=noise_aware)
        == VALUES.faster_than_compile
    ):
        t, eager, compiled = (
            outcome.candidate_time_ms,
            outcome.eager_time_ms,
            outcome.compile_time_ms,
        )
        assert t is not None and eager is not None and compiled is not None
        assert t < eager * (1 - margin) and t < compiled * (1 - margin)


def test_beating_only_a_slow_compile_earns_nothing_extra() -> None:
    o = Outcome(candidate_time_ms=1.5, eager_time_ms=1.0, compile_time_ms=2.0)
    assert milestone_reward(o) == VALUES.correct


def test_speedup_within_noise_does_not_count() -> None:
    # 10% faster, but the noise (0.02 + 0.05) eats more than the 5% slack beyond the margin.
    noisy = Outcome(
        candidate_time_ms=0.9,
        eager_time_ms=1.0,
        candidate_time_spread_ms=0.02,
        eager_time_spread_ms=0.05,
    )
    assert milestone_reward(noisy) == VALUES.correct
    assert milestone_reward(noisy, noise_aware=False) == VALUES.faster_than_eager
    quiet = dataclasses.replace(noisy, candidate_time_spread_ms=0.01, eager_time_spread_ms=0.01)
    assert milestone_reward(quiet) == VALUES.faster_than_eager


@given(
    t=times,
    t0=times,
    s=st.floats(min_value=0, max_value=10),
    s0=st.floats(min_value=0, max_value=10),
    margin=margins,
)
def test_noise_rule(t: float, t0: float, s: float, s0: float, margin: float) -> None:
    expected = t + s < t0 * (1 - margin) - s0
    assert is_faster(t, t0, margin=margin, time_spread_ms=s, baseline_spread_ms=s0) == expected


@given(outcome=outcomes, margin=margins, extra=st.floats(min_value=0, max_value=10))
def test_more_noise_never_raises_the_reward(outcome: Outcome, margin: float, extra: float) -> None:
    noisier = dataclasses.replace(
        outcome,
        candidate_time_spread_ms=(outcome.candidate_time_spread_ms or 0.0) + extra,
        eager_time_spread_ms=(outcome.eager_time_spread_ms or 0.0) + extra,
        compile_time_spread_ms=(outcome.compile_time_spread_ms or 0.0) + extra,
    )
    r = milestone_reward(outcome, margin=margin)
    assert milestone_reward(noisier, margin=margin) <= r
    assert r <= milestone_reward(outcome, margin=margin, noise_aware=False)


@pytest.mark.parametrize("t", [0.0, -1.0, math.nan, math.inf])
def test_bogus_candidate_time_is_never_a_speedup(t: float) -> None:
    assert milestone_reward(Outcome(candidate_time_ms=t, eager_time_ms=1.0)) == VALUES.correct


def test_nan_spread_is_never_a_speedup() -> None:
    o = Outcome(candidate_time_ms=0.1, eager_time_ms=1.0, eager_time_spread_ms=math.nan)
    assert milestone_reward(o) == VALUES.correct


def test_user_mistakes_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="margin"):
        milestone_reward(Outcome(), margin=5.0)
    with pytest.raises(ValueError, match="spreads"):
        is_faster(0.5, 1.0, time_spread_ms=-0.1)
    with pytest.raises(ValueError, match="ordered"):
        MilestoneValues(fail=2.0, correct=1.0)


@given(values=ordered_values)
def test_format_reward(values: MilestoneValues) -> None:
    assert format_reward(False, values=values) == values.fail
    assert format_reward(True, values=values) is None
