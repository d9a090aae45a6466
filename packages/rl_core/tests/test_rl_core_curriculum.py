"""The curriculum's weights (Laplace's rule over each task's last groups) and the weighted pick
without replacement (Efraimidis-Spirakis keys): properties over random inputs, and the pick's
frequencies against the weights."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuda_agent.rl_core import signal_weights, weighted_pick

histories = st.lists(st.lists(st.booleans(), max_size=12), min_size=1, max_size=20)


@given(histories, st.integers(1, 8), st.floats(0.0, 2.0))
def test_weights_follow_the_recent_groups_and_stay_reachable(history, window, floor):
    weights = signal_weights(history, window=window, floor=floor)
    assert len(weights) == len(history)
    for groups, w in zip(history, weights, strict=True):
        recent = groups[-window:]
        assert w == pytest.approx(floor + (sum(recent) + 1) / (len(recent) + 2))
        assert floor < w < floor + 1  # never certain either way
    # one more informative group never lowers a task's weight, an uninformative one never raises it
    more = signal_weights([[*g, True] for g in history], window=window, floor=floor)
    fewer = signal_weights([[*g, False] for g in history], window=window, floor=floor)
    for m, w, f in zip(more, weights, fewer, strict=True):
        assert m >= w - 1e-12 >= f - 2e-12


def test_only_the_window_counts_and_bad_settings_are_refused():
    old_then_new = [False] * 10 + [True] * 4
    assert signal_weights([old_then_new], window=4, floor=0.0) == [5 / 6]
    for bad in ({"window": 0}, {"floor": -0.1}, {"floor": float("nan")}):
        with pytest.raises(ValueError):
            signal_weights([[True]], **bad)


@given(
    st.lists(st.floats(0.0, 10.0), min_size=1, max_size=30),
    st.integers(0, 40),
    st.integers(0, 2**32),
)
def test_a_pick_is_distinct_as_long_as_asked_and_a_function_of_its_draws(weights, count, seed):
    rng = random.Random(seed)
    uniforms = [1.0 - rng.random() for _ in weights]  # in (0, 1]
    picked = weighted_pick(weights, uniforms, count)
    assert len(picked) == min(count, len(weights)) == len(set(picked))
    assert picked == weighted_pick(weights, uniforms, count)
    positive = [i for i, w in enumerate(weights) if w > 0]
    # every positive weight comes before any zero one
    assert picked[: len(positive)] == [i for i in picked if weights[i] > 0][: len(picked)]


def test_a_positive_weight_too_small_for_its_key_still_comes_before_a_zero_one():
    # log(v) / 5e-324 overflows to -inf, the key a zero weight gets (hypothesis found it in CI)
    assert weighted_pick([0.0, 5e-324], [0.5, 0.5], 1) == [1]
    assert weighted_pick([5e-324, 0.0, 5e-324], [0.5, 0.5, 0.5], 3) == [0, 2, 1]


def test_one_pick_follows_the_weights():
    weights = [0.1, 0.5, 1.0, 2.0]
    rng = random.Random(7)
    counts = [0] * len(weights)
    draws = 40_000
    for _ in range(draws):
        counts[weighted_pick(weights, [1.0 - rng.random() for _ in weights], 1)[0]] += 1
    for c, w in zip(counts, weights, strict=True):
        assert c / draws == pytest.approx(w / sum(weights), abs=0.01)


def test_bad_picks_are_refused():
    for weights, uniforms in (([1.0], [0.5, 0.5]), ([-1.0], [0.5]), ([float("inf")], [0.5]),
                              ([1.0], [0.0]), ([1.0], [1.5])):  # fmt: skip
        with pytest.raises(ValueError):
            weighted_pick(weights, uniforms, 1)
