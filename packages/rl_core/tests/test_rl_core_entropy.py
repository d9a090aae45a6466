"""Laws of the chunked entropy from logits."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.rl_core import entropy_from_logits

TORCH_SETTINGS = settings(deadline=None, max_examples=30)


@st.composite
def logits_btv(draw: st.DrawFn) -> torch.Tensor:
    b, t, v = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 7))
    xs = draw(st.lists(st.floats(-20, 20), min_size=b * t * v, max_size=b * t * v))
    return torch.tensor(xs, dtype=torch.float64).reshape(b, t, v)


@TORCH_SETTINGS
@given(logits=logits_btv(), chunk_size=st.integers(1, 20))
def test_entropy_is_minus_sum_p_log_p_for_any_chunking(
    logits: torch.Tensor, chunk_size: int
) -> None:
    expected = torch.distributions.Categorical(logits=logits).entropy()
    entropy = entropy_from_logits(logits, chunk_size=chunk_size)
    assert entropy.shape == logits.shape[:-1]
    torch.testing.assert_close(entropy, expected)
    torch.testing.assert_close(entropy_from_logits(logits), expected)
    assert (entropy >= -1e-9).all() and (entropy <= math.log(logits.shape[-1]) + 1e-9).all()


@TORCH_SETTINGS
@given(logits=logits_btv(), chunk_size=st.integers(1, 20))
def test_chunked_gradient_equals_the_whole_gradient(logits: torch.Tensor, chunk_size: int) -> None:
    def grad(chunk: int | None) -> torch.Tensor:
        x = logits.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(entropy_from_logits(x, chunk_size=chunk).sum(), x)
        return g

    torch.testing.assert_close(grad(chunk_size), grad(None))


def test_banned_tokens_add_nothing_and_keep_gradients_finite() -> None:
    logits = torch.tensor([[0.0, 1.0, -math.inf, 2.0]], requires_grad=True)
    entropy = entropy_from_logits(logits, chunk_size=1)
    torch.testing.assert_close(entropy, entropy_from_logits(logits[:, [0, 1, 3]]))
    (grad,) = torch.autograd.grad(entropy.sum(), logits)
    assert torch.isfinite(grad).all() and grad[0, 2] == 0


def test_low_precision_logits_give_float32_entropy() -> None:
    logits = torch.randn(2, 3, 11, generator=torch.Generator().manual_seed(0))
    entropy = entropy_from_logits(logits.bfloat16(), chunk_size=4)
    assert entropy.dtype == torch.float32
    torch.testing.assert_close(entropy, entropy_from_logits(logits), atol=0.05, rtol=0)


def test_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        entropy_from_logits(torch.zeros(1, 2, 3), chunk_size=0)
