"""Laws every outcome reward obeys, whatever its (valid) configuration.

- no reward ever prefers a rejected (flagged) outcome to an honest failure, nor an honest
  failure to a correct outcome;
- a faster candidate (or a slower baseline) never earns less;
- a speedup within the measured noise earns nothing for speed, and more noise never earns more.
"""

import dataclasses
import functools
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reward_strategies import (
    Outcome,
    baselines,
    good_outcomes,
    honest_failures,
    log_speedup_ranges,
    margins,
    ordered_values,
    outcomes,
    rejected_outcomes,
    tiered_values,
    times,
    within_noise,
)

from cuda_agent.reward import (
    Baseline,
    MilestoneValues,
    TieredValues,
    format_reward,
    log_speedup_reward,
    milestone_reward,
    tiered_reward,
)

RewardFn = Callable[..., float]
KINDS = ["milestone", "log_speedup", "tiered"]
each_reward = pytest.mark.parametrize("kind", KINDS)


@st.composite
def reward_fns(draw: st.DrawFn, kind: str) -> RewardFn:
    """The `kind` reward with any valid configuration, as a `functools.partial`."""
    noise_aware = draw(st.booleans())
    if kind == "milestone":
        return functools.partial(
            milestone_reward,
            margin=draw(margins),
            values=draw(ordered_values),
            noise_aware=noise_aware,
        )
    if kind == "log_speedup":
        failure, low, high = draw(log_speedup_ranges())
        return functools.partial(
            log_speedup_reward,
            baseline=draw(baselines),
            min_log_speedup=low,
            max_log_speedup=high,
            failure=failure,
            noise_aware=noise_aware,
        )
    return functools.partial(
        tiered_reward,
        baseline=draw(baselines),
        values=draw(tiered_values()),
        noise_aware=noise_aware,
    )


def score(reward: RewardFn, outcome: Outcome, compiled: bool = True) -> float:
    """The reward of an outcome; `compiled` reaches only the reward that reads it."""
    if isinstance(reward, functools.partial) and reward.func is tiered_reward:
        return reward(outcome, compiled=compiled or outcome.correct)
    return reward(outcome)


@each_reward
@given(
    data=st.data(),
    rejected=rejected_outcomes,
    honest=honest_failures,
    rejected_compiled=st.booleans(),
    honest_compiled=st.booleans(),
)
def test_rejected_never_beats_an_honest_failure(
    kind: str,
    data: st.DataObject,
    rejected: Outcome,
    honest: Outcome,
    rejected_compiled: bool,
    honest_compiled: bool,
) -> None:
    reward = data.draw(reward_fns(kind))
    # Whatever a flagged outcome claims (correct, fast, compiled), it earns no more than a
    # candidate that honestly failed, even one that did not compile.
    assert score(reward, rejected, rejected_compiled) <= score(reward, honest, honest_compiled)


@each_reward
@given(data=st.data(), honest=honest_failures, good=good_outcomes, compiled=st.booleans())
def test_failure_never_beats_a_correct_outcome(
    kind: str, data: st.DataObject, honest: Outcome, good: Outcome, compiled: bool
) -> None:
    reward = data.draw(reward_fns(kind))
    assert score(reward, honest, compiled) <= score(reward, good)


@each_reward
@given(data=st.data(), outcome=good_outcomes, t1=times, t2=times)
def test_monotone_as_the_candidate_gets_faster(
    kind: str, data: st.DataObject, outcome: Outcome, t1: float, t2: float
) -> None:
    reward = data.draw(reward_fns(kind))
    fast, slow = min(t1, t2), max(t1, t2)
    r_fast = score(reward, dataclasses.replace(outcome, candidate_time_ms=fast))
    assert r_fast >= score(reward, dataclasses.replace(outcome, candidate_time_ms=slow))


@each_reward
@given(data=st.data(), outcome=good_outcomes, t1=times, t2=times, which=baselines)
def test_monotone_as_the_baseline_gets_slower(
    kind: str, data: st.DataObject, outcome: Outcome, t1: float, t2: float, which: Baseline
) -> None:
    reward = data.draw(reward_fns(kind))
    field = f"{which}_time_ms"
    r_slow_baseline = score(reward, dataclasses.replace(outcome, **{field: max(t1, t2)}))
    assert r_slow_baseline >= score(reward, dataclasses.replace(outcome, **{field: min(t1, t2)}))


@given(outcome=within_noise(), margin=margins, baseline=baselines)
def test_a_speedup_within_the_noise_earns_nothing_for_speed(
    outcome: Outcome, margin: float, baseline: Baseline
) -> None:
    milestones, tiers = MilestoneValues(), TieredValues()
    assert milestone_reward(outcome, margin=margin) == milestones.correct
    assert log_speedup_reward(outcome, baseline=baseline) <= 0.0
    assert tiered_reward(outcome, baseline=baseline) == tiers.slower
    # The same outcomes do earn speed credit once the noise is ignored: the law is not vacuous.
    assert log_speedup_reward(outcome, baseline=baseline, noise_aware=False) > 0.0
    assert tiered_reward(outcome, baseline=baseline, noise_aware=False) > tiers.slower
    assert (
        milestone_reward(outcome, margin=0.0, noise_aware=False) == milestones.faster_than_compile
    )


@each_reward
@given(data=st.data(), outcome=outcomes, extra=st.floats(min_value=0.0, max_value=10.0))
def test_more_noise_never_earns_more(
    kind: str, data: st.DataObject, outcome: Outcome, extra: float
) -> None:
    reward = data.draw(reward_fns(kind))
    noisier = dataclasses.replace(
        outcome,
        candidate_time_spread_ms=(outcome.candidate_time_spread_ms or 0.0) + extra,
        eager_time_spread_ms=(outcome.eager_time_spread_ms or 0.0) + extra,
        compile_time_spread_ms=(outcome.compile_time_spread_ms or 0.0) + extra,
    )
    assert score(reward, noisier) <= score(reward, outcome)


@given(values=ordered_values, outcome=outcomes, rejected=rejected_outcomes, margin=margins)
def test_a_malformed_answer_is_a_failure(
    values: MilestoneValues, outcome: Outcome, rejected: Outcome, margin: float
) -> None:
    malformed = format_reward(False, values=values)
    assert malformed is not None
    # No better than any evaluated answer (dodging evaluation never pays), and no worse than a
    # rejected one (an honest non-answer is not cheating).
    assert malformed <= milestone_reward(outcome, margin=margin, values=values)
    assert milestone_reward(rejected, margin=margin, values=values) <= malformed
