"""The reference worker's comparison agrees with ``torch.isclose`` (plus the rule that a
non-finite value where the reference is finite fails), at every edge value and dtype."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cuda_agent.kernel_sandbox._shared.compare import compare

EDGES = [1.0, 1.005, 2.5, 0.0, -0.0, 1e-3, -1.0, 1e30, float("nan"), float("inf"), float("-inf")]


def _expected(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> bool:
    if bool((~torch.isfinite(got) & torch.isfinite(want)).any()):
        return False
    g, w = got.double(), want.double()
    return bool(torch.isclose(g, w, atol=atol, rtol=rtol, equal_nan=True).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_edge_values_match_isclose(dtype):
    for x, y in itertools.product(EDGES, EDGES):
        got, want = torch.tensor([x], dtype=dtype), torch.tensor([y], dtype=dtype)
        passed = compare([got], [want], 1e-2, 1e-2)[0]
        assert passed == _expected(got, want, 1e-2, 1e-2), (x, y, dtype)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=1, max_size=40),
    st.lists(st.floats(-0.125, 0.125, width=32), min_size=40, max_size=40),
    st.sampled_from([(1e-2, 1e-2), (0.0, 1e-3), (1e-5, 0.0)]),
)
def test_random_tensors_match_isclose(values, noise, tolerances):
    atol, rtol = tolerances
    want = torch.tensor(values, dtype=torch.float32)
    got = want + torch.tensor(noise[: len(values)], dtype=torch.float32)
    # float32 and float64 may round differently exactly at the tolerance boundary
    margin = (got.double() - want.double()).abs() - (atol + rtol * want.double().abs())
    assume(not bool((margin.abs() <= 1e-6 * (atol + rtol * want.double().abs() + 1e-30)).any()))
    passed, _, _, message = compare([got], [want], atol, rtol)
    assert passed == _expected(got, want, atol, rtol)
    if not passed:
        assert message


def test_integer_outputs_are_compared_exactly_enough():
    want = torch.tensor([2**40 + 1, 5], dtype=torch.int64)
    assert compare([want.clone()], [want], 0.0, 0.0)[0]
    assert not compare([want + 1], [want], 0.0, 0.0)[0]


def test_large_outputs_are_compared_in_chunks_with_the_same_verdict(monkeypatch):
    # Outputs of gigabytes are compared a chunk at a time (bounded temporaries): counts,
    # worst errors, the first failing index and the fingerprint do not depend on the chunking.
    from cuda_agent.kernel_sandbox._shared import compare as _compare

    torch.manual_seed(0)
    want = torch.randn(6, 7, 5)
    got = want.clone()
    got[2, 3, 1] += 1.0
    got[4, 0, 0] -= 2.0
    whole = _compare.compare([got], [want], 1e-2, 1e-2)
    prints = _compare.fingerprint([want])
    monkeypatch.setattr(_compare, "CHUNK", 11)
    chunked = _compare.compare([got], [want], 1e-2, 1e-2)
    assert chunked[:3] == whole[:3] and chunked[3] == whole[3]
    assert not chunked[0] and "2/210 elements" in chunked[3] and "(2, 3, 1)" in chunked[3]
    assert _compare.same_fingerprint(_compare.fingerprint([want]), prints)
    transposed = want.transpose(0, 2)  # not contiguous
    assert _compare.compare([transposed.contiguous()], [transposed], 0.0, 0.0)[0]
