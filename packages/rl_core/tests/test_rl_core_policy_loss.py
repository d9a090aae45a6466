"""Laws of the policy losses (PPO clip, clip-higher, dual clip, GSPO) and the k3 estimate."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.rl_core import (
    approx_kl_k3,
    gspo_policy_loss,
    masked_seq_mean_token_mean,
    ppo_clipped_policy_loss,
)

# torch's first calls (dispatch, vmap set-up) are slow: a deadline would make tests flaky.
TORCH_SETTINGS = settings(deadline=None, max_examples=40)

EPS_LOW, EPS_HIGH = 0.2, 0.28


@st.composite
def loss_inputs(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logprobs_bt, old_logprobs_bt, advantages_bt or advantages_b1), float64."""
    b, t = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    floats = st.floats(-1.0, 0.0)  # log-ratio within [-1, 1] crosses both clip edges
    logprobs = draw(st.lists(st.floats(-5.0, 0.0), min_size=b * t, max_size=b * t))
    shifts = draw(st.lists(floats, min_size=b * t, max_size=b * t))
    per_seq = draw(st.booleans())
    n_adv = b if per_seq else b * t
    advantages = draw(st.lists(st.floats(-3.0, 3.0), min_size=n_adv, max_size=n_adv))
    logprobs_bt = torch.tensor(logprobs, dtype=torch.float64).reshape(b, t)
    old_bt = logprobs_bt + 2 * torch.tensor(shifts, dtype=torch.float64).reshape(b, t) + 1
    advantages_bt = torch.tensor(advantages, dtype=torch.float64).reshape(b, 1 if per_seq else t)
    return logprobs_bt, old_bt, advantages_bt


def loss_and_grad(
    logprobs_bt: torch.Tensor, old_bt: torch.Tensor, advantages_bt: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    logprobs_bt = logprobs_bt.clone().requires_grad_(True)
    loss_bt = ppo_clipped_policy_loss(
        logprobs_bt, old_bt, advantages_bt, eps_low=EPS_LOW, eps_high=EPS_HIGH
    )
    (grad_bt,) = torch.autograd.grad(loss_bt.sum(), logprobs_bt)
    return loss_bt.detach(), grad_bt


@TORCH_SETTINGS
@given(inputs=loss_inputs())
def test_at_ratio_one_it_is_the_plain_policy_gradient(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logprobs_bt, _, advantages_bt = inputs
    loss_bt, grad_bt = loss_and_grad(logprobs_bt, logprobs_bt.clone(), advantages_bt)
    expected_bt = (-advantages_bt).expand_as(logprobs_bt)
    torch.testing.assert_close(loss_bt, expected_bt)
    torch.testing.assert_close(grad_bt, expected_bt)


@TORCH_SETTINGS
@given(inputs=loss_inputs())
def test_gradient_is_zero_exactly_where_clipped(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logprobs_bt, old_bt, advantages_bt = inputs
    _, grad_bt = loss_and_grad(logprobs_bt, old_bt, advantages_bt)
    ratio_bt = torch.exp(logprobs_bt - old_bt)
    a_bt = advantages_bt.expand_as(ratio_bt)
    clipped_bt = ((ratio_bt > 1 + EPS_HIGH) & (a_bt > 0)) | ((ratio_bt < 1 - EPS_LOW) & (a_bt < 0))
    on_edge_bt = torch.isclose(ratio_bt, torch.tensor(1 + EPS_HIGH, dtype=torch.float64)) | (
        torch.isclose(ratio_bt, torch.tensor(1 - EPS_LOW, dtype=torch.float64))
    )
    assert (grad_bt[clipped_bt] == 0).all()
    free_bt = ~clipped_bt & ~on_edge_bt
    torch.testing.assert_close(grad_bt[free_bt], (-a_bt * ratio_bt)[free_bt])


@TORCH_SETTINGS
@given(inputs=loss_inputs(), extra=st.floats(0.0, 1.0))
def test_pessimistic_bound_and_clip_higher(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor], extra: float
) -> None:
    logprobs_bt, old_bt, advantages_bt = inputs
    loss_bt = ppo_clipped_policy_loss(logprobs_bt, old_bt, advantages_bt)
    assert (loss_bt >= -torch.exp(logprobs_bt - old_bt) * advantages_bt - 1e-12).all()
    # A wider upper clip only lets positive advantages count more: the loss never rises.
    wider_bt = ppo_clipped_policy_loss(logprobs_bt, old_bt, advantages_bt, eps_high=0.28 + extra)
    assert (wider_bt <= loss_bt + 1e-12).all()


@TORCH_SETTINGS
@given(inputs=loss_inputs())
def test_per_sequence_advantages_broadcast(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logprobs_bt, old_bt, advantages_bt = inputs
    loss_bt = ppo_clipped_policy_loss(logprobs_bt, old_bt, advantages_bt)
    expanded_bt = advantages_bt.expand_as(logprobs_bt).clone()
    assert loss_bt.shape == logprobs_bt.shape
    torch.testing.assert_close(loss_bt, ppo_clipped_policy_loss(logprobs_bt, old_bt, expanded_bt))


@TORCH_SETTINGS
@given(inputs=loss_inputs())
def test_vmap_per_sequence_and_per_sample_gradients(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logprobs_bt, old_bt, advantages_bt = inputs
    advantages_bt = advantages_bt.expand_as(logprobs_bt).clone()
    vmapped = torch.func.vmap(ppo_clipped_policy_loss)(logprobs_bt, old_bt, advantages_bt)
    torch.testing.assert_close(vmapped, ppo_clipped_policy_loss(logprobs_bt, old_bt, advantages_bt))

    def seq_loss(lp_t: torch.Tensor, old_t: torch.Tensor, a_t: torch.Tensor) -> torch.Tensor:
        return ppo_clipped_policy_loss(lp_t, old_t, a_t).sum()

    per_seq_grad_bt = torch.func.vmap(torch.func.grad(seq_loss))(logprobs_bt, old_bt, advantages_bt)
    _, grad_bt = loss_and_grad(logprobs_bt, old_bt, advantages_bt)
    torch.testing.assert_close(per_seq_grad_bt, grad_bt)


def test_shape_mistakes_raise() -> None:
    lp = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="old_logprobs_bt"):
        ppo_clipped_policy_loss(lp, torch.zeros(2, 4), torch.zeros(2, 1))
    with pytest.raises(ValueError, match="broadcast"):
        ppo_clipped_policy_loss(torch.zeros(2, 1), torch.zeros(2, 1), torch.zeros(2, 3))


@TORCH_SETTINGS
@given(inputs=loss_inputs())
def test_k3_is_nonnegative_and_zero_at_equality(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logprobs_bt, ref_bt, _ = inputs
    k3_bt = approx_kl_k3(logprobs_bt, ref_bt)
    assert k3_bt.shape == logprobs_bt.shape
    assert (k3_bt >= 0).all()
    assert (approx_kl_k3(logprobs_bt, logprobs_bt.clone()) == 0).all()
    r_bt = ref_bt - logprobs_bt
    torch.testing.assert_close(k3_bt, torch.exp(r_bt) - 1 - r_bt)
    assert (k3_bt[r_bt.abs() > 1e-6] > 0).all()  # below that, r**2 / 2 may underflow


@TORCH_SETTINGS
@given(inputs=loss_inputs())
def test_no_input_is_mutated(inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
    copies = [x.clone() for x in inputs]
    versions = [x._version for x in inputs]
    ppo_clipped_policy_loss(*inputs)
    approx_kl_k3(inputs[0], inputs[1])
    for x, copy, version in zip(inputs, copies, versions, strict=True):
        assert torch.equal(x, copy) and x._version == version


# ---------------------------------------------------------------- dual clip


@st.composite
def far_ratio_inputs(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Like `loss_inputs`, with log-ratios in [-1.5, 1.5]: ratios up to 4.5 cross dual_clip=3."""
    b, t = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    n = b * t
    logprobs_bt = torch.tensor(
        draw(st.lists(st.floats(-5.0, 0.0), min_size=n, max_size=n)), dtype=torch.float64
    ).reshape(b, t)
    log_ratio_bt = torch.tensor(
        draw(st.lists(st.floats(-1.5, 1.5), min_size=n, max_size=n)), dtype=torch.float64
    ).reshape(b, t)
    advantages_bt = torch.tensor(
        draw(st.lists(st.floats(-3.0, 3.0), min_size=n, max_size=n)), dtype=torch.float64
    ).reshape(b, t)
    return logprobs_bt, logprobs_bt - log_ratio_bt, advantages_bt


@TORCH_SETTINGS
@given(inputs=far_ratio_inputs())
def test_dual_clip_caps_negative_advantages_only(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logprobs_bt, old_bt, advantages_bt = inputs
    plain_bt = ppo_clipped_policy_loss(logprobs_bt, old_bt, advantages_bt)
    logprobs_bt = logprobs_bt.clone().requires_grad_(True)
    dual_bt = ppo_clipped_policy_loss(logprobs_bt, old_bt, advantages_bt, dual_clip=3.0)
    (grad_bt,) = torch.autograd.grad(dual_bt.sum(), logprobs_bt)
    dual_bt = dual_bt.detach()
    positive = advantages_bt >= 0
    torch.testing.assert_close(dual_bt[positive], plain_bt[positive])
    assert (dual_bt <= 3.0 * advantages_bt.abs() + 1e-12).all()
    ratio_bt = torch.exp(logprobs_bt.detach() - old_bt)
    capped = (advantages_bt < 0) & (ratio_bt > 3.0 + 1e-9)
    assert (grad_bt[capped] == 0).all()
    torch.testing.assert_close(dual_bt[~capped], plain_bt[~capped])


def test_dual_clip_must_exceed_one() -> None:
    with pytest.raises(ValueError, match="dual_clip"):
        ppo_clipped_policy_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), dual_clip=1)


# ---------------------------------------------------------------- GSPO


@st.composite
def gspo_inputs(
    draw: st.DrawFn,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logprobs_bt, old_bt, advantages_b1, mask_bt) with small log-ratios, garbage padding."""
    logprobs_bt, old_bt, _ = draw(loss_inputs())
    b, t = logprobs_bt.shape
    old_bt = logprobs_bt + (old_bt - logprobs_bt) * 1e-3  # log-ratios within 2e-3
    mask_bt = torch.tensor(draw(st.lists(st.booleans(), min_size=b * t, max_size=b * t)))
    mask_bt = mask_bt.reshape(b, t)
    advantages = draw(st.lists(st.floats(-3.0, 3.0), min_size=b, max_size=b))
    advantages_b1 = torch.tensor(advantages, dtype=torch.float64).reshape(b, 1)
    logprobs_bt = torch.where(mask_bt, logprobs_bt, torch.tensor(float("nan"), dtype=torch.float64))
    return logprobs_bt, old_bt, advantages_b1, mask_bt


def gspo_grad(
    logprobs_bt: torch.Tensor,
    old_bt: torch.Tensor,
    advantages_b1: torch.Tensor,
    mask_bt: torch.Tensor,
    **eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    logprobs_bt = logprobs_bt.clone().requires_grad_(True)
    loss_bt = gspo_policy_loss(logprobs_bt, old_bt, advantages_b1, mask_bt, **eps)
    loss = masked_seq_mean_token_mean(loss_bt, mask_bt)
    (grad_bt,) = torch.autograd.grad(loss, logprobs_bt)
    return loss_bt.detach(), grad_bt


@TORCH_SETTINGS
@given(inputs=gspo_inputs())
def test_gspo_gradient_is_the_sequence_ratio_times_the_mean_token_gradient(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logprobs_bt, old_bt, advantages_b1, mask_bt = inputs
    # A wide clip range never binds: grad = -s_b A_b m_bt / |y_b| / S.
    loss_bt, grad_bt = gspo_grad(
        logprobs_bt, old_bt, advantages_b1, mask_bt, eps_low=0.5, eps_high=0.5
    )
    lengths_b1 = mask_bt.sum(dim=-1, keepdim=True)
    log_ratio_bt = torch.where(mask_bt, logprobs_bt - old_bt, 0)
    seq_ratio_b1 = torch.exp(log_ratio_bt.sum(dim=-1, keepdim=True) / lengths_b1.clamp(min=1))
    num_seqs = max(int((lengths_b1 > 0).sum()), 1)
    expected_bt = -seq_ratio_b1 * advantages_b1 * mask_bt / lengths_b1.clamp(min=1) / num_seqs
    torch.testing.assert_close(grad_bt, expected_bt)
    torch.testing.assert_close(
        loss_bt[mask_bt], (-seq_ratio_b1 * advantages_b1).expand_as(loss_bt)[mask_bt]
    )


@TORCH_SETTINGS
@given(inputs=gspo_inputs())
def test_gspo_clips_whole_sequences(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logprobs_bt, old_bt, advantages_b1, mask_bt = inputs
    _, grad_bt = gspo_grad(logprobs_bt, old_bt, advantages_b1, mask_bt)
    log_ratio_bt = torch.where(mask_bt, logprobs_bt - old_bt, 0)
    seq_ratio_b = torch.exp(log_ratio_bt.sum(-1) / mask_bt.sum(-1).clamp(min=1))
    a_b = advantages_b1[:, 0]
    clipped_b = ((seq_ratio_b > 1 + 4e-4 + 1e-12) & (a_b > 0)) | (
        (seq_ratio_b < 1 - 3e-4 - 1e-12) & (a_b < 0)
    )
    assert (grad_bt[clipped_b] == 0).all()
    assert (grad_bt[~mask_bt] == 0).all()  # padding (NaN log-probs) gets no gradient


@TORCH_SETTINGS
@given(inputs=loss_inputs())
def test_gspo_on_one_token_sequences_is_ppo(
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logprobs_bt, old_bt, advantages_bt = inputs
    logprobs_b1, old_b1 = logprobs_bt[:, :1], old_bt[:, :1]
    advantages_b1 = advantages_bt[:, :1]
    mask_b1 = torch.ones_like(logprobs_b1, dtype=torch.bool)
    torch.testing.assert_close(
        gspo_policy_loss(logprobs_b1, old_b1, advantages_b1, mask_b1, eps_low=0.2, eps_high=0.28),
        ppo_clipped_policy_loss(logprobs_b1, old_b1, advantages_b1),
    )
