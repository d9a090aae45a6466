"""The sandbox's verdicts on honest, broken and hostile candidates (CPU backend, real workers)."""

from __future__ import annotations

import json

import pytest
import torch

from cuda_agent.kernel_sandbox import (
    Deadlines,
    EvalResult,
    Sandbox,
    SandboxConfig,
    Task,
    builtin_tasks,
    evaluate_solutions,
    task_from_source,
)
from cuda_agent.kernel_sandbox._shared.compare import bits_changed, same_bits
from cuda_agent.kernel_sandbox.candidates import EXAMPLES


@pytest.fixture(scope="module")
def sandbox():
    # Static checks off: these tests are about what the workers do at run time (the static
    # checks would refuse several of these candidates before they run; test_sandbox_static.py).
    config = SandboxConfig(
        backend="cpu", workers=1, repeats=5, timing_budget_s=0.5, static_checks=False
    )
    with Sandbox(config) as sb:
        yield sb


@pytest.fixture(scope="module")
def relu() -> Task:
    return next(t for t in builtin_tasks() if t.name == "relu")


def _module(forward_body: str, prelude: str = "") -> str:
    return (
        "import torch\nfrom torch import nn\n"
        + prelude
        + "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
        + "".join(f"        {line}\n" for line in forward_body.strip().splitlines())
    )


def test_honest_solution_is_ok_and_timed(sandbox, relu):
    result = sandbox.evaluate(relu, relu.solutions["cpu"])
    assert result.status == "ok", result.message
    assert result.correct and result.flags == ()
    # static checks are off in this module's sandbox, runtime checks on: 5 trials, one on
    # heavy-tailed values, one in place, then one more on fresh inputs after timing
    assert len(result.trials) == 8 and all(t.passed for t in result.trials)
    assert result.max_abs_error == 0.0
    assert result.candidate_time_ms > 0 and result.eager_time_ms > 0
    assert result.speedup_vs_eager == pytest.approx(result.eager_time_ms / result.candidate_time_ms)
    assert result.compile_time_ms is None  # not timed on the CPU backend by default


def test_every_builtin_solution_passes_in_the_sandbox(sandbox):
    tasks = builtin_tasks()
    for task, result in zip(tasks, evaluate_solutions(sandbox, tasks), strict=True):
        assert result.status == "ok", f"{task.name}: {result.message}"


def test_pytorch_only_candidate_is_rejected(sandbox, relu):
    # Caught at run time by the operator recorder (the static checks are off here).
    result = sandbox.evaluate(relu, _module("return torch.relu(x)"))
    assert result.status == "rejected"
    assert "torch_compute" in result.flags and "aten.relu" in result.message
    assert not result.correct


def test_a_candidate_that_launches_no_kernel_is_rejected(sandbox, relu):
    # Computes outside PyTorch and outside any kernel of its own (numpy): the launch counter.
    decoy = _module(
        "return torch.from_numpy(numpy.maximum(x.numpy(), 0))", prelude="import numpy\n"
    )
    result = sandbox.evaluate(relu, decoy)
    assert result.status == "rejected" and "no_custom_kernel" in result.flags


def test_wrong_values_are_incorrect_with_errors_reported(sandbox, relu):
    wrong = relu.solutions["cpu"].replace("0.f ? x[i] : 0.f", "0.f ? x[i] : 0.5f")
    result = sandbox.evaluate(relu, wrong)
    assert result.status == "incorrect"
    assert result.max_abs_error == pytest.approx(0.5)
    assert "mismatch" in result.message and "expected 0" in result.message
    assert result.trials and not result.trials[-1].passed


def test_wrong_shape_is_incorrect(sandbox, relu):
    bad = relu.solutions["cpu"].replace("return out", "return out[:, :-1]")
    result = sandbox.evaluate(relu, bad)
    assert result.status == "incorrect"
    assert "shape" in result.message


def test_compile_error_is_trimmed_to_file_and_line(sandbox, relu):
    broken = relu.solutions["cpu"].replace("out[i] = ", "out[i] = undefined_name + ")
    result = sandbox.evaluate(relu, broken)
    assert result.status == "compile_error"
    assert "kernel.c:" in result.message and "undefined_name" in result.message
    assert "/tmp" not in result.message and "Traceback" not in result.message


def test_python_syntax_error_and_missing_model_new(sandbox, relu):
    assert sandbox.evaluate(relu, "def broken(:\n").status == "compile_error"
    result = sandbox.evaluate(relu, "import torch\n")
    assert result.status == "compile_error" and "ModelNew" in result.message


def test_exception_in_forward_is_a_runtime_error_with_candidate_frame(sandbox, relu):
    result = sandbox.evaluate(relu, _module("raise ValueError('boom')"))
    assert result.status == "runtime_error"
    assert "model_new.py, line" in result.message and "ValueError: boom" in result.message


def test_segfault_is_survived_and_pool_keeps_working(sandbox, relu):
    crash = _module("os.kill(os.getpid(), 11)", prelude="import os\n")
    result = sandbox.evaluate(relu, crash)
    assert result.status == "runtime_error" and "SIGSEGV" in result.message
    honest = sandbox.evaluate(relu, relu.solutions["cpu"])
    assert honest.status == "ok", f"{honest.status} {honest.flags}: {honest.message}"


def test_exit_calls_are_survived(sandbox, relu):
    for body in ("sys.exit(0)", "os._exit(3)"):
        result = sandbox.evaluate(relu, _module(body, prelude="import os, sys\n"))
        assert result.status == "runtime_error", body
    honest = sandbox.evaluate(relu, relu.solutions["cpu"])
    assert honest.status == "ok", f"{honest.status} {honest.flags}: {honest.message}"


def test_input_mutation_is_rejected(sandbox, relu):
    mutating = relu.solutions["cpu"].replace("relu(out, x, x.numel())", "relu(x, x, x.numel())")
    result = sandbox.evaluate(relu, mutating.replace("return out", "return x"))
    assert result.status == "rejected" and "input_mutation" in result.flags


NAN_TASK = """
import torch
from torch import nn

N = 65536


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    x = torch.randn(N)
    x[::97] = float("nan")
    return [x]


def get_init_inputs():
    return []
"""


def test_inputs_holding_nan_are_not_taken_for_modified_ones(sandbox, relu):
    # A NaN differs from itself under torch.equal: a candidate that left such inputs alone was
    # judged to have modified them (on an H200, 2026-12-06, the heavy-tailed trial of a task
    # with 3.6e9 elements drew a NaN). Unchanged means the same bytes.
    task = task_from_source(NAN_TASK, name="double_with_nan")
    double = relu.solutions["cpu"].replace("x[i] > 0.f ? x[i] : 0.f", "x[i] * 2.f")
    result = sandbox.evaluate(task, double, measure_time=False)
    assert result.status == "ok", f"{result.status} {result.flags}: {result.message}"
    writes_nan = double.replace("relu(out, x, x.numel())", "relu(out, x, x.numel()); x[0] = 0")
    result = sandbox.evaluate(task, writes_nan, measure_time=False)  # x[0] was a NaN: written
    assert result.status == "rejected" and "input_mutation" in result.flags
    # the message says what changed, so that a wrong rejection can be told from a right one
    assert "(input 0: 1 of 65536 elements changed, the first at 0: nan -> 0.0)" in result.message


def test_same_bits_is_equality_of_bytes():
    x = torch.tensor([1.0, float("nan"), -0.0, float("inf")])
    assert same_bits(x, x.clone()) and not torch.equal(x, x.clone())
    assert not same_bits(x, torch.tensor([1.0, float("nan"), 0.0, float("inf")]))  # -0.0 -> 0.0
    assert not same_bits(x, x.double()) and not same_bits(x, x[:3])
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.complex64, torch.complex128):
        y = x.to(dtype)
        assert same_bits(y, y.clone())
        z = y.clone()
        z[0] = 2
        assert not same_bits(y, z)
    n = torch.arange(6).reshape(2, 3)
    assert same_bits(n.t(), n.t().clone()) and not same_bits(n, n + 1)
    m = n.t().clone()
    m[2, 1] = 9  # logical (row-major) order of the transposed view: index 5
    assert bits_changed(n.t(), m) == "1 of 6 elements changed, the first at 5: 5 -> 9"
    y = torch.tensor([0.0, 0.0, -0.0])
    assert bits_changed(y, torch.zeros(3)) == "1 of 3 elements changed, the first at 2: -0.0 -> 0.0"


def test_prints_do_not_corrupt_the_protocol(sandbox, relu):
    # Protocol-shaped text on stdout when the module loads (18 KB) and on every forward. The
    # forward's print is short: 18 KB per call is host time outside the kernels, and the decoy
    # check rightly counts it (0.15 ms, at its floor on the loaded CI machine).
    fake = '{"type": "result", "status": "ok"}'
    noisy = f"print({fake!r} * 500)\n" + relu.solutions["cpu"].replace(
        "x = x.contiguous()", f"print({fake!r}); x = x.contiguous()"
    )
    result = sandbox.evaluate(relu, noisy)
    assert result.status == "ok", result.message
    assert all(t.passed for t in result.trials)


def test_hang_hits_the_deadline_and_the_next_job_is_fine(relu):
    config = SandboxConfig(
        backend="cpu", workers=1, repeats=5, deadlines=Deadlines(correctness=3.0)
    )
    with Sandbox(config) as sb:
        result = sb.evaluate(relu, _module("while True:\n    pass"))
        assert result.status == "timeout"
        assert "correctness" in result.message
        assert sb.evaluate(relu, relu.solutions["cpu"]).status == "ok"


def test_evaluate_many_keeps_order(sandbox, relu):
    jobs = [(relu, relu.solutions["cpu"]), (relu, "import torch\n"), (relu, relu.solutions["cpu"])]
    statuses = [r.status for r in sandbox.evaluate_many(jobs)]
    assert statuses == ["ok", "compile_error", "ok"]


def test_result_round_trips_through_json(sandbox, relu):
    result = sandbox.evaluate(relu, relu.solutions["cpu"])
    data = json.loads(result.to_json())
    assert data["status"] == "ok" and data["correct"] is True
    again = EvalResult.from_dict(data)
    assert again == result


def test_candidates_cannot_reach_the_network(relu):
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    probe = _module(
        f"socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\nreturn torch.relu(x)",
        prelude="import socket\n",
    )
    try:
        config = SandboxConfig(
            backend="cpu", workers=1, require_custom_kernel=False, static_checks=False
        )
        with Sandbox(config) as sb:
            result = sb.evaluate(relu, probe)
            if not result.extra.get("network_isolated"):
                pytest.skip("this host allows no private network namespace (needs root)")
            assert result.status == "runtime_error"
            assert "model_new.py" in result.message  # the connect call failed in the candidate
    finally:
        server.close()


def test_host_memory_is_capped_and_the_worker_survives(relu):
    hog = _module("big = torch.empty(6 << 30, dtype=torch.uint8)\nreturn torch.relu(x)")
    config = SandboxConfig(
        backend="cpu",
        workers=1,
        max_memory_bytes=4 << 30,
        require_custom_kernel=False,
        static_checks=False,
    )
    with Sandbox(config) as sb:
        result = sb.evaluate(relu, hog)
        assert result.status == "runtime_error"
        assert "alloc" in result.message.lower() or "memory" in result.message.lower()
        assert sb.evaluate(relu, relu.solutions["cpu"]).status == "ok"


def test_cpu_backend_uses_the_tasks_cpu_sizes(sandbox, relu):
    big = relu.source.replace("BATCH = 4096", "BATCH = 100000").replace(
        'CPU_SIZES = {"BATCH": 64', 'CPU_SIZES = {"BATCH": 3'
    )
    assert "BATCH = 100000" in big and '"BATCH": 3' in big
    task = Task(name="relu_big", source=big)
    # Returns the row count it saw: equal to the reference only if both ran with BATCH = 3.
    probe = relu.solutions["cpu"].replace(
        "return out", "assert x.shape[0] == 3\n        return out"
    )
    assert sandbox.evaluate(task, probe).status == "ok"


@pytest.mark.slow
def test_load_inline_candidates_count_as_custom_kernels(relu):
    config = SandboxConfig(
        backend="cpu",
        workers=1,
        repeats=5,
        deadlines=Deadlines(load=400.0),
        # the decoy must be caught by the launch counter itself
        static_checks=False,
        runtime_checks=False,
    )
    honest_source = (EXAMPLES / "load_inline_cpu.py").read_text()
    decoy = honest_source.replace(
        "return relu_ext.relu_forward(x.contiguous())", "return torch.relu(x)"
    )
    assert decoy != honest_source
    with Sandbox(config) as sb:
        honest = sb.evaluate(relu, honest_source)
        assert honest.status == "ok", honest.message
        result = sb.evaluate(relu, decoy)
        assert result.status == "rejected" and "no_custom_kernel" in result.flags


def test_a_candidate_that_changes_after_warm_up_is_caught(sandbox, relu):
    # Honest for its first calls, then returns zeros: caught by the re-check after timing.
    sneaky = (
        relu.solutions["cpu"]
        .replace(
            "class ModelNew(nn.Module):",
            "CALLS = [0]\n\n\nclass ModelNew(nn.Module):",
        )
        .replace(
            "        x = x.contiguous()",
            "        CALLS[0] += 1\n        if CALLS[0] > 12:\n            return torch.zeros_like(x)\n"
            "        x = x.contiguous()",
        )
    )
    result = sandbox.evaluate(relu, sneaky)
    assert result.status == "rejected"
    assert "changed_after_timing" in result.flags
    assert len(result.trials) == 8 and not result.trials[-1].passed


def test_per_dtype_tolerances_apply_to_that_dtype_only(relu):
    off_by = relu.solutions["cpu"].replace("0.f ? x[i] : 0.f", "0.f ? x[i] + 0.05f : 0.05f")
    strict = SandboxConfig(backend="cpu", workers=1, repeats=5)
    loose = SandboxConfig(
        backend="cpu", workers=1, repeats=5, dtype_tolerances={"float32": (0.1, 0.0)}
    )
    with Sandbox(strict) as sb:
        assert sb.evaluate(relu, off_by).status == "incorrect"
    with Sandbox(loose) as sb:
        assert sb.evaluate(relu, off_by).status == "ok"
    with pytest.raises(ValueError, match="dtype_tolerances"):
        SandboxConfig(dtype_tolerances={"float32": (-1.0, 0.0)})


def test_speedup_ranges_widen_with_the_spreads():
    r = EvalResult(
        status="ok",
        candidate_time_ms=1.0,
        candidate_time_spread_ms=0.1,
        eager_time_ms=2.0,
        eager_time_spread_ms=0.2,
    )
    low, high = r.speedup_vs_eager_range
    assert low == pytest.approx(1.8 / 1.1) and high == pytest.approx(2.2 / 0.9)
    assert low < r.speedup_vs_eager < high
    assert r.speedup_vs_compile_range is None
    assert json.loads(r.to_json())["speedup_vs_eager_range"] == [low, high]


def test_declared_input_configurations_are_all_checked(sandbox, relu):
    softmax = next(t for t in builtin_tasks() if t.name == "softmax")
    declared = (
        softmax.source + '\nINPUT_CONFIGS = [{"BATCH": 3, "DIM": 17}, {"BATCH": 1, "DIM": 1}]\n'
    )
    task = Task(name="softmax_configs", source=declared)
    assert task.input_configs == [{"BATCH": 3, "DIM": 17}, {"BATCH": 1, "DIM": 1}]
    honest = sandbox.evaluate(task, softmax.solutions["cpu"])
    assert honest.status == "ok", honest.message
    # main trials, heavy-tailed, in place, one per configuration, the re-check
    assert len(honest.trials) == 5 + 1 + 1 + 2 + 1
    # Hard-codes the visible row length: right on the main sizes, wrong on the others.
    fixed = softmax.solutions["cpu"].replace("x.shape[-1]", str(softmax.cpu_sizes["DIM"]))
    result = sandbox.evaluate(task, fixed)
    assert result.status in ("incorrect", "runtime_error")
    assert "with sizes" in result.message or result.status == "runtime_error"
