"""Laws of the KL estimators k1, k2, k3: exact expectations, signs, clamping, sequence form."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.rl_core import kl_k1, kl_k2, kl_k3, sequence_kl

TORCH_SETTINGS = settings(deadline=None, max_examples=40)


@st.composite
def two_distributions(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs of a policy and a reference over the same `V` outcomes, float64 `[V]`."""
    vocab = draw(st.integers(2, 6))
    logits = st.lists(st.floats(-4, 4), min_size=vocab, max_size=vocab)
    policy = torch.tensor(draw(logits), dtype=torch.float64).log_softmax(-1)
    reference = torch.tensor(draw(logits), dtype=torch.float64).log_softmax(-1)
    return policy, reference


@TORCH_SETTINGS
@given(dists=two_distributions())
def test_k1_and_k3_are_unbiased(dists: tuple[torch.Tensor, torch.Tensor]) -> None:
    # Each outcome is a "token sampled from the policy": weighting by its probability gives
    # the estimator's exact expectation, which must be the true KL(policy || reference).
    logp, ref = dists
    true_kl = (logp.exp() * (logp - ref)).sum()
    for estimator in (kl_k1, kl_k3):
        torch.testing.assert_close((logp.exp() * estimator(logp, ref)).sum(), true_kl)
    # k2 is biased (exact only to second order in the log-ratio); its mean is only >= 0.
    assert (logp.exp() * kl_k2(logp, ref)).sum() >= 0


@TORCH_SETTINGS
@given(dists=two_distributions())
def test_k2_and_k3_are_nonnegative_and_zero_only_at_equality(
    dists: tuple[torch.Tensor, torch.Tensor],
) -> None:
    logp, ref = dists
    for estimator in (kl_k2, kl_k3):
        kl = estimator(logp, ref)
        assert (kl >= 0).all()
        assert (kl[(logp - ref).abs() > 1e-6] > 0).all()
        assert (estimator(logp, logp.clone()) == 0).all()


def test_clamp_bounds_values_and_keeps_gradients_finite() -> None:
    logp = torch.tensor([-1000.0, -5.0, 0.0, -1e-3], requires_grad=True)
    ref = torch.tensor([0.0, -5.0, -1000.0, 0.0])
    for estimator, low in ((kl_k1, -10.0), (kl_k2, 0.0), (kl_k3, 0.0)):
        kl = estimator(logp, ref, clamp=10.0)
        assert ((kl >= low) & (kl <= 10.0)).all()
        (grad,) = torch.autograd.grad(kl.sum(), logp)
        assert torch.isfinite(grad).all()
    # Inside the clamp range the clamped and plain estimators agree.
    small = kl_k3(logp[1:2], ref[1:2] + 0.5, clamp=10.0)
    torch.testing.assert_close(small, kl_k3(logp[1:2], ref[1:2] + 0.5))
    # Without `clamp` the log-ratio is still clamped to +-20: k3 stops at exp(20) - 21.
    assert float(kl_k3(logp.detach(), ref)[0]) == pytest.approx(math.expm1(20.0) - 20.0)


@st.composite
def sequences(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    b, t = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    floats = st.lists(st.floats(-3, 0), min_size=b * t, max_size=b * t)
    logp = torch.tensor(draw(floats), dtype=torch.float64).reshape(b, t)
    ref = torch.tensor(draw(floats), dtype=torch.float64).reshape(b, t)
    mask = torch.tensor(draw(st.lists(st.booleans(), min_size=b * t, max_size=b * t)))
    return logp, ref, mask.reshape(b, t)


@TORCH_SETTINGS
@given(data=sequences())
def test_sequence_kl_applies_the_estimator_to_the_sequence_log_ratio(
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logp, ref, mask = data
    seq_log_ratio = torch.where(mask, logp - ref, 0).sum(-1)
    torch.testing.assert_close(sequence_kl(logp, ref, mask), seq_log_ratio)
    torch.testing.assert_close(
        sequence_kl(logp, ref, mask), torch.where(mask, kl_k1(logp, ref), 0).sum(-1)
    )
    torch.testing.assert_close(
        sequence_kl(logp, ref, mask, estimator="k3"), torch.expm1(-seq_log_ratio) + seq_log_ratio
    )
    torch.testing.assert_close(sequence_kl(logp, ref, mask, estimator="k2"), seq_log_ratio**2 / 2)
    # Padding (garbage) beyond the mask changes nothing.
    padded = torch.nn.functional.pad(logp, (0, 2), value=math.nan)
    padded_mask = torch.nn.functional.pad(mask, (0, 2), value=False)
    padded_ref = torch.nn.functional.pad(ref, (0, 2), value=1.0)
    torch.testing.assert_close(
        sequence_kl(padded, padded_ref, padded_mask, estimator="k3"),
        sequence_kl(logp, ref, mask, estimator="k3"),
    )


@TORCH_SETTINGS
@given(data=sequences())
def test_gradient_flows_through_the_policy_only(
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logp, ref, _ = data
    logp, ref = logp.clone().requires_grad_(True), ref.clone().requires_grad_(True)
    r = (ref - logp).detach()
    for estimator, expected in ((kl_k1, torch.ones_like(r)), (kl_k2, -r), (kl_k3, 1 - r.exp())):
        grad_logp, grad_ref = torch.autograd.grad(
            estimator(logp, ref).sum(), (logp, ref), allow_unused=True
        )
        assert grad_ref is None
        torch.testing.assert_close(grad_logp, expected)


def test_unknown_estimator_raises() -> None:
    with pytest.raises(ValueError, match="k1"):
        sequence_kl(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), estimator="k4")  # type: ignore[arg-type]
