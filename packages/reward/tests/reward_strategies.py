"""A minimal `EvalOutcome` and the hypothesis strategies the reward tests share."""

import dataclasses

from hypothesis import strategies as st

from cuda_agent.reward import Baseline, MilestoneValues, TieredValues


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A minimal `EvalOutcome`: a frozen dataclass satisfies the protocol structurally."""

    correct: bool = True
    flags: tuple[str, ...] = ()
    candidate_time_ms: float | None = None
    eager_time_ms: float | None = None
    compile_time_ms: float | None = None
    candidate_time_spread_ms: float | None = None
    eager_time_spread_ms: float | None = None
    compile_time_spread_ms: float | None = None


times = st.floats(min_value=1e-3, max_value=1e3)
spreads = st.none() | st.floats(min_value=0.0, max_value=10.0)
margins = st.floats(min_value=0.0, max_value=0.5)
baselines: st.SearchStrategy[Baseline] = st.sampled_from(("eager", "compile"))
outcomes = st.builds(
    Outcome,
    correct=st.booleans(),
    flags=st.lists(st.sampled_from(["reference_op_called", "side_stream"]), max_size=2).map(tuple),
    candidate_time_ms=st.none() | times,
    eager_time_ms=st.none() | times,
    compile_time_ms=st.none() | times,
    candidate_time_spread_ms=spreads,
    eager_time_spread_ms=spreads,
    compile_time_spread_ms=spreads,
)
good_outcomes = outcomes.map(lambda o: dataclasses.replace(o, correct=True, flags=()))
"""Correct and unflagged: the only outcomes that can earn more than a failure."""
honest_failures = outcomes.map(lambda o: dataclasses.replace(o, correct=False, flags=()))
"""Incorrect and unflagged: a candidate that failed without cheating."""
rejected_outcomes = outcomes.map(
    lambda o: dataclasses.replace(o, flags=(*o.flags, "timer_patched"))
)
"""Flagged by an anti-cheat check, whatever else was measured (even 'correct' and fast)."""
bad_outcomes = st.one_of(honest_failures, rejected_outcomes)

ordered_values = st.lists(st.floats(min_value=-10, max_value=10), min_size=4, max_size=4).map(
    lambda vs: MilestoneValues(*sorted(vs))
)


@st.composite
def tiered_values(draw: st.DrawFn) -> TieredValues:
    """Any valid `TieredValues`: ordered values, strictly increasing positive tier speedups."""
    n_tiers = draw(st.integers(min_value=0, max_value=6))
    ordered = sorted(draw(st.lists(st.floats(-10, 10), min_size=4 + n_tiers, max_size=4 + n_tiers)))
    speedups = sorted(
        draw(st.lists(st.floats(0.1, 10.0), min_size=n_tiers, max_size=n_tiers, unique=True))
    )
    rejected, compile_fail, incorrect, slower = ordered[:4]
    return TieredValues(
        rejected=rejected,
        compile_fail=compile_fail,
        incorrect=incorrect,
        slower=slower,
        tier_speedups=tuple(speedups),
        tier_values=tuple(ordered[4:]),
    )


@st.composite
def log_speedup_ranges(draw: st.DrawFn) -> tuple[float, float, float]:
    """(failure, min_log_speedup, max_log_speedup) with failure <= min < max."""
    failure, low, high = sorted(draw(st.lists(st.floats(-10, 10), min_size=3, max_size=3)))
    if low == high:
        high = low + 1.0
    return failure, low, high


@st.composite
def within_noise(draw: st.DrawFn) -> Outcome:
    """A correct outcome nominally faster than both baselines, but by less than the noise.

    `t < t0`, yet `t + s > t0 - s0` against each baseline: the claimed speedup disappears when
    the candidate sits at the slow end of its noise and the baseline at the fast end.
    """
    t0 = draw(st.floats(1e-2, 1e2))
    t = t0 * (1.0 - draw(st.floats(0.01, 0.9)))
    noise = (t0 - t) * (1.0 + draw(st.floats(1e-3, 2.0)))
    share = draw(st.floats(0.0, 1.0))
    return Outcome(
        candidate_time_ms=t,
        eager_time_ms=t0,
        compile_time_ms=t0,
        candidate_time_spread_ms=share * noise,
        eager_time_spread_ms=(1.0 - share) * noise,
        compile_time_spread_ms=(1.0 - share) * noise,
    )
