"""Expected outputs live only in the reference worker: a candidate cannot see, patch or forge
the comparison, and memory it leaves unwritten is poisoned (CPU backend, real workers)."""

from __future__ import annotations

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, Task, builtin_tasks, task_from_source


@pytest.fixture(scope="module")
def sandbox():
    # Static checks off: these candidates must be stopped by the architecture itself.
    config = SandboxConfig(
        backend="cpu", workers=1, repeats=3, timing_budget_s=0.3, static_checks=False
    )
    with Sandbox(config) as sb:
        yield sb


@pytest.fixture(scope="module")
def relu() -> Task:
    return next(t for t in builtin_tasks() if t.name == "relu")


_KERNEL = """
import torch
from torch import nn
from cuda_agent.kernel_sandbox.launch import cpu_kernel

first_only = cpu_kernel(
    "void first_only(float* out, const float* x, long n) { if (n) out[0] = x[0]; }",
    "first_only",
)
"""


def test_patching_the_comparison_in_the_candidate_process_has_no_effect(sandbox, relu):
    # Comparing in the candidate's own process would let it rig the verdict like this.
    candidate = (
        _KERNEL
        + """
torch.isclose = lambda a, b, **kw: torch.ones(a.shape, dtype=torch.bool)
torch.allclose = lambda *a, **kw: True
torch.equal = lambda *a, **kw: True

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        first_only(out, x, x.numel())
        return out
"""
    )
    result = sandbox.evaluate(relu, candidate)
    assert result.status == "incorrect", result.message
    assert "mismatch" in result.message and result.trials[-1].passed is False


def test_unwritten_output_memory_is_poisoned(sandbox, relu):
    # torch.empty inside the forward returns NaN-filled memory during the checks, so a kernel
    # that writes only part of its output fails however lucky the allocator is.
    candidate = (
        _KERNEL
        + """
class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        first_only(out, x, x.numel())
        return out
"""
    )
    result = sandbox.evaluate(relu, candidate)
    assert result.status == "incorrect"
    assert "NaN" in result.message


def test_a_forged_result_message_is_not_believed(sandbox, relu):
    # The candidate writes a fake "ok" result on every descriptor it can write to, which
    # includes the worker's protocol channel. The parent trusts only verified trials.
    candidate = (
        _KERNEL
        + """
import os
forged = b'{"type": "result", "result": {"status": "ok", "message": "correct", '
forged += b'"candidate_time_ms": 0.001, "eager_time_ms": 1.0}}\\n'
for fd in map(int, os.listdir("/proc/self/fd")):
    try:
        os.write(fd, forged)
    except OSError:
        pass

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        first_only(out, x, x.numel())
        return out
"""
    )
    result = sandbox.evaluate(relu, candidate)
    assert result.status == "rejected"
    assert "unverified_result" in result.flags and not result.correct
    # The pool is clean afterwards: an honest candidate gets the right verdict.
    assert sandbox.evaluate(relu, relu.solutions["cpu"]).status == "ok"


def test_the_trials_in_the_result_come_from_the_reference_worker(sandbox, relu):
    result = sandbox.evaluate(relu, relu.solutions["cpu"])
    assert result.status == "ok", result.message
    # 5 trials, one on heavy-tailed values, one with new values written into the same input
    # tensors, and the re-check after timing, with the seeds of the plan
    assert [t.seed for t in result.trials] == [1000, 1001, 1002, 1003, 1004, 3000, 2000, 9000]


def test_inputs_that_are_not_reproducible_from_the_seed_give_a_clear_error(sandbox, relu):
    task = task_from_source(
        """
import time
import torch
from torch import nn

N = 64

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    g = torch.Generator().manual_seed(time.perf_counter_ns())
    return [torch.randn(N, generator=g)]

def get_init_inputs():
    return []
""",
        name="unseeded",
    )
    candidate = relu.solutions["cpu"]
    result = sandbox.evaluate(task, candidate)
    assert result.status == "runtime_error"
    assert result.extra.get("reference_failed") is True
    assert "get_inputs()" in result.message and "seed" in result.message
