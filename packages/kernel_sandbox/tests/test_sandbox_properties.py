"""Property-based checks: honest kernels pass on drawn sizes; shape-hard-coding ones fail small."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.kernel_sandbox.properties import (
    Case,
    above_visible_case,
    assert_candidate_matches,
    case_strategy,
    check_candidate,
)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(backend="cpu", workers=1, trials=2)) as sb:
        yield sb


def _task(name: str):
    return next(t for t in builtin_tasks() if t.name == name)


def test_honest_solutions_hold_on_drawn_sizes_and_distributions(sandbox):
    for name in ("relu", "softmax", "row_sum"):
        task = _task(name)
        report = assert_candidate_matches(sandbox, task, task.solutions["cpu"], max_examples=8)
        assert report.passed and report.examples >= 9
        assert report.above_visible is not None and "one above the visible" in str(report)


def test_hard_coded_shapes_fail_with_a_small_counterexample(sandbox):
    softmax = _task("softmax")
    # Reads the row length from the visible size instead of the input: wrong on other sizes.
    cheat = softmax.solutions["cpu"].replace("x.shape[-1]", "2048")
    assert cheat != softmax.solutions["cpu"]
    report = check_candidate(sandbox, softmax, cheat, max_examples=15)
    assert not report.passed
    assert report.counterexample is not None and report.result is not None
    assert report.counterexample.sizes["DIM"] != 2048
    assert report.result.status in ("incorrect", "runtime_error")
    assert "DIM" in str(report)
    with pytest.raises(AssertionError, match="candidate fails with sizes"):
        assert_candidate_matches(sandbox, softmax, cheat, max_examples=15)


def test_a_size_hard_coded_from_the_visible_problem_fails_just_above_it(sandbox):
    relu = _task("relu")
    # Correct on every size up to the visible element count (64 x 4096), which it hard-codes;
    # the drawn sizes never exceed it, the case above the visible sizes does.
    cheat = relu.solutions["cpu"].replace("x.numel())", "min(x.numel(), 262144))")
    assert cheat != relu.solutions["cpu"]
    report = check_candidate(sandbox, relu, cheat, max_examples=10)
    assert not report.passed, str(report)
    assert report.found_by == "above_visible" and report.examples == 2  # above, then visible
    assert report.counterexample == Case({"BATCH": 65, "DIM": 4097})
    assert report.result is not None and report.result.status == "incorrect"
    assert "hard_coded_size" in report.result.flags and not report.result.correct
    assert "(above the visible sizes, which pass: hard-coded?)" in str(report)
    # Without that case, today's draws pass it.
    assert check_candidate(sandbox, relu, cheat, max_examples=10, above_visible=False).passed


def test_the_case_above_the_visible_sizes():
    relu = _task("relu")
    assert above_visible_case(relu, backend="cpu") == Case({"BATCH": 65, "DIM": 4097})
    assert above_visible_case(relu, names=["DIM"]) == Case({"DIM": 4097})


@given(data=st.data())
@settings(max_examples=30, deadline=None)
def test_strategy_respects_names_and_bounds(data):
    relu = _task("relu")
    case = data.draw(case_strategy(relu, names=["DIM"], max_scale=0.01))
    assert isinstance(case, Case) and set(case.sizes) == {"DIM"}
    assert 1 <= case.sizes["DIM"] <= 41  # 4096 * 0.01, or one of the small odd values


def test_strategy_rejects_unknown_sizes_and_distributions():
    relu = _task("relu")
    with pytest.raises(ValueError, match="no module-level integer"):
        case_strategy(relu, names=["NOPE"])
    with pytest.raises(ValueError, match="distributions"):
        case_strategy(relu, distributions=["uniform"])


def test_a_kernel_that_fails_only_sometimes_is_a_failed_report_not_an_error(sandbox):
    """Half its evaluations leave half the output unwritten: when hypothesis's replay of the
    failing case passes, the report still fails (flagged ``flaky``) and nothing raises."""
    relu = _task("relu")
    racy = relu.solutions["cpu"].replace(
        "relu(out, x, x.numel())",
        "relu(out, x, x.numel() if __import__('os').urandom(1)[0] < 128 else x.numel() // 2)",
    )
    assert racy != relu.solutions["cpu"]
    for seed in range(3):
        report = check_candidate(
            sandbox, relu, racy, max_examples=6, above_visible=False, seed=seed
        )
        assert not report.passed and report.found_by == "drawn", str(report)
        assert report.result is not None and not report.result.correct
