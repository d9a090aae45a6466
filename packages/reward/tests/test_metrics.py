"""The benchmark metrics against hand-computed values, and their laws (hypothesis)."""

import itertools
import json
import math
from math import comb

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda_agent.reward import (
    TaskOutcome,
    fast_p,
    faster_than,
    geomean_speedup,
    mean_pass_at_k,
    pass_at_k,
    pass_rate,
    summary,
)

# CI shares 2 cores with other test processes: generation can be slow, never wrong.
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Four tasks: a: correct, 2x eager, 0.5x compile; b: correct, 0.8x eager, compile unmeasured;
# c: wrong (its speedup is no speedup); d: correct, 1.5x eager, 1.2x compile.
ROWS = [
    TaskOutcome("a", True, 2.0, 0.5, samples=4, samples_correct=2),
    TaskOutcome("b", True, 0.8, None, samples=4, samples_correct=4),
    TaskOutcome("c", False, 3.0, 3.0, samples=4, samples_correct=0),
    {
        "task": "d",
        "correct": True,
        "speedup_vs_eager": 1.5,
        "speedup_vs_compile": 1.2,
        "samples": 4,
        "samples_correct": 1,
        "status": "ok",
    },
]


def test_hand_computed_values() -> None:
    assert pass_rate(ROWS) == 0.75
    assert faster_than(ROWS, "eager") == 0.5  # a, d
    assert faster_than(ROWS, "compile") == 0.25  # d (b unmeasured, c wrong)
    assert fast_p(ROWS, 0) == 0.75 and fast_p(ROWS, 0, key="compile") == 0.75
    assert fast_p(ROWS, 0.5) == 0.75  # a 2.0, b 0.8, d 1.5
    assert fast_p(ROWS, 0.8) == 0.5  # strictly greater: b's 0.8 is out
    assert fast_p(ROWS, 1.5) == 0.25 and fast_p(ROWS, 2) == 0.0
    assert geomean_speedup(ROWS, "eager") == pytest.approx((2.0 * 0.8 * 1.5) ** (1 / 3))
    assert geomean_speedup(ROWS, "compile") == pytest.approx(math.sqrt(0.5 * 1.2))
    # pass@1 = c/n per task; pass@2 = 1 - C(n-c, 2)/C(4, 2): a 1 - 1/6, b 1, c 0, d 1 - 3/6.
    assert mean_pass_at_k(ROWS, 1) == pytest.approx((0.5 + 1 + 0 + 0.25) / 4)
    assert mean_pass_at_k(ROWS, 2) == pytest.approx((5 / 6 + 1 + 0 + 0.5) / 4)


def test_summary_has_exactly_the_documented_keys_and_round_trips_through_json() -> None:
    s = summary(ROWS)
    assert set(s) == {"pass_rate", "fast_1", "fast_1_compile",
                      "geomean_speedup_vs_eager", "geomean_speedup_vs_compile", "fast_p",
                      "fast_p_compile", "pass_at_k", "tasks"}  # fmt: skip
    assert list(s["fast_p"]) == ["0", "0.5", "0.8", "1", "1.5", "2"]
    assert s["fast_p"]["1"] == s["fast_1"] == 0.5
    assert s["fast_p_compile"] == {"0": 0.75, "0.5": 0.25, "0.8": 0.25, "1": 0.25, "1.5": 0.0,
                                   "2": 0.0}  # fmt: skip
    assert list(s["pass_at_k"]) == ["1", "2"]  # the default ks every task has samples for
    assert s["tasks"] == 4 and json.loads(json.dumps(s)) == s
    assert list(summary(ROWS, ks=[3])["pass_at_k"]) == ["3"]
    with pytest.raises(ValueError, match="1 <= k <= n"):
        summary(ROWS, ks=[5])


def test_no_rows_and_no_correct_kernel() -> None:
    empty = summary([])
    assert empty["pass_rate"] == 0.0 and empty["tasks"] == 0 and empty["pass_at_k"] == {}
    assert empty["geomean_speedup_vs_eager"] is None
    wrong = [TaskOutcome("x", False, 2.0, 2.0)]
    assert geomean_speedup(wrong) is None and fast_p(wrong, 0) == 0.0


def test_task_outcome_round_trips_and_rejects_bad_counts() -> None:
    row = TaskOutcome("a", True, 1.25, None, samples=3, samples_correct=2)
    assert TaskOutcome.from_dict(json.loads(json.dumps(row.to_dict()))) == row
    with pytest.raises(ValueError, match="samples_correct"):
        TaskOutcome("a", True, samples=1, samples_correct=2)
    with pytest.raises(ValueError, match="key must be"):
        faster_than(ROWS, "inductor")
    with pytest.raises(ValueError, match="p must be"):
        faster_than(ROWS, "eager", -1)


def test_pass_at_k_edge_cases() -> None:
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(5, 3, 3) == 1.0  # n - c < k: any k samples include a pass
    assert pass_at_k(10, 2, 3) == pytest.approx(1 - comb(8, 3) / comb(10, 3))
    # Stable where the binomials are huge (C(2000, 1000) overflows a float).
    assert pass_at_k(2000, 1, 1000) == pytest.approx(0.5)
    for n, c, k in [(0, 0, 1), (3, 4, 1), (3, 1, 0), (3, 1, 4)]:
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


speedups = st.none() | st.floats(min_value=1e-3, max_value=1e3)


@st.composite
def outcomes(draw: st.DrawFn) -> TaskOutcome:
    n = draw(st.integers(1, 12))
    c = draw(st.integers(0, n))
    return TaskOutcome(draw(st.text(max_size=4)), c > 0, draw(speedups), draw(speedups), n, c)


rows_st = st.lists(outcomes(), max_size=12)
ps_st = st.floats(min_value=0.0, max_value=1e3)


@RELAXED
@given(rows_st, ps_st, ps_st, st.sampled_from(["eager", "compile"]))
def test_fast_p_is_non_increasing_in_p_and_fast_0_is_the_pass_rate(rows, p, q, key) -> None:
    low, high = sorted((p, q))
    assert faster_than(rows, key, low) >= faster_than(rows, key, high)
    assert faster_than(rows, key, 0) == pass_rate(rows)
    assert 0.0 <= faster_than(rows, key, high) <= 1.0


@RELAXED
@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_pass_at_k_is_a_probability_monotone_in_k_and_c_over_n_at_1(nc) -> None:
    n, c = nc
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)
    values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(values))


@RELAXED
@given(rows_st)
def test_geomean_lies_between_the_least_and_largest_counted_speedup(rows) -> None:
    counted = [r.speedup_vs_eager for r in rows if r.correct and r.speedup_vs_eager is not None]
    g = geomean_speedup(rows)
    if not counted:
        assert g is None
    else:
        assert g is not None and min(counted) * (1 - 1e-9) <= g <= max(counted) * (1 + 1e-9)
