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


def test_the_nvrtc_constants_are_the_ones_nvcc_code_gets_from_the_c_headers(tmp_path):
    """Each constant NVRTC is given ahead of a source (``NVRTC_PRELUDE``) has the type and the
    bits of the same name in the C headers (``<cmath>``, ``<cfloat>``), checked by the host C++
    compiler with host versions of the two CUDA bit-cast intrinsics they are spelled with."""
    import shutil
    import subprocess

    from cuda_agent.kernel_sandbox._shared.compile import NVRTC_CONSTANTS

    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    checks = "\n".join(f'    same("{name}", ({value}), {name});' for name, value in NVRTC_CONSTANTS)
    program = f"""
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>
static float __int_as_float(int i) {{ float f; std::memcpy(&f, &i, 4); return f; }}
static double __longlong_as_double(long long i) {{ double d; std::memcpy(&d, &i, 8); return d; }}
static int bad = 0;
template <class A, class B> void same(const char* name, A ours, B theirs) {{
    if (!std::is_same<A, B>::value || std::memcmp(&ours, &theirs, sizeof(A)) != 0) {{
        std::printf("%s differs\\n", name);
        bad = 1;
    }}
}}
int main() {{
{checks}
    return bad;
}}
"""
    source, binary = tmp_path / "constants.cpp", tmp_path / "constants"
    source.write_text(program)
    subprocess.run(["g++", "-std=c++17", str(source), "-o", str(binary)], check=True)
    done = subprocess.run([str(binary)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_nvrtc_compiles_the_c_header_constants_and_a_sources_own_definition_wins(
    tmp_path, monkeypatch
):
    compile_ = _nvrtc_or_skip()
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    names = [name for name, _ in compile_.NVRTC_CONSTANTS]
    uses = " + ".join(f"(float){name}" for name in names)
    body = f'extern "C" __global__ void k(float* x) {{ x[0] = {uses}; x[1] = -INFINITY; }}'
    assert compile_.compile_cubin(body, ("-std=c++17",), "sm_90").read_bytes()[:4] == b"\x7fELF"
    own = "#define INFINITY (1.0f / 0.0f)\n#define M_PI 3.14f\n" + body
    assert compile_.compile_cubin(own, ("-std=c++17",), "sm_90").exists()
    # the line numbers the compiler reports are still the source's own
    with pytest.raises(CompileError, match=r'kernel\.cu\(4\): error: identifier "nope"'):
        compile_.compile_cubin(own + "\n__device__ int y = nope;", (), "sm_90")


def test_compile_workers_read_the_pool_architecture(monkeypatch):
    from cuda_agent.kernel_sandbox._shared import compile as _compile

    if torch.cuda.is_available():
        pytest.skip("a visible GPU decides the architecture")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert _compile.cuda_arch() == "sm_90"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "")
    with pytest.raises(CompileError, match="TORCH_CUDA_ARCH_LIST"):
        _compile.cuda_arch()
