"""The milestone reward of CUDA Agent (arXiv 2602.24286) and the format reward."""

import math
from dataclasses import dataclass

from cuda_agent.reward._outcome import EvalOutcome, is_failure


@dataclass(frozen=True)
class MilestoneValues:
    """The reward of each milestone; CUDA Agent uses r in {-1, 1, 2, 3}.

    Must be ordered `fail <= correct <= faster_than_eager <= faster_than_compile` so that a
    better outcome never earns less.
    """

    fail: float = -1.0
    correct: float = 1.0
    faster_than_eager: float = 2.0
    faster_than_compile: float = 3.0

    def __post_init__(self) -> None:
        ordered = (self.fail, self.correct, self.faster_than_eager, self.faster_than_compile)
        if not all(math.isfinite(v) for v in ordered) or list(ordered) != sorted(ordered):
            raise ValueError(
                "MilestoneValues must be finite and ordered fail <= correct <= "
                f"faster_than_eager <= faster_than_compile; got {ordered}"
            )


def is_faster(
    time_ms: float,
    baseline_time_ms: float,
    *,
    margin: float = 0.05,
    time_spread_ms: float = 0.0,
    baseline_spread_ms: float = 0.0,
) -> bool:
    """Whether a time beats a baseline by more than `margin`, beyond the measured noise.

    Rule: `t + s < t0 * (1 - margin) - s0` (strict), with `t`, `s` the candidate's time and
    spread and `t0`, `s0` the baseline's. With zero spreads this is the paper's
    `(t0 - t) / t0 > margin` (CUDA Agent, arXiv 2602.24286); the spreads make the claim hold
    even with the candidate at the slow end of its noise and the baseline at the fast end,
    so a speedup smaller than the noise is not a speedup.

    A non-positive or non-finite time (a failed or bogus measurement) is never faster;
    a NaN or infinite spread (unknown, unbounded noise) never lets a speedup count.
    """
    _check_margin(margin)
    if time_spread_ms < 0 or baseline_spread_ms < 0:
        raise ValueError(
            f"spreads must be >= 0 (got {time_spread_ms}, {baseline_spread_ms}); "
            "pass None to milestone_reward, or 0.0 here, when the noise is unknown"
        )
    if not (0.0 < time_ms < math.inf and 0.0 < baseline_time_ms < math.inf):
        return False
    return time_ms + time_spread_ms < baseline_time_ms * (1.0 - margin) - baseline_spread_ms


def milestone_reward(
    outcome: EvalOutcome,
    *,
    margin: float = 0.05,
    values: MilestoneValues = MilestoneValues(),
    noise_aware: bool = True,
) -> float:
    """The CUDA Agent milestone reward (arXiv 2602.24286, section on reward design).

        r = fail                  if not correct or any anti-cheat flag
            faster_than_compile   if faster than eager and faster than torch.compile
            faster_than_eager     if faster than eager
            correct               otherwise

    "Faster" is `is_faster` with the given `margin` (paper: 5%). With `noise_aware`, the
    times' spreads enter the comparison (a `None` spread counts as 0); without it they are
    ignored. A missing candidate or eager time leaves only the `correct` value; a missing
    compile time makes `faster_than_compile` unreachable. Returns exactly one of `values`.
    """
    _check_margin(margin)
    if is_failure(outcome):
        return values.fail
    time_ms = outcome.candidate_time_ms
    if time_ms is None:
        return values.correct
    time_spread_ms = _spread(outcome.candidate_time_spread_ms, noise_aware)

    def beats(baseline_ms: float | None, baseline_spread_ms: float | None) -> bool:
        return baseline_ms is not None and is_faster(
            time_ms,
            baseline_ms,
            margin=margin,
            time_spread_ms=time_spread_ms,
            baseline_spread_ms=_spread(baseline_spread_ms, noise_aware),
        )

    if not beats(outcome.eager_time_ms, outcome.eager_time_spread_ms):
        return values.correct
    if not beats(outcome.compile_time_ms, outcome.compile_time_spread_ms):
        return values.faster_than_eager
    return values.faster_than_compile


def format_reward(parsed: bool, *, values: MilestoneValues = MilestoneValues()) -> float | None:
    """The reward of an answer from which no candidate could be extracted, or `None`.

        format_reward(False) = values.fail
        format_reward(True)  = None   (no verdict: evaluate the candidate, use milestone_reward)

    A malformed answer earns exactly the failure value: more would teach the policy to dodge
    evaluation by answering malformed, and the paper has no separate format penalty (a
    malformed answer is a failed one). Use as
    `r = format_reward(parsed); r = milestone_reward(outcome) if r is None else r`.
    """
    return None if parsed else values.fail


def _spread(spread_ms: float | None, noise_aware: bool) -> float:
    """A spread to use in `is_faster`: 0 when unknown or when noise is ignored."""
    return spread_ms if noise_aware and spread_ms is not None else 0.0


def _check_margin(margin: float) -> None:
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1) (0.05 means 5% faster), got {margin}")
