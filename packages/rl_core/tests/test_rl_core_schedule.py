"""``scheduled_lr``: the learning rate of a step, a pure function of the step index."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuda_agent.rl_core import LR_SCHEDULES, scheduled_lr


def test_a_cosine_runs_from_the_peak_to_the_floor() -> None:
    rates = [scheduled_lr("cosine", 3e-3, k, 5, 0.1) for k in range(5)]
    assert rates[0] == pytest.approx(3e-3) and rates[-1] == pytest.approx(3e-4)
    assert rates[2] == pytest.approx(3e-3 * (0.1 + 0.9 * 0.5))  # half way: the mean
    assert all(a > b for a, b in itertools.pairwise(rates))
    assert scheduled_lr("cosine", 3e-3, 9, 5, 0.1) == pytest.approx(3e-4)  # past the end: floor
    assert scheduled_lr("cosine", 3e-3, 0, 1, 0.1) == 3e-3  # one step: the peak
    assert scheduled_lr("cosine", 1.0, 3, 4, 0.0) == 0.0
    assert {scheduled_lr("constant", 3e-3, k, 5, 0.1) for k in range(5)} == {3e-3}


def test_an_unknown_schedule_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown schedule 'linear': one of constant, cosine"):
        scheduled_lr("linear", 3e-3, 1, 5, 0.1)  # type: ignore[arg-type]


@given(
    kind=st.sampled_from(LR_SCHEDULES),
    peak=st.floats(1e-6, 1.0),
    steps=st.integers(1, 5_000),
    step=st.integers(-10, 6_000),
    floor=st.floats(0.0, 1.0),
)
def test_every_rate_lies_between_the_floor_and_the_peak(
    kind: str, peak: float, steps: int, step: int, floor: float
) -> None:
    lr = scheduled_lr(kind, peak, step, steps, floor)  # type: ignore[arg-type]
    assert math.isfinite(lr)
    assert peak * floor * (1 - 1e-12) <= lr <= peak * (1 + 1e-12)
