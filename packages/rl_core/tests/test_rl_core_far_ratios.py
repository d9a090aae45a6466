"""Far-off ratios give no NaN and no inf: every ratio and KL term, its value and its gradient.

Inputs: anything but NaN at masked-out positions (padding, prompt and feedback tokens, whose
log-probs are garbage), and log-ratios far beyond the float range of `exp` at kept ones. The
clamp behind this (`_log_ratio.py`) must change nothing where it is inactive: a second
group of laws compares with the plain formulas on ordinary inputs.
"""

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.rl_core import (
    approx_kl,
    clip_fraction,
    gspo_policy_loss,
    importance_log_ratio,
    importance_ratio_stats,
    importance_sampling_mask,
    kl_k1,
    kl_k2,
    kl_k3,
    masked_seq_mean_token_mean,
    masked_token_mean,
    ppo_clipped_policy_loss,
    sequence_kl,
    truncated_importance_weights,
)

TORCH_SETTINGS = settings(deadline=None, max_examples=60)
DTYPES = (torch.float32, torch.float64)
LEVELS = ("token", "sequence", "geometric")

# Kept positions: ordinary log-probs, log-ratios far past exp's range (88 in float32, 709 in
# float64), and infinities (a token the model gives probability 0, or an overflowed logit).
KEPT = st.one_of(
    st.floats(-30.0, 0.0),
    st.floats(-1e6, 1e6),
    st.floats(allow_nan=False),
)
# Masked positions: anything but NaN.
MASKED = st.floats(allow_nan=False)


Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
TensorFn = Callable[[torch.Tensor], torch.Tensor]


@st.composite
def far_batches(draw: st.DrawFn) -> Batch:
    """(logprobs_bt, old_logprobs_bt, advantages_bt or advantages_b1, mask_bt)."""
    dtype = draw(st.sampled_from(DTYPES))
    b, t = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    mask = draw(st.lists(st.booleans(), min_size=b * t, max_size=b * t))
    new = [draw(KEPT if kept else MASKED) for kept in mask]
    old = [draw(KEPT if kept else MASKED) for kept in mask]
    per_seq = draw(st.booleans())
    n_adv = b if per_seq else b * t
    advantages = draw(st.lists(st.floats(-10.0, 10.0), min_size=n_adv, max_size=n_adv))
    return (
        torch.tensor(new, dtype=dtype).reshape(b, t),
        torch.tensor(old, dtype=dtype).reshape(b, t),
        torch.tensor(advantages, dtype=dtype).reshape(b, 1 if per_seq else t),
        torch.tensor(mask).reshape(b, t),
    )


def _finite(x: torch.Tensor) -> bool:
    return bool(torch.isfinite(x).all())


def _check_per_token(loss_fn: TensorFn, logprobs_bt: torch.Tensor, mask_bt: torch.Tensor) -> None:
    """Per-token values finite everywhere; the aggregated loss's gradient finite everywhere
    and exactly 0 at masked positions."""
    logprobs_bt = logprobs_bt.clone().requires_grad_(True)
    loss_bt = loss_fn(logprobs_bt)
    assert _finite(loss_bt), loss_bt
    (grad_bt,) = torch.autograd.grad(masked_token_mean(loss_bt, mask_bt), logprobs_bt)
    assert _finite(grad_bt), grad_bt
    assert (grad_bt[~mask_bt] == 0).all()


@TORCH_SETTINGS
@given(batch=far_batches(), dual_clip=st.sampled_from([None, 3.0]))
def test_ppo_loss_and_gradient_stay_finite(batch: Batch, dual_clip: float | None) -> None:
    logprobs_bt, old_bt, advantages_bt, mask_bt = batch
    _check_per_token(
        lambda lp: ppo_clipped_policy_loss(lp, old_bt, advantages_bt, dual_clip=dual_clip),
        logprobs_bt,
        mask_bt,
    )


@TORCH_SETTINGS
@given(batch=far_batches())
def test_gspo_loss_and_gradient_stay_finite(batch: Batch) -> None:
    logprobs_bt, old_bt, advantages_bt, mask_bt = batch
    logprobs_bt = logprobs_bt.clone().requires_grad_(True)
    loss_bt = gspo_policy_loss(logprobs_bt, old_bt, advantages_bt, mask_bt)
    assert _finite(loss_bt)
    (grad_bt,) = torch.autograd.grad(masked_seq_mean_token_mean(loss_bt, mask_bt), logprobs_bt)
    assert _finite(grad_bt) and (grad_bt[~mask_bt] == 0).all()


@pytest.mark.parametrize("estimator", [kl_k1, kl_k2, kl_k3])
@pytest.mark.parametrize("clamp", [None, 10.0])
@TORCH_SETTINGS
@given(batch=far_batches())
def test_token_kl_and_gradient_stay_finite(
    estimator: Callable[..., torch.Tensor], clamp: float | None, batch: Batch
) -> None:
    logprobs_bt, ref_bt, _, mask_bt = batch
    _check_per_token(lambda lp: estimator(lp, ref_bt, clamp=clamp), logprobs_bt, mask_bt)


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
@TORCH_SETTINGS
@given(batch=far_batches())
def test_sequence_kl_and_gradient_stay_finite(estimator: str, batch: Batch) -> None:
    logprobs_bt, ref_bt, _, mask_bt = batch
    logprobs_bt = logprobs_bt.clone().requires_grad_(True)
    kl_b = sequence_kl(logprobs_bt, ref_bt, mask_bt, estimator=estimator)  # type: ignore[arg-type]
    assert _finite(kl_b)
    (grad_bt,) = torch.autograd.grad(kl_b.sum(), logprobs_bt)
    assert _finite(grad_bt) and (grad_bt[~mask_bt] == 0).all()


@pytest.mark.parametrize("level", LEVELS)
@TORCH_SETTINGS
@given(batch=far_batches())
def test_off_policy_corrections_and_diagnostics_stay_finite(level: str, batch: Batch) -> None:
    trainer_bt, sampler_bt, _, mask_bt = batch
    assert _finite(importance_log_ratio(trainer_bt, sampler_bt, mask_bt, level=level))  # type: ignore[arg-type]
    assert _finite(truncated_importance_weights(trainer_bt, sampler_bt, mask_bt, level=level))  # type: ignore[arg-type]
    kept_bt = importance_sampling_mask(trainer_bt, sampler_bt, mask_bt, level=level)  # type: ignore[arg-type]
    assert not (kept_bt & ~mask_bt).any()
    stats = importance_ratio_stats(trainer_bt, sampler_bt, mask_bt, level=level)  # type: ignore[arg-type]
    assert all(_finite(value) for value in stats), stats
    assert _finite(clip_fraction(trainer_bt, sampler_bt, mask_bt))
    assert _finite(approx_kl(trainer_bt, sampler_bt, mask_bt))


# ------------------------------------------------------ where the clamp is inactive, no change


@st.composite
def ordinary_batches(draw: st.DrawFn) -> Batch:
    """Log-probs in [-10, 0]: every log-ratio within +-10, inside the clamp."""
    b, t = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    floats = st.lists(st.floats(-10.0, 0.0), min_size=b * t, max_size=b * t)
    mask = draw(st.lists(st.booleans(), min_size=b * t, max_size=b * t))
    advantages = draw(st.lists(st.floats(-3.0, 3.0), min_size=b * t, max_size=b * t))
    return (
        torch.tensor(draw(floats), dtype=torch.float64).reshape(b, t),
        torch.tensor(draw(floats), dtype=torch.float64).reshape(b, t),
        torch.tensor(advantages, dtype=torch.float64).reshape(b, t),
        torch.tensor(mask).reshape(b, t),
    )


def _value_and_grad(fn: TensorFn, logprobs_bt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    logprobs_bt = logprobs_bt.clone().requires_grad_(True)
    value = fn(logprobs_bt)
    (grad,) = torch.autograd.grad(value.sum(), logprobs_bt)
    return value.detach(), grad


@TORCH_SETTINGS
@given(batch=ordinary_batches())
def test_inside_the_clamp_the_losses_are_the_plain_formulas(batch: Batch) -> None:
    logprobs_bt, old_bt, advantages_bt, mask_bt = batch

    def plain_ppo(lp: torch.Tensor) -> torch.Tensor:
        ratio = torch.exp(lp - old_bt)
        clipped = ratio.clamp(0.8, 1.28)
        return -torch.minimum(ratio * advantages_bt, clipped * advantages_bt)

    def plain_k3(lp: torch.Tensor) -> torch.Tensor:
        r = old_bt - lp
        return torch.exp(r) - 1 - r

    pairs: list[tuple[TensorFn, TensorFn]] = [
        (plain_ppo, lambda lp: ppo_clipped_policy_loss(lp, old_bt, advantages_bt)),
        (lambda lp: lp - old_bt, lambda lp: kl_k1(lp, old_bt)),
        (lambda lp: 0.5 * (lp - old_bt) ** 2, lambda lp: kl_k2(lp, old_bt)),
        (plain_k3, lambda lp: kl_k3(lp, old_bt)),
    ]
    for plain, ours in pairs:
        expected_value, expected_grad = _value_and_grad(plain, logprobs_bt)
        value, grad = _value_and_grad(ours, logprobs_bt)
        torch.testing.assert_close(value, expected_value)
        torch.testing.assert_close(grad, expected_grad)
    seq_log_ratio_b = torch.where(mask_bt, logprobs_bt - old_bt, 0).sum(-1)
    torch.testing.assert_close(sequence_kl(logprobs_bt, old_bt, mask_bt), seq_log_ratio_b)
    ratio_bt = torch.exp(logprobs_bt - old_bt)
    outside_bt = ((ratio_bt < 0.8) | (ratio_bt > 1.28)).double()
    plain_fraction = masked_token_mean(outside_bt, mask_bt)
    torch.testing.assert_close(clip_fraction(logprobs_bt, old_bt, mask_bt), plain_fraction)


# ------------------------------------------------------------------------ the cases


def test_a_far_ratio_at_a_masked_position_gives_no_nan_gradient() -> None:
    # Issue 30, part 4: the loss was finite, the gradient at the masked position NaN.
    mask_bt = torch.tensor([[True, False]])
    old_bt = torch.tensor([[-1.0, -100.0]])
    logprobs_bt = torch.tensor([[-0.9, -10.0]], requires_grad=True)
    loss_bt = ppo_clipped_policy_loss(logprobs_bt, old_bt, torch.tensor([[0.5]]))
    loss = masked_token_mean(loss_bt, mask_bt)
    (grad_bt,) = torch.autograd.grad(loss, logprobs_bt)
    assert math.isfinite(float(loss.detach()))
    assert _finite(grad_bt), grad_bt
    assert float(grad_bt[0, 1]) == 0.0
    # The kept token is untouched by the clamp: ratio exp(0.1) within the clip range.
    assert float(grad_bt[0, 0]) == pytest.approx(-0.5 * math.exp(0.1), rel=1e-6)


def test_a_far_ratio_with_a_zero_advantage_gives_a_zero_loss() -> None:
    # Unclamped: exp(100) = inf in float32, and inf * 0 = NaN.
    loss_bt = ppo_clipped_policy_loss(
        torch.tensor([[0.0]]), torch.tensor([[-100.0]]), torch.tensor([[0.0]])
    )
    assert float(loss_bt) == 0.0


def test_unclamped_k3_no_longer_overflows() -> None:
    logprobs_bt = torch.tensor([[-100.0, -1.0]], requires_grad=True)
    kl_bt = kl_k3(logprobs_bt, torch.zeros(1, 2))
    (grad_bt,) = torch.autograd.grad(kl_bt.sum(), logprobs_bt)
    assert _finite(kl_bt) and _finite(grad_bt)
    assert float(kl_bt[0, 0]) == pytest.approx(math.expm1(20.0) - 20.0, rel=1e-6)
    assert float(grad_bt[0, 0]) == 0.0  # beyond the clamp
