"""The CUDA backend on a real GPU: honest solutions pass, cheats and crashes get verdicts."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks, evaluate_solutions

pytestmark = pytest.mark.gpu

OUT_OF_BOUNDS = r'''
import torch
from torch import nn
from cuda_agent.kernel_sandbox.launch import cuda_kernel

bad = cuda_kernel(r"""
extern "C" __global__ void bad(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    out[i + (1ll << 40)] = x[i];
}
""", "bad")


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        bad(grid=((n + 255) // 256,), block=(256,), args=(out, x, n))
        return out
'''


@pytest.fixture(scope="module")
def sandbox():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    pytest.importorskip("cupy")
    # torch.compile baselines cost seconds per task; one test below covers them.
    with Sandbox(SandboxConfig(backend="cuda", workers=1, time_compile=False)) as sb:
        yield sb


def test_every_builtin_cuda_solution_is_correct_and_timed(sandbox):
    tasks = builtin_tasks()
    for task, result in zip(tasks, evaluate_solutions(sandbox, tasks), strict=True):
        assert result.status == "ok", f"{task.name}: {result.message}"
        # Well inside the 1e-2 tolerance; the eager reference itself runs cuDNN convolutions
        # in TF32 by default, so about 1e-3 of the error can be the reference's own.
        assert result.max_abs_error is not None and result.max_abs_error < 5e-3, task.name
        assert result.candidate_time_ms > 0 and result.eager_time_ms > 0


def test_compile_baseline_is_timed_when_asked():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    with Sandbox(SandboxConfig(backend="cuda", workers=1, time_compile=True)) as sb:
        result = sb.evaluate(relu, relu.solutions["cuda"])
    assert result.status == "ok", result.message
    assert result.compile_time_ms is not None and result.compile_time_ms > 0
    assert result.speedup_vs_compile is not None


def test_illegal_memory_access_is_survived(sandbox):
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    result = sandbox.evaluate(relu, OUT_OF_BOUNDS)
    assert result.status == "runtime_error"
    assert sandbox.evaluate(relu, relu.solutions["cuda"]).status == "ok"


def test_pytorch_only_candidate_is_rejected_on_cuda(sandbox):
    """Refused before it runs (static checks); with the op checks off too, by launch counting:
    it launched no kernel of its own."""
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    cheat = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    result = sandbox.evaluate(relu, cheat)
    assert result.status == "rejected" and "torch_compute" in result.flags
    config = SandboxConfig(
        backend="cuda", workers=1, time_compile=False, static_checks=False, runtime_checks=False
    )
    with Sandbox(config) as unchecked:
        result = unchecked.evaluate(relu, cheat)
    assert result.status == "rejected" and "no_custom_kernel" in result.flags


def test_documented_gpu_formats_pass_and_are_counted():
    """load_inline, Triton and work-directory candidates (the documented examples) pass; a
    Triton candidate that never launches its kernel is rejected."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from cuda_agent.kernel_sandbox import Deadlines
    from cuda_agent.kernel_sandbox.candidates import EXAMPLES

    relu = next(t for t in builtin_tasks() if t.name == "relu")
    config = SandboxConfig(
        backend="cuda", workers=1, time_compile=False, deadlines=Deadlines(load=600.0)
    )
    with Sandbox(config) as sb:
        for example in ("triton_relu.py", "load_inline_cuda.py", "workdir_cuda"):
            result = sb.evaluate(relu, EXAMPLES / example)
            assert result.status == "ok", f"{example}: {result.message}"
            assert result.max_abs_error == 0.0
    # With the static and op checks off, the decoy is caught by counting Triton launches.
    decoy = (EXAMPLES / "triton_relu.py").read_text()
    decoy = decoy.replace(
        "relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)", "out = torch.relu(x)"
    )
    unchecked = dataclasses.replace(config, static_checks=False, runtime_checks=False)
    with Sandbox(unchecked) as sb:
        result = sb.evaluate(relu, decoy)
    assert result.status == "rejected" and "no_custom_kernel" in result.flags


def test_outputs_stay_on_the_device_and_get_the_same_verdicts():
    """Trial outputs go to the reference worker through the slot's device buffer (CUDA IPC);
    verdicts and errors are those of the host path."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    honest = relu.solutions["cuda"]
    wrong = OUT_OF_BOUNDS.replace("out[i + (1ll << 40)] = x[i];", "if (i < n) out[i] = x[i];")
    verdicts = {}
    for on_device in (True, False):
        config = SandboxConfig(
            backend="cuda", workers=1, time_compile=False, device_exchange=on_device
        )
        with Sandbox(config) as sb:
            ok, bad = sb.evaluate(relu, honest), sb.evaluate(relu, wrong)
        via = ok.extra["outputs_via"]
        assert (via["device"] > 0) == on_device and (via["host"] > 0) != on_device, via
        verdicts[on_device] = (ok.status, ok.max_abs_error, bad.status, bad.max_abs_error)
    assert verdicts[True] == verdicts[False]
    assert verdicts[True][0] == "ok" and verdicts[True][2] == "incorrect"


def test_candidates_sharing_an_extension_name_each_run_their_own_on_cuda():
    """load_inline and work-directory candidates with one extension name and other code, in
    both orders, in one worker: each gets the verdict of its own code."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from cuda_agent.kernel_sandbox import Deadlines
    from cuda_agent.kernel_sandbox.candidates import EXAMPLES, read_candidate

    def zero_out(text: str) -> str:
        return text.replace("x[i] > 0.f ? x[i] : 0.f", "0.f")

    relu = next(t for t in builtin_tasks() if t.name == "relu")
    inline = (EXAMPLES / "load_inline_cuda.py").read_text()
    files = read_candidate(EXAMPLES / "workdir_cuda")
    assert isinstance(files, dict)
    zero_files = {k: zero_out(v) for k, v in files.items()}
    assert zero_out(inline) != inline and zero_files != files
    config = SandboxConfig(
        backend="cuda", workers=1, time_compile=False, deadlines=Deadlines(load=600.0)
    )
    with Sandbox(config) as sb:
        candidates = (zero_out(inline), inline, zero_out(inline), files, zero_files, files)
        verdicts = [sb.evaluate(relu, c, measure_time=False).status for c in candidates]
    assert verdicts == ["incorrect", "ok", "incorrect", "ok", "incorrect", "ok"], verdicts


ROW_MAX_WITH_INFINITY = r'''
import torch
from torch import nn
from cuda_agent.kernel_sandbox.launch import cuda_kernel

row_max = cuda_kernel(r"""
extern "C" __global__ void row_max(float* out, const float* x, long long rows, long long cols) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float m = -INFINITY;  // math.h's, as under nvcc: NVRTC is given it
    for (long long j = 0; j < cols; ++j) m = fmaxf(m, x[r * cols + j]);
    out[r] = m + 0.0f * (float)(M_PI - M_PI);
}
""", "row_max")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.numel() // x.shape[-1], x.shape[-1]
        out = torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype)
        row_max(grid=((rows + 127) // 128,), block=(128,), args=(out, x, rows, cols))
        return out
'''


def test_a_kernel_using_the_c_header_constants_nvcc_gives_is_judged_ok(sandbox):
    """``-INFINITY`` and ``M_PI`` without a ``#define``, as code written for nvcc has them: the
    commonest compile error of the model's answers on the GPU (25 answers in the committed
    evaluations before NVRTC was given them) is no error."""
    task = next(t for t in builtin_tasks() if t.name == "row_max")
    result = sandbox.evaluate(task, ROW_MAX_WITH_INFINITY)
    assert result.status == "ok", result.message
