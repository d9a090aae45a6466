"""The launcher API: signatures are parsed, arguments marshalled to the declared types."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.kernel_sandbox._signature import parse_signature
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
