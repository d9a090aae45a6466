"""Laws of the group-normalized advantages."""

import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cuda_agent.rl_core import group_normalized_advantages

# torch's first calls (dispatch, vmap set-up) are slow: a deadline would make tests flaky.
TORCH_SETTINGS = settings(deadline=None, max_examples=60)


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
