"""The launcher API: signatures are parsed, arguments marshalled to the declared types."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.kernel_sandbox._shared.signature import parse_signature
from cuda_agent.kernel_sandbox.errors import CandidateError, CompileError
from cuda_agent.kernel_sandbox.launch import cpu_kernel, launch_count

AXPY = r"""
// y = a * x + y, with an int count and a double scale
void axpy(float* __restrict__ y, const float* x, double a, int n) {
    for (int i = 0; i < n; ++i) y[i] = (float)(a * x[i]) + y[i];
}
"""


def test_signature_reads_types_and_ignores_comments():
    params = parse_signature(AXPY, "axpy")
    assert [(p.name, p.kind) for p in params] == [
        ("y", "pointer"),
        ("x", "pointer"),
        ("a", "float64"),
        ("n", "int32"),
    ]


def test_signature_errors_name_the_problem():
    with pytest.raises(CandidateError, match="not defined"):
        parse_signature(AXPY, "missing")
    with pytest.raises(CandidateError, match="unsupported type"):
        parse_signature("void f(struct foo s) {}", "f")


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=300),
    a=st.floats(min_value=-4, max_value=4, allow_nan=False),
)
def test_cpu_kernel_matches_torch_for_any_length(n, a):
    kernel = cpu_kernel(AXPY, "axpy")  # cached by content after the first compile
    x = torch.randn(n)
    y = torch.randn(n)
    expected = (a * x.double()).float() + y
    kernel(y, x, a, n)
    torch.testing.assert_close(y, expected)


def test_launches_are_counted():
    kernel = cpu_kernel(AXPY, "axpy")
    before = launch_count()
    kernel(torch.zeros(3), torch.zeros(3), 1.0, 3)
    assert launch_count() == before + 1


def test_bad_arguments_are_clear_errors():
    kernel = cpu_kernel(AXPY, "axpy")
    with pytest.raises(CandidateError, match="takes 4 arguments"):
        kernel(torch.zeros(3))
    with pytest.raises(CandidateError, match="not contiguous"):
        kernel(torch.zeros(4, 4).t(), torch.zeros(16), 1.0, 16)
    with pytest.raises(CandidateError, match=r"pass a torch\.Tensor"):
        kernel([0.0], torch.zeros(1), 1.0, 1)


def test_compile_errors_carry_the_compiler_message():
    with pytest.raises(CompileError, match=r"kernel\.c:2"):
        cpu_kernel("void f(float* x) {\n  x[0] = nope;\n}\n", "f")


def test_tensor_dtype_must_match_the_declared_pointer_type():
    kernel = cpu_kernel(AXPY, "axpy")
    with pytest.raises(CandidateError, match=r"dtype torch.float64 .* float\*"):
        kernel(torch.zeros(3, dtype=torch.float64), torch.zeros(3), 1.0, 3)


def _nvrtc_or_skip():
    """NVRTC is a CPU library: these run wherever CuPy and libnvrtc are installed, GPU or not."""
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    from cuda_agent.kernel_sandbox._shared import compile as _compile

    try:
        _compile._nvrtc()
    except Exception as exc:  # CuPy without its NVRTC library
        pytest.skip(f"NVRTC is not loadable here: {exc}")
    return _compile


def test_nvrtc_cubins_are_cached_by_content(tmp_path, monkeypatch):
    compile_ = _nvrtc_or_skip()
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.f; }'
    first = compile_.compile_cubin(src, ("-std=c++17",), "sm_90")
    assert first.read_bytes()[:4] == b"\x7fELF"  # a cubin is an ELF image
    assert compile_.compile_cubin(src, ("-std=c++17",), "sm_90") == first
    assert compile_.compile_cubin(src, ("-std=c++17",), "sm_80") != first


def test_nvrtc_errors_name_the_line_not_the_harness(tmp_path, monkeypatch):
    compile_ = _nvrtc_or_skip()
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    with pytest.raises(CompileError) as err:
        compile_.compile_cubin(
            'extern "C" __global__ void k(float* x) {\n x[0] = y; }', (), "sm_90"
        )
    assert 'kernel.cu(2): error: identifier "y" is undefined' in str(err.value)
    assert "Traceback" not in str(err.value) and "cupy" not in str(err.value)


def test_compile_workers_read_the_pool_architecture(monkeypatch):
    from cuda_agent.kernel_sandbox._shared import compile as _compile

    if torch.cuda.is_available():
        pytest.skip("a visible GPU decides the architecture")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert _compile.cuda_arch() == "sm_90"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "")
    with pytest.raises(CompileError, match="TORCH_CUDA_ARCH_LIST"):
        _compile.cuda_arch()
