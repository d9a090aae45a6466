"""Laws of the trajectory aggregations."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuda_agent.reward import best_turn, discounted_returns, discounted_sum, last_turn

rewards = st.lists(st.floats(min_value=-3, max_value=3), min_size=1, max_size=20)
gammas = st.floats(min_value=0.0, max_value=1.0)


@given(rewards_t=rewards)
def test_last_and_best(rewards_t: list[float]) -> None:
    assert last_turn(rewards_t) == rewards_t[-1]
    assert best_turn(rewards_t) == max(rewards_t)
    assert best_turn(rewards_t) >= last_turn(rewards_t)


@given(rewards_t=rewards, gamma=gammas)
def test_discounted_sum_recursion(rewards_t: list[float], gamma: float) -> None:
    g0 = discounted_sum(rewards_t, gamma)
    assert math.isclose(
        g0, rewards_t[0] + gamma * discounted_sum(rewards_t[1:], gamma), abs_tol=1e-9
    )
    expected = sum(gamma**t * r for t, r in enumerate(rewards_t))
    assert math.isclose(g0, expected, rel_tol=1e-9, abs_tol=1e-9)


@given(rewards_t=rewards)
def test_discounted_sum_limits(rewards_t: list[float]) -> None:
    assert math.isclose(discounted_sum(rewards_t, 1.0), math.fsum(rewards_t), abs_tol=1e-9)
    assert discounted_sum(rewards_t, 0.0) == rewards_t[0]
    assert discounted_sum([], 0.4) == 0.0


@given(rewards_t=rewards, gamma=gammas)
def test_discounted_returns(rewards_t: list[float], gamma: float) -> None:
    returns_t = discounted_returns(rewards_t, gamma)
    assert len(returns_t) == len(rewards_t)
    assert returns_t[-1] == rewards_t[-1]
    for t in range(len(rewards_t)):
        assert math.isclose(returns_t[t], discounted_sum(rewards_t[t:], gamma), abs_tol=1e-12)


def test_user_mistakes_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        last_turn([])
    with pytest.raises(ValueError, match="empty"):
        best_turn([])
    with pytest.raises(ValueError, match="gamma"):
        discounted_sum([1.0], 1.5)


@given(rewards_t=rewards, gamma=gammas)
def test_inputs_are_left_unchanged(rewards_t: list[float], gamma: float) -> None:
    before = list(rewards_t)
    last_turn(rewards_t)
    best_turn(rewards_t)
    discounted_sum(rewards_t, gamma)
    discounted_returns(rewards_t, gamma)
    assert rewards_t == before
    assert discounted_returns(tuple(rewards_t), gamma) == discounted_returns(rewards_t, gamma)
