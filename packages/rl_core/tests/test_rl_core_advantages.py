"""Laws of the advantage estimators: group baselines, GAE, batch whitening."""

import math

import pytest
import torch
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from cuda_agent.rl_core import (
    batch_normalized_advantages,
    discounted_returns,
    gae_advantages,
    group_normalized_advantages,
    informative_groups,
    leave_one_out_advantages,
)
from cuda_agent.rl_core._scan import reverse_discounted_cumsum

# torch's first calls (dispatch, vmap set-up) are slow: a deadline would make tests flaky.
TORCH_SETTINGS = settings(deadline=None, max_examples=40)


@st.composite
def rewards_gn(draw: st.DrawFn, min_group_size: int = 1) -> torch.Tensor:
    num_groups = draw(st.integers(1, 4))
    group_size = draw(st.integers(min_group_size, 6))
    n = num_groups * group_size
    xs = draw(st.lists(st.floats(-3, 3), min_size=n, max_size=n))
    return torch.tensor(xs, dtype=torch.float64).reshape(num_groups, group_size)


@TORCH_SETTINGS
@given(rewards=rewards_gn(), scale=st.booleans())
def test_zero_mean_per_group(rewards: torch.Tensor, scale: bool) -> None:
    advantages = group_normalized_advantages(rewards, scale=scale)
    assert advantages.shape == rewards.shape
    torch.testing.assert_close(
        advantages.mean(dim=-1),
        torch.zeros(rewards.shape[0], dtype=torch.float64),
        atol=1e-9,
        rtol=0,
    )


@TORCH_SETTINGS
@given(
    rewards=rewards_gn(min_group_size=2),
    a=st.floats(0.5, 10),
    b=st.floats(-10, 10),
)
def test_invariant_to_positive_affine_maps(rewards: torch.Tensor, a: float, b: float) -> None:
    # eps breaks exact invariance for near-constant groups; keep groups well spread.
    assume(bool((rewards.std(dim=-1, correction=0) > 0.1).all()))
    advantages = group_normalized_advantages(rewards, eps=1e-12)
    torch.testing.assert_close(group_normalized_advantages(a * rewards + b, eps=1e-12), advantages)
    # ... and, with population std, unit spread per group.
    torch.testing.assert_close(
        advantages.std(dim=-1, correction=0), torch.ones(rewards.shape[0], dtype=torch.float64)
    )


@TORCH_SETTINGS
@given(rewards=rewards_gn(), scale=st.booleans())
def test_constant_groups_and_groups_of_one_get_zero(rewards: torch.Tensor, scale: bool) -> None:
    assert (group_normalized_advantages(rewards[:, :1], scale=scale) == 0).all()
    # The mean of equal floats can miss them by an ulp, so constant groups are only ~0.
    constant = rewards[:, :1].expand_as(rewards).clone()
    advantages = group_normalized_advantages(constant, scale=scale)
    torch.testing.assert_close(advantages, torch.zeros_like(advantages), atol=1e-9, rtol=0)


@TORCH_SETTINGS
@given(rewards=rewards_gn())
def test_unscaled_is_mean_centring(rewards: torch.Tensor) -> None:
    torch.testing.assert_close(
        group_normalized_advantages(rewards, scale=False),
        rewards - rewards.mean(dim=-1, keepdim=True),
    )


def test_paper_example() -> None:
    rewards = torch.tensor([[-1.0, 1.0, 3.0, 1.0]], dtype=torch.float64)  # mean 1, std sqrt(2)
    expected = torch.tensor([[-2.0, 0.0, 2.0, 0.0]], dtype=torch.float64) / 2**0.5
    torch.testing.assert_close(group_normalized_advantages(rewards, eps=0.0), expected)


@TORCH_SETTINGS
@given(rewards=rewards_gn(), scale=st.booleans())
def test_vmap_over_a_batch_of_group_sets(rewards: torch.Tensor, scale: bool) -> None:
    batch = torch.stack([rewards, 2 * rewards - 1])

    def normalize(r: torch.Tensor) -> torch.Tensor:
        return group_normalized_advantages(r, scale=scale)

    torch.testing.assert_close(torch.func.vmap(normalize)(batch), normalize(batch))


# ---------------------------------------------------------------- RLOO, group filtering


@TORCH_SETTINGS
@given(rewards=rewards_gn(min_group_size=2))
def test_rloo_equals_an_explicit_leave_one_out_loop(rewards: torch.Tensor) -> None:
    num_groups, group_size = rewards.shape
    expected = torch.empty_like(rewards)
    for g in range(num_groups):
        for i in range(group_size):
            others = [rewards[g, j] for j in range(group_size) if j != i]
            expected[g, i] = rewards[g, i] - torch.stack(others).mean()
    advantages = leave_one_out_advantages(rewards)
    torch.testing.assert_close(advantages, expected)
    # ... which is the mean-centred advantage scaled by n / (n - 1), so zero mean per group.
    centred = group_normalized_advantages(rewards, scale=False)
    torch.testing.assert_close(advantages, centred * group_size / (group_size - 1))


def test_rloo_needs_two_samples_per_group() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        leave_one_out_advantages(torch.zeros(3, 1))


@TORCH_SETTINGS
@given(rewards=rewards_gn())
@example(rewards=torch.tensor([[2.6992, 2.6992, 2.6992]], dtype=torch.float64))  # found by CI
def test_informative_groups_are_those_with_reward_variance(rewards: torch.Tensor) -> None:
    keep = informative_groups(rewards)
    assert keep.dtype == torch.bool and keep.shape == rewards.shape[:1]
    for g in range(rewards.shape[0]):
        assert bool(keep[g]) == (len(set(rewards[g].tolist())) > 1)
    # Dropped groups are exactly those whose group-relative advantages are all zero.
    if (~keep).any():
        assert (group_normalized_advantages(rewards[~keep]) == 0).all()


# ---------------------------------------------------------------- GAE and the scan beneath it


@st.composite
def trajectories_bt(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rewards_bt, values_bt, mask_bt), float64, with garbage where the mask is False."""
    b, t = draw(st.integers(1, 3)), draw(st.integers(1, 12))
    floats = st.lists(st.floats(-3, 3), min_size=b * t, max_size=b * t)
    rewards = torch.tensor(draw(floats), dtype=torch.float64).reshape(b, t)
    values = torch.tensor(draw(floats), dtype=torch.float64).reshape(b, t)
    mask = torch.tensor(draw(st.lists(st.booleans(), min_size=b * t, max_size=b * t)))
    mask = mask.reshape(b, t)
    garbage = torch.tensor(math.nan, dtype=torch.float64)
    return torch.where(mask, rewards, garbage), torch.where(mask, values, garbage), mask


def gae_reference(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The textbook loop over each row's kept positions only (masked positions are absent)."""
    advantages, returns = torch.zeros_like(rewards), torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        next_value, last = 0.0, 0.0
        for t in reversed([t for t in range(rewards.shape[1]) if mask[b, t]]):
            delta = float(rewards[b, t]) + gamma * next_value - float(values[b, t])
            last = delta + gamma * lam * last
            advantages[b, t], returns[b, t] = last, last + float(values[b, t])
            next_value = float(values[b, t])
    return advantages, returns


@TORCH_SETTINGS
@given(data=trajectories_bt(), gamma=st.floats(0, 1), lam=st.floats(0, 1))
def test_gae_equals_the_loop_over_kept_positions(
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor], gamma: float, lam: float
) -> None:
    rewards, values, mask = data
    out = gae_advantages(rewards, values, gamma=gamma, lam=lam, mask_bt=mask)
    expected_advantages, expected_returns = gae_reference(rewards, values, mask, gamma, lam)
    torch.testing.assert_close(out.advantages_bt, expected_advantages)
    torch.testing.assert_close(out.returns_bt, expected_returns)


@TORCH_SETTINGS
@given(data=trajectories_bt())
def test_gae_with_gamma_and_lambda_one_is_reward_to_go_minus_value(
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    rewards, values, mask = data
    out = gae_advantages(rewards, values, gamma=1.0, lam=1.0, mask_bt=mask)
    kept_rewards = torch.where(mask, rewards, 0)
    reward_to_go = kept_rewards.flip(-1).cumsum(-1).flip(-1)
    torch.testing.assert_close(out.advantages_bt, torch.where(mask, reward_to_go - values, 0))
    torch.testing.assert_close(out.returns_bt, torch.where(mask, reward_to_go, 0))
    torch.testing.assert_close(discounted_returns(rewards, gamma=1.0, mask_bt=mask), out.returns_bt)


@TORCH_SETTINGS
@given(data=trajectories_bt(), gamma=st.floats(0, 1))
def test_gae_with_lambda_zero_is_the_td_error(
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor], gamma: float
) -> None:
    rewards, values, _ = data
    rewards, values = rewards.nan_to_num(0.5), values.nan_to_num(-0.5)
    out = gae_advantages(rewards, values, gamma=gamma, lam=0.0)  # no mask: all kept
    next_values = torch.cat([values[:, 1:], torch.zeros_like(values[:, :1])], dim=-1)
    torch.testing.assert_close(out.advantages_bt, rewards + gamma * next_values - values)


@TORCH_SETTINGS
@given(num_steps=st.integers(0, 40), data=st.data())
def test_two_level_scan_equals_the_sequential_loop(num_steps: int, data: st.DataObject) -> None:
    x = torch.tensor(
        data.draw(st.lists(st.floats(-5, 5), min_size=2 * num_steps, max_size=2 * num_steps)),
        dtype=torch.float64,
    ).reshape(2, num_steps)
    c = torch.tensor(
        data.draw(st.lists(st.floats(0, 1), min_size=2 * num_steps, max_size=2 * num_steps)),
        dtype=torch.float64,
    ).reshape(2, num_steps)
    expected, acc = torch.zeros_like(x), torch.zeros(2, dtype=torch.float64)
    for t in reversed(range(num_steps)):
        acc = x[:, t] + c[:, t] * acc
        expected[:, t] = acc
    torch.testing.assert_close(reverse_discounted_cumsum(x, c), expected)


@TORCH_SETTINGS
@given(data=trajectories_bt())
def test_vmap_gae_per_sequence(data: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
    rewards, values, mask = data

    def gae(r: torch.Tensor, v: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return gae_advantages(r, v, gamma=0.9, lam=0.95, mask_bt=m).advantages_bt

    torch.testing.assert_close(
        torch.func.vmap(gae)(rewards, values, mask), gae(rewards, values, mask)
    )


# ---------------------------------------------------------------- REINFORCE++ batch whitening


@TORCH_SETTINGS
@given(data=trajectories_bt(), pad=st.integers(0, 3))
def test_batch_normalized_advantages_are_white_over_kept_tokens(
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor], pad: int
) -> None:
    advantages, _, mask = data
    kept = advantages[mask]
    assume(kept.numel() >= 2 and float(kept.std(correction=0)) > 0.1)
    normalized = batch_normalized_advantages(advantages, mask, eps=0.0)
    assert (normalized[~mask] == 0).all()
    torch.testing.assert_close(normalized[mask].mean(), torch.tensor(0.0, dtype=torch.float64))
    torch.testing.assert_close(
        normalized[mask].std(correction=0), torch.tensor(1.0, dtype=torch.float64)
    )
    padded = torch.nn.functional.pad(advantages, (0, pad), value=math.inf)
    padded_mask = torch.nn.functional.pad(mask, (0, pad), value=False)
    torch.testing.assert_close(
        batch_normalized_advantages(padded, padded_mask, eps=0.0)[:, : mask.shape[1]], normalized
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=1, max_size=6),
        min_size=1,
        max_size=4,
    )
)
def test_masked_group_advantages_equal_each_group_on_its_own(groups: list[list[float]]) -> None:
    # Groups of different sizes padded to one width with a mask get exactly the advantages
    # each group gets alone; the padding gets 0.
    width = max(len(g) for g in groups)
    rewards = torch.full((len(groups), width), 123.0, dtype=torch.float64)
    mask = torch.zeros(len(groups), width, dtype=torch.bool)
    for i, g in enumerate(groups):
        rewards[i, : len(g)] = torch.tensor(g, dtype=torch.float64)
        mask[i, : len(g)] = True
    for scale in (True, False):
        masked = group_normalized_advantages(rewards, scale=scale, mask_gn=mask)
        for i, g in enumerate(groups):
            alone = group_normalized_advantages(torch.tensor([g], dtype=torch.float64), scale=scale)
            torch.testing.assert_close(masked[i, : len(g)], alone[0])
            assert bool((masked[i, len(g) :] == 0).all())
    loo = leave_one_out_advantages(rewards, mask_gn=mask)
    for i, g in enumerate(groups):
        if len(g) >= 2:
            alone = leave_one_out_advantages(torch.tensor([g], dtype=torch.float64))
            torch.testing.assert_close(loo[i, : len(g)], alone[0])
        else:
            assert bool((loo[i] == 0).all())


def test_masked_group_advantages_by_hand() -> None:
    rewards = torch.tensor([[1.0, 3.0, 99.0], [2.0, 2.0, 5.0]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    out = group_normalized_advantages(rewards, scale=False, mask_gn=mask)
    torch.testing.assert_close(out, torch.tensor([[-1.0, 1.0, 0.0], [-1.0, -1.0, 2.0]]))
    loo = leave_one_out_advantages(rewards, mask_gn=mask)
    torch.testing.assert_close(loo, torch.tensor([[-2.0, 2.0, 0.0], [-1.5, -1.5, 3.0]]))
