"""Laws of the value loss, plain and clipped."""

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cuda_agent.rl_core import value_loss

TORCH_SETTINGS = settings(deadline=None, max_examples=40)


@st.composite
def value_inputs(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(values_bt, returns_bt, old_values_bt), float64."""
    b, t = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    floats = st.lists(st.floats(-3, 3), min_size=b * t, max_size=b * t)
    return tuple(  # type: ignore[return-value]
        torch.tensor(draw(floats), dtype=torch.float64).reshape(b, t) for _ in range(3)
    )


@TORCH_SETTINGS
@given(inputs=value_inputs())
def test_plain_loss_is_half_squared_error_with_its_gradient(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    values, returns, _ = inputs
    values = values.clone().requires_grad_(True)
    loss = value_loss(values, returns)
    torch.testing.assert_close(loss, 0.5 * (values - returns).square())
    (grad,) = torch.autograd.grad(loss.sum(), values)
    torch.testing.assert_close(grad, (values - returns).detach())


@TORCH_SETTINGS
@given(inputs=value_inputs(), clip_eps=st.floats(0.0, 2.0))
@example(  # found by CI: both squared errors underflow to 0, a tie the gradient may break
    inputs=(
        torch.tensor([[0.0]], dtype=torch.float64),
        torch.tensor([[1.7832e-255]], dtype=torch.float64),
        torch.tensor([[3.0302e-163]], dtype=torch.float64),
    ),
    clip_eps=0.0,
)
def test_clipped_loss_is_pessimistic_and_zero_gradient_where_clipped(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor], clip_eps: float
) -> None:
    values, returns, old_values = inputs
    values = values.clone().requires_grad_(True)
    plain = value_loss(values, returns).detach()
    clipped = value_loss(values, returns, old_values_bt=old_values, clip_eps=clip_eps)
    (grad,) = torch.autograd.grad(clipped.sum(), values)
    clipped = clipped.detach()
    assert (clipped >= plain).all()
    moved = (values.detach() - old_values).abs()
    inside = moved <= clip_eps
    torch.testing.assert_close(clipped[inside], plain[inside])
    # Outside the range, where the clipped error is the larger one, the gradient is zero.
    clipped_value = old_values + (values.detach() - old_values).clamp(-clip_eps, clip_eps)
    # (Compared as the loss compares them, squared: errors near 1e-200 square to 0 and tie.)
    dominated = (moved > clip_eps) & (
        (clipped_value - returns).square() > (values.detach() - returns).square()
    )
    assert (grad[dominated] == 0).all()


def test_clipping_needs_both_arguments() -> None:
    with pytest.raises(ValueError, match="both"):
        value_loss(torch.zeros(1, 2), torch.zeros(1, 2), clip_eps=0.2)
    with pytest.raises(ValueError, match="returns_bt"):
        value_loss(torch.zeros(1, 2), torch.zeros(1, 3))
