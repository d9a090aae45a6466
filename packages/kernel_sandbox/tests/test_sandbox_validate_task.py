"""``validate_task``: tasks that an answer computing nothing would pass are reported (CPU
backend, real reference workers)."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.kernel_sandbox import (
    Deadlines,
    SandboxConfig,
    Task,
    TaskValidation,
    builtin_tasks,
    task_from_source,
    validate_task,
    validate_tasks,
)
from cuda_agent.kernel_sandbox._reference.trivial_answers import _Judge

TEMPLATE = """
import torch
from torch import nn

N = 512
CPU_SIZES = {{"N": 256}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(N))

    def forward(self, x):
        {forward}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return []
"""

# An output near zero is constant and the same for all inputs too, at the tolerance.
TRIVIAL = {0: {"near_zero_output", "constant_output", "input_independent_output"}}
# name -> (forward body, get_inputs() body, the finding codes expected per output index)
CASES: dict[str, tuple[str, str, dict[int, set[str]]]] = {
    "honest": ("return torch.relu(x)", "[torch.randn(N)]", {}),
    "zeros": ("return torch.zeros_like(x)", "[torch.randn(N)]", TRIVIAL),
    "three": (
        "return x * 0 + 3",
        "[torch.randn(N)]",
        {0: {"constant_output", "input_independent_output"}},
    ),
    "tiny": ("return x * 1e-6", "[torch.randn(N)]", TRIVIAL),
    # 1e-3 * randn: near zero at atol 1e-2 (the default), not at 1e-4 (test_sandbox_cli.py)
    "milli": ("return x * 1e-3", "[torch.randn(N)]", TRIVIAL),
    "parameter": (
        "return self.weight + 0 * x",
        "[torch.randn(N)]",
        {0: {"input_independent_output"}},
    ),
    # one value per draw, which depends on the inputs: constant, not input-independent
    "broadcast_sum": (
        "return x.sum() * torch.ones_like(x)",
        "[torch.randn(N)]",
        {0: {"constant_output"}},
    ),
    "scalar": ("return x.sum()", "[torch.randn(N)]", {}),  # one element is not a constant answer
    "fixed_inputs": (
        "return x * 2",
        "[torch.arange(N, dtype=torch.float32)]",
        {0: {"input_independent_output"}},
    ),
    "second_output": (
        "return x * 2, torch.full_like(x, 5.0)",
        "[torch.randn(N)]",
        {1: {"constant_output", "input_independent_output"}},
    ),
    # zero at the CPU size (N = 256) only: found only if the CPU sizes are applied
    "zero_at_cpu_size": ("return x * float(N != 256)", "[torch.randn(N)]", TRIVIAL),
    # randn inputs: about half are negative, so the log has NaNs (on every draw)
    "log_of_negatives": ("return torch.log(x)", "[torch.randn(N)]", {0: {"non_finite_output"}}),
    "overflows": ("return torch.exp(x * 200.0)", "[torch.randn(N)]", {0: {"non_finite_output"}}),
    # stochastic forwards (the reference runs in eval mode: dropout only with training=True)
    "dropout": (
        "return nn.functional.dropout(x, p=0.5, training=True)",
        "[torch.randn(N)]",
        {0: {"nondeterministic_output"}},
    ),
    "noise": (
        "return x + torch.rand_like(x)",
        "[torch.randn(N)]",
        {0: {"nondeterministic_output"}},
    ),
    # noise of 5e-3 moves outputs past a tenth of the default tolerance (1e-2): reported
    "small_noise": (
        "return x + 5e-3 * torch.rand_like(x)",
        "[torch.randn(N)]",
        {0: {"nondeterministic_output"}},
    ),
    # a move of 1e-6 between runs is rounding's size (a CPU kernel splitting its work another
    # way, atomics on a GPU): it cannot turn a verdict at atol 1e-2, so it is not reported
    "rounding_noise": ("return x + 1e-6 * torch.rand_like(x)", "[torch.randn(N)]", {}),
    # a generator of its own, seeded in the forward: the same numbers twice, so repeatable
    "seeded_noise": (
        "g = torch.Generator().manual_seed(0); return x + torch.rand(x.shape, generator=g)",
        "[torch.randn(N)]",
        {},
    ),
}
FAILING = {
    "raises": ('raise ValueError("boom")', "[torch.randn(N)]", "ValueError: boom"),
    "segfault": ("import ctypes; ctypes.string_at(0)", "[torch.randn(N)]", "SIGSEGV"),
    "hangs": ("import time; time.sleep(600)", "[torch.randn(N)]", "did not finish within"),
    "bad_inputs": ("return x", "[torch.randn(N, N, -1)]", "get_inputs() failed"),
}


def _task(name: str, forward: str, inputs: str) -> Task:
    return task_from_source(TEMPLATE.format(forward=forward, inputs=inputs), name=name)


@pytest.fixture(scope="module")
def reports() -> dict[str, TaskValidation]:
    """Every case validated in one call (one reference worker, restarted after a crash); the
    failing ones come before honest ones, which must still be judged after them."""
    names = [*FAILING, *CASES]
    tasks = [_task(n, *FAILING[n][:2]) if n in FAILING else _task(n, *CASES[n][:2]) for n in names]
    # A short load deadline bounds the hanging case (the others take well under a second).
    config = SandboxConfig(backend="cpu", deadlines=Deadlines(load=5.0))
    return {r.task: r for r in validate_tasks(tasks, config)}


@pytest.mark.parametrize("name", CASES)
def test_each_trivial_answer_is_found_for_the_right_output(reports, name):
    report = reports[name]
    found: dict[int, set[str]] = {}
    for finding in report.findings:
        assert finding.output is not None and finding.message.startswith(
            f"output {finding.output}:"
        )
        found.setdefault(finding.output, set()).add(finding.code)
    assert found == CASES[name][2], [str(f) for f in report.findings]
    assert report.ok == (not CASES[name][2])


@pytest.mark.parametrize("name", FAILING)
def test_a_failing_reference_is_a_finding_not_an_exception(reports, name):
    report = reports[name]
    assert not report.ok
    assert [f.code for f in report.findings] == ["reference_error"]
    assert FAILING[name][2] in report.findings[0].message


def test_report_records_what_was_run(reports):
    report = reports["fixed_inputs"]
    assert report.backend == "cpu" and report.sizes == {"N": 256}
    assert report.seeds == (1000, 1001, 1002)  # the first trial seeds of an evaluation
    assert (report.atol, report.rtol) == (1e-2, 1e-2)
    assert "same inputs for every seed" in report.findings[0].message
    data = json.loads(report.to_json())
    assert data["ok"] is False and data["findings"][0]["code"] == "input_independent_output"
    assert data["sizes"] == {"N": 256} and data["seeds"] == [1000, 1001, 1002]


def test_every_builtin_task_validates():
    # At the default tolerance, the loosest preset: a trivial answer passing at a tighter one
    # would pass here too.
    reports = validate_tasks(builtin_tasks(), SandboxConfig(backend="cpu"))
    bad = {r.task: [str(f) for f in r.findings] for r in reports if not r.ok}
    assert not bad
    assert len(reports) == len(builtin_tasks())


def test_timing_gives_eager_and_compile_times_or_a_compile_error():
    config = SandboxConfig(backend="cpu", repeats=3, warmup=1)
    honest = _task("honest", *CASES["honest"][:2])
    seen: list[TaskValidation] = []
    timed = validate_tasks([honest], config, timing=True, progress=seen.append)[0]
    untimed = validate_task(honest, config)
    assert seen == [timed]
    assert timed.ok and timed.eager_time_ms is not None and timed.eager_time_ms > 0
    assert timed.compile_time_ms is not None and timed.compile_time_ms > 0
    assert untimed.eager_time_ms is None and untimed.compile_time_ms is None
    assert json.loads(timed.to_json())["eager_time_ms"] == timed.eager_time_ms


def test_validate_task_needs_two_draws():
    with pytest.raises(ValueError, match="draws"):
        validate_task(_task("honest", *CASES["honest"][:2]), SandboxConfig(backend="cpu"), draws=1)


@settings(max_examples=200, deadline=None)
@given(
    value=st.floats(-1e3, 1e3),
    noise=st.lists(st.floats(-0.9, 0.9), min_size=2, max_size=20),
    atol=st.floats(1e-4, 1.0),
    rtol=st.floats(0.0, 0.1),
)
def test_constant_answer_is_found_exactly_when_one_passes(value, noise, atol, rtol):
    """Law: elements within 0.9 * atol of a value admit a constant answer, and the one found
    passes the sandbox's comparison."""
    judge = _Judge(atol, rtol, None)
    want = torch.tensor([value + atol * n for n in noise], dtype=torch.float64)
    found = judge.constant(want)
    assert found is not None
    assert judge.passes(torch.full_like(want, found), want)
    # And none where none can pass: two elements a gap apart admit a common constant only if
    # gap <= 2 * atol + rtol * (|a| + |b|), i.e. gap <= 2 * (atol + rtol * |a|) / (1 - rtol).
    gap = 3 * (atol + rtol * abs(value)) / (1 - rtol)
    assert judge.constant(torch.tensor([value, value + gap], dtype=torch.float64)) is None


def test_a_validator_keeps_its_worker_between_calls_and_survives_a_crash():
    from cuda_agent.kernel_sandbox import TaskValidator

    config = SandboxConfig(backend="cpu", deadlines=Deadlines(load=5.0))
    honest = _task("honest", *CASES["honest"][:2])
    crash = _task("segfault", *FAILING["segfault"][:2])
    with TaskValidator(config) as validate:
        first = validate(honest)
        proc = validate._worker.proc
        assert proc is not None and proc.poll() is None
        assert validate(_task("zeros", *CASES["zeros"][:2])).findings
        assert validate._worker.proc is proc  # the same worker process served both
        assert [f.code for f in validate(crash).findings] == ["reference_error"]
        assert validate(honest) == first  # a new worker after the crash, the same verdict
    with pytest.raises(ValueError, match="draws"):
        TaskValidator(config, draws=1)
