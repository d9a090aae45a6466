"""Bootstrap intervals over tasks: hand-checked cases, the per-task values of each metric, and
the laws (hypothesis)."""

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cuda_agent.reward import (
    Interval,
    TaskOutcome,
    bootstrap_mean,
    faster_than,
    intervals,
    mean_pass_at_k,
    paired_bootstrap,
    paired_gains,
    pass_rate,
    renamed_keys,
    right_of_n,
    task_values,
)

# CI shares 2 cores with other test processes: generation can be slow, never wrong. Few
# resamples keep each example cheap; the laws hold for any number.
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60)
FAST = {"resamples": 200}

values = st.lists(
    st.floats(min_value=-10, max_value=10, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=40,
)
shares = st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=2, max_size=40)
seeds = st.integers(min_value=0, max_value=2**32)
confidences = st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99])


def test_a_known_sample_has_the_interval_its_formula_gives() -> None:
    got = bootstrap_mean([0.0, 1.0] * 50, seed=3)
    assert got.estimate == 0.5 and got.confidence == 0.95
    # n = 100 coin flips: the mean's standard error is 0.05, the 95% interval about +-0.1
    assert 0.38 < got.low < 0.45 and 0.55 < got.high < 0.62
    assert not Interval(0.1, -0.1, 0.3).excludes_zero and Interval(0.2, 0.05, 0.3).excludes_zero
    assert Interval(-0.2, -0.3, -0.01).excludes_zero
    assert got.to_dict() == {"estimate": 0.5, "low": got.low, "high": got.high}


def test_a_gain_the_size_of_the_tasks_is_significant_and_noise_is_not() -> None:
    before = [0.0] * 64
    assert paired_bootstrap(before, [1.0] * 20 + [0.0] * 44).excludes_zero
    assert not paired_bootstrap(before, [1.0] + [0.0] * 63).excludes_zero
    # one task up, one down: no gain
    assert paired_bootstrap([1.0, 0.0] * 8, [0.0, 1.0] * 8).estimate == 0.0


def test_bad_input_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_mean([])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_mean([1.0], confidence=1.0)
    with pytest.raises(ValueError, match="finite"):
        bootstrap_mean([1.0, math.nan])
    with pytest.raises(ValueError, match="same tasks"):
        paired_bootstrap([1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="in one only: b"):
        paired_gains([{"task": "a", "correct": True}],
                     [{"task": "a", "correct": True}, {"task": "b", "correct": False}],
                     ["pass_rate"])  # fmt: skip
    with pytest.raises(ValueError, match="unknown metric"):
        task_values([TaskOutcome("a", True)], "speed")


ROWS = [
    {"task": "a", "correct": True, "speedup_vs_eager": 2.0, "samples": 4, "samples_correct": 2,
     "samples_fast_1": 1},
    {"task": "b", "correct": True, "speedup_vs_eager": 0.8, "samples": 4, "samples_correct": 4,
     "samples_fast_1": 0},
    {"task": "c", "correct": False, "speedup_vs_eager": None, "samples": 4, "samples_correct": 0,
     "samples_fast_1": 0},
]  # fmt: skip


def test_each_metric_is_the_mean_of_its_task_values() -> None:
    assert task_values(ROWS, "pass_at_1") == [0.5, 1.0, 0.0]
    assert sum(task_values(ROWS, "pass_at_2")) / 3 == pytest.approx(mean_pass_at_k(ROWS, 2))
    assert sum(task_values(ROWS, "pass_rate")) / 3 == pass_rate(ROWS)
    assert sum(task_values(ROWS, "fast_1")) / 3 == faster_than(ROWS, "eager")
    assert task_values(ROWS, "fast_1_at_1") == [0.25, 0.0, 0.0]
    got = intervals(ROWS, ["pass_at_1", "fast_1"], **FAST)
    assert got["pass_at_1"].estimate == 0.5 and got["fast_1"].estimate == 1 / 3
    # one greedy sample: the per-sample share is read from the row's verdict
    greedy = [TaskOutcome("a", True, 1.5, samples=1, samples_correct=1),
              TaskOutcome("b", True, 0.9, samples=1, samples_correct=1)]  # fmt: skip
    assert task_values(greedy, "fast_1_at_1") == [1.0, 0.0]
    with pytest.raises(ValueError, match="evaluate it again"):
        task_values([TaskOutcome("a", True, 1.5, samples=2, samples_correct=1)],
                    "fast_1_at_1")  # fmt: skip


def test_a_row_of_an_old_run_gives_its_per_sample_count_under_the_old_name() -> None:
    old = [{k.replace("samples_fast_1", "samples_faster_than_eager"): v for k, v in r.items()}
           for r in ROWS]  # fmt: skip
    assert task_values(old, "fast_1_at_1") == task_values(ROWS, "fast_1_at_1")
    assert renamed_keys({"faster_than_eager": 0.5, "fast_1_compile": 0.1}) == {
        "fast_1": 0.5, "fast_1_compile": 0.1}  # fmt: skip
    both = {"fast_1": 0.5, "faster_than_eager": 0.2}  # the new name wins; the old is left
    assert renamed_keys(both) == both


def test_paired_gains_match_tasks_by_name_whatever_their_order() -> None:
    after = [dict(r, samples_correct=4) for r in reversed(ROWS)]
    gains = paired_gains(ROWS, after, ["pass_at_1", "pass_rate"], **FAST)
    assert gains["pass_at_1"].estimate == pytest.approx((0.5 + 0.0 + 1.0) / 3)
    assert gains["pass_rate"].estimate == 0.0 and gains["pass_rate"].high == 0.0


@RELAXED
@given(values, seeds, confidences)
def test_the_interval_holds_the_estimate_and_lies_within_the_sample(
    sample: list[float], seed: int, confidence: float
) -> None:
    got = bootstrap_mean(sample, seed=seed, confidence=confidence, **FAST)
    assert got.low <= got.estimate <= got.high
    ulp = 1e-12 * max(1.0, *map(abs, sample))  # a mean of equal floats can round up a bit
    assert min(sample) - ulp <= got.low and got.high <= max(sample) + ulp
    assert got.estimate == pytest.approx(math.fsum(sample) / len(sample))


@RELAXED
@given(st.floats(min_value=-5, max_value=5, allow_nan=False), st.integers(1, 50), seeds)
def test_a_constant_sample_has_a_zero_width_interval(value: float, n: int, seed: int) -> None:
    got = bootstrap_mean([value] * n, seed=seed, **FAST)
    assert got.low == got.estimate == got.high


@RELAXED
@given(values, seeds)
def test_the_same_seed_gives_the_same_interval(sample: list[float], seed: int) -> None:
    assert bootstrap_mean(sample, seed=seed, **FAST) == bootstrap_mean(sample, seed=seed, **FAST)


@RELAXED
@given(values, seeds)
def test_a_higher_confidence_never_gives_a_narrower_interval(
    sample: list[float], seed: int
) -> None:
    narrow = bootstrap_mean(sample, seed=seed, confidence=0.8, **FAST)
    wide = bootstrap_mean(sample, seed=seed, confidence=0.99, **FAST)
    assert wide.low <= narrow.low and narrow.high <= wide.high


@RELAXED
@given(shares, seeds)
def test_identical_evaluations_gain_zero_with_interval_zero(sample: list[float], seed: int) -> None:
    got = paired_bootstrap(sample, list(sample), seed=seed, **FAST)
    assert (got.estimate, got.low, got.high) == (0.0, 0.0, 0.0) and not got.excludes_zero


@RELAXED
@given(shares, shares, seeds)
def test_swapping_the_sides_negates_the_gain(before: list[float], after: list[float],
                                            seed: int) -> None:  # fmt: skip
    n = min(len(before), len(after))
    before, after = before[:n], after[:n]
    forward = paired_bootstrap(before, after, seed=seed, **FAST)
    backward = paired_bootstrap(after, before, seed=seed, **FAST)
    assert forward.estimate == pytest.approx(-backward.estimate, abs=1e-12)
    assert forward.low == pytest.approx(-backward.high, abs=1e-12)
    assert forward.high == pytest.approx(-backward.low, abs=1e-12)


@RELAXED
@given(st.lists(st.integers(-3, 3), min_size=2, max_size=30), seeds)
def test_negating_the_sample_negates_the_interval(sample: list[int], seed: int) -> None:
    """Exact on integers (sums of small integers are exact in floating point)."""
    up = bootstrap_mean([float(v) for v in sample], seed=seed, **FAST)
    down = bootstrap_mean([float(-v) for v in sample], seed=seed, **FAST)
    assert (down.estimate, down.low, down.high) == (-up.estimate, -up.high, -up.low)


@RELAXED
@given(shares, seeds)
def test_a_gain_on_every_task_is_significant(sample: list[float], seed: int) -> None:
    assume(max(sample) < 1.0)
    after = [min(1.0, v + 0.5) for v in sample]
    assert paired_bootstrap(sample, after, seed=seed, **FAST).excludes_zero


def _counts(correct: list[int], n: int = 4) -> list[dict]:
    return [{"task": f"t{i}", "samples": n, "samples_correct": c, "correct": c > 0}
            for i, c in enumerate(correct)]  # fmt: skip


def test_a_gain_of_zero_that_moved_tasks_both_ways_says_so() -> None:
    """Two tasks each way between 0 and 4 of 4 leave pass@1 where it was; ``right_of_n``
    shows the polarisation."""
    before, after = _counts([2, 2, 2, 2, 4]), _counts([0, 0, 4, 4, 4])
    assert paired_gains(before, after, ["pass_at_1"], **FAST)["pass_at_1"].estimate == 0.0
    got = right_of_n(before, after)
    assert got == {"samples": 4, "before": [0, 0, 4, 0, 1], "after": [2, 0, 0, 0, 3],
                   "up": 2, "down": 2, "same": 1, "moves": {"2->0": 2, "2->4": 2, "4->4": 1}}  # fmt: skip


def test_right_of_n_needs_one_n_above_one_and_the_same_tasks() -> None:
    assert right_of_n(_counts([1, 0], n=1), _counts([1, 1], n=1)) is None  # greedy: pass@1 says it
    mixed = [*_counts([1]), {"task": "x", "samples": 2, "samples_correct": 1, "correct": True}]
    assert right_of_n(mixed, mixed) is None
    with pytest.raises(ValueError, match="in one only: t2"):
        right_of_n(_counts([1, 2]), _counts([1, 2, 3]))


@RELAXED
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=40))
def test_right_of_n_accounts_for_every_task_once(pairs: list[tuple[int, int]]) -> None:
    got = right_of_n(_counts([b for b, _ in pairs]), _counts([a for _, a in pairs]))
    assert got is not None
    assert sum(got["before"]) == sum(got["after"]) == len(pairs) == sum(got["moves"].values())
    assert got["up"] + got["down"] + got["same"] == len(pairs)
    # the counts' mean over tasks is pass@1 times n, on each side
    assert sum(c * t for c, t in enumerate(got["after"])) == sum(a for _, a in pairs)
