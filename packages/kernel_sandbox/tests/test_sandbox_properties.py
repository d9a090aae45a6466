"""Property-based checks: honest kernels pass on drawn sizes; shape-hard-coding ones fail small."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.kernel_sandbox.properties import (
    Case,
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
        assert report.passed and report.examples >= 8


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
