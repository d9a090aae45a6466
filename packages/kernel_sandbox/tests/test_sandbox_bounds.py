"""Writes outside a tensor's bounds (guard regions, ``_candidate/guards.py``) and sizes hard-coded
from the visible problem (``check_candidate``'s case above the visible sizes), CPU backend."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.kernel_sandbox import (
    Deadlines,
    Sandbox,
    SandboxConfig,
    Task,
    _worker,
    builtin_tasks,
)
from cuda_agent.kernel_sandbox._candidate import guards
from cuda_agent.kernel_sandbox.properties import Case, check_candidate


@pytest.fixture(scope="module")
def relu() -> Task:
    return next(t for t in builtin_tasks() if t.name == "relu")


@pytest.fixture(scope="module")
def sandbox():
    config = SandboxConfig(
        backend="cpu", workers=1, trials=2, deadlines=Deadlines(load=400.0, correctness=30.0)
    )
    with Sandbox(config) as sb:
        yield sb


def _raw(kernel: str, forward: str) -> str:
    """A candidate with one raw C kernel ``relu`` and the given forward body."""
    body = "".join(f"        {line}\n" for line in forward.strip().splitlines())
    return (
        "import torch\nfrom torch import nn\n"
        "from cuda_agent.kernel_sandbox.launch import cpu_kernel\n\n"
        f'relu = cpu_kernel(r"""\n{kernel}\n""", "relu")\n\n\n'
        "class ModelNew(nn.Module):\n    def forward(self, x):\n" + body
    )


FORWARD = "x = x.contiguous()\nout = torch.empty_like(x)\nrelu(out, x, x.numel())\nreturn out"


# ------------------------------------------------------------------------ the guards alone
def test_a_guarded_copy_keeps_layout_and_contents_and_sees_each_side():
    x = torch.randn(3, 5).t()  # not contiguous: strides are kept
    copy, guard = guards.guarded(x, "input 0")
    assert torch.equal(copy, x) and copy.stride() == x.stride()
    assert copy.data_ptr() % 64 == 0 and guard.damage() == ("", False)
    raw = guard.buffer  # the pads sit right before and after the tensor's bytes
    raw[guards.PAD_BYTES + guard.span + 4] = 0
    assert guard.damage() == ("1 bytes after its end changed, up to 5 past it", False)
    raw[guards.PAD_BYTES - 8 : guards.PAD_BYTES] = 0
    assert "8 bytes before its start changed, up to 8 before it" in guard.damage()[0]
    message, beyond = guards.first_damage([guard], [], [copy])
    assert message.startswith("ModelNew wrote outside the bounds of output 0, input 0 (float32")
    assert not beyond
    raw[-1] = 0  # the far end of a pad: the writes may have gone on beyond it
    assert guard.damage()[1] and guards.first_damage([guard], [], [])[1]


def test_allocations_are_guarded_up_to_a_count():
    with guards.AllocationGuards(torch.device("cpu"), budget=0) as mode:
        a = torch.empty(4, 3)
        b = torch.zeros(2).clone()
        view = torch.empty_like(a).view(-1)
        grown = torch.empty(0)
        torch.add(a, 1.0, out=grown)  # resized into its pad: that guard is dropped
    assert [g.what for g in mode.guards] == [
        "a tensor from empty",
        "a tensor from zeros",
        "a tensor from clone",
        "a tensor from empty_like",
    ]
    assert torch.equal(b, torch.zeros(2)) and mode.guards[3].owns(view)
    assert grown.shape == (4, 3) and guards.first_damage([], mode.guards, []) == ("", False)
    with guards.AllocationGuards(torch.device("cpu"), budget=0) as mode:
        for _ in range(guards.MAX_GUARDED + 3):
            torch.empty(1)
    assert len(mode.guards) == guards.MAX_GUARDED


# --------------------------------------------------------------------------- in evaluate
def test_a_write_past_the_end_of_the_output_is_rejected(sandbox, relu):
    off_by_one = _raw(
        "void relu(float* out, const float* x, long n) {\n"
        "    for (long i = 0; i <= n; ++i) out[i] = i < n && x[i] > 0.f ? x[i] : 0.f;\n}",
        FORWARD,
    )
    result = sandbox.evaluate(relu, off_by_one, measure_time=False)
    assert result.status == "rejected" and result.flags == ("out_of_bounds_write",), result.message
    assert "output 0, a tensor from empty_like (float32, shape [64, 4096])" in result.message
    assert "4 bytes after its end changed, up to 4 past it" in result.message
    assert result.extra["out_of_bounds_write"] == {"beyond_guard": False}
    (lane,) = sandbox._lanes.lanes
    assert lane.candidate.alive()  # the pad took the write: the worker serves on
    honest = sandbox.evaluate(relu, relu.solutions["cpu"], measure_time=False)
    assert honest.status == "ok", honest.message


def test_a_write_to_the_far_end_of_a_pad_retires_the_worker(sandbox, relu):
    # It may have written on beyond the pad, into the worker's own memory.
    last = guards.PAD_BYTES // 4 - 1
    far = _raw(
        "void relu(float* out, const float* x, long n) {\n"
        "    for (long i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;\n"
        f"    out[n + {last}] = 0.f;\n}}",
        FORWARD,
    )
    (lane,) = sandbox._lanes.lanes
    result = sandbox.evaluate(relu, far, measure_time=False)
    assert result.status == "rejected" and "out_of_bounds_write" in result.flags, result.message
    assert f"up to {guards.PAD_BYTES} past it" in result.message
    assert result.extra["out_of_bounds_write"] == {"beyond_guard": True}
    assert not lane.candidate.alive()  # retired: the next job gets a fresh worker
    assert not _worker._memory_is_suspect({"extra": {"out_of_bounds_write": {}}})
    honest = sandbox.evaluate(relu, relu.solutions["cpu"], measure_time=False)
    assert honest.status == "ok", honest.message


def test_a_write_before_the_start_of_an_input_is_rejected(sandbox, relu):
    scribbles = _raw(
        "void relu(float* out, float* x, long n) {\n"
        "    x[-2] = 1.f;\n"
        "    for (long i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;\n}",
        FORWARD,
    )
    result = sandbox.evaluate(relu, scribbles, measure_time=False)
    assert result.status == "rejected" and "out_of_bounds_write" in result.flags, result.message
    assert "input 0 (float32, shape [64, 4096]): " in result.message
    assert "bytes before its start changed, up to 8 before it" in result.message


def test_a_write_past_a_temporary_is_rejected(sandbox, relu):
    # The output is right; a scratch buffer the forward allocates is overrun.
    scratch = _raw(
        "void relu(float* out, const float* x, long n, float* tmp) {\n"
        "    for (long i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;\n"
        "    for (long i = 0; i < 40; ++i) tmp[i] = 0.f;\n}",
        "x = x.contiguous()\nout = torch.empty_like(x)\ntmp = torch.empty(32)\n"
        "relu(out, x, x.numel(), tmp)\nreturn out",
    )
    result = sandbox.evaluate(relu, scratch, measure_time=False)
    assert result.status == "rejected" and "out_of_bounds_write" in result.flags, result.message
    assert "a tensor from empty (float32, shape [32]): 32 bytes after its end" in result.message


# ----------------------------------------------------------------- check_candidate, in C++
CPP = r'''
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

source = """
#include <ATen/ops/empty_like.h>
#include <torch/csrc/utils/pybind.h>  // the two headers used: a quicker build than torch/extension.h

// The loop runs to the element count of the visible problem (64 x 4096), hard-coded: past the
// end of both tensors on fewer elements, the tail unwritten on more.
at::Tensor relu_unbounded(at::Tensor x) {
    auto out = at::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = 262144;
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

// The same count as a bound: right on every size up to the visible one.
at::Tensor relu_bounded(at::Tensor x) {
    auto out = at::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = 262144;
    for (int64_t i = 0; i < n && i < x.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

// Sixteen elements at a time with no tail: past the end of the output unless 16 divides the
// element count (it does on the visible problem).
at::Tensor relu_blocks(at::Tensor x) {
    auto out = at::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); i += 16)
        for (int64_t k = 0; k < 16; ++k) o[i + k] = in[i + k] > 0.f ? in[i + k] : 0.f;
    return out;
}
"""
ext = load_inline(
    name="relu_bounds",
    cpp_sources=source,
    functions=["relu_unbounded", "relu_bounded", "relu_blocks"],
    extra_cflags=["-O1"],
    no_implicit_headers=True,
    with_pytorch_error_handling=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.FUNCTION(x.contiguous())
'''


@pytest.mark.slow  # one C++ extension build (tens of seconds on two cores; cached after)
@pytest.mark.parametrize("function", ["relu_unbounded", "relu_bounded", "relu_blocks"])
def test_cpp_candidates_with_hard_coded_sizes_fail_check_candidate(sandbox, relu, function):
    candidate = CPP.replace("FUNCTION", function)
    assert sandbox.evaluate(relu, candidate, measure_time=False).status == "ok"  # visible sizes
    report = check_candidate(sandbox, relu, candidate, max_examples=10)
    assert not report.passed, str(report)
    # Found at once, without drawing (the unbounded loop crashes the worker on small sizes).
    assert report.found_by == "above_visible" and report.examples == 2
    assert report.counterexample == Case({"BATCH": 65, "DIM": 4097})
    assert report.result is not None and "hard_coded_size" in report.result.flags
    assert "(above the visible sizes, which pass: hard-coded?)" in str(report)
    if function == "relu_blocks":  # 65 x 4097 is odd: it writes past the end there
        assert report.result.status == "rejected"
        assert "out_of_bounds_write" in report.result.flags
        assert "output 0, a tensor from empty_like" in report.result.message
    else:  # the tail is left unwritten (poisoned)
        assert report.result.status == "incorrect"


@pytest.mark.slow  # the same extension; hypothesis shrinks over about a hundred evaluations
def test_a_write_past_the_end_on_a_small_drawn_size_fails_check_candidate(sandbox, relu):
    blocks = CPP.replace("FUNCTION", "relu_blocks")
    report = check_candidate(sandbox, relu, blocks, max_examples=10, above_visible=False)
    assert not report.passed and report.found_by == "drawn", str(report)
    assert report.result is not None and report.result.flags == ("out_of_bounds_write",)
    assert report.counterexample is not None and report.counterexample.sizes == {
        "BATCH": 1,
        "DIM": 1,
    }
    assert "output 0, a tensor from empty_like (float32, shape [1, 1])" in report.result.message


# -------------------------------------------------------------------------------- on a GPU
CUDA_OFF_BY_ONE = r'''
import torch
from torch import nn
from cuda_agent.kernel_sandbox.launch import cuda_kernel

relu = cuda_kernel(r"""
extern "C" __global__ void relu(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = i < n && x[i] > 0.f ? x[i] : 0.f;
}
""", "relu")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu(grid=((n + 256) // 256,), block=(256,), args=(out, x, n))
        return out
'''


@pytest.mark.gpu
def test_a_cuda_kernel_writing_past_its_output_is_rejected(relu):
    # Not run yet: written for the GPU machine (the guards are the same code on CUDA).
    pytest.importorskip("cupy")
    with Sandbox(SandboxConfig(backend="cuda", workers=1, time_compile=False)) as sb:
        result = sb.evaluate(relu, CUDA_OFF_BY_ONE, measure_time=False)
        honest = sb.evaluate(relu, relu.solutions["cuda"], measure_time=False)
    assert result.status == "rejected" and "out_of_bounds_write" in result.flags, result.message
    assert "output 0, a tensor from empty_like" in result.message
    assert "4 bytes after its end changed, up to 4 past it" in result.message
    assert honest.status == "ok", honest.message
