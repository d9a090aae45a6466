"""Laws of turn-level credit: turn numbering, rewards at turn ends, discounted turn returns."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.rl_core import (
    discounted_returns,
    spread_turns_to_tokens,
    turn_index_from_loss_mask,
    turn_rewards_at_turn_ends,
)

TORCH_SETTINGS = settings(deadline=None, max_examples=40)


@st.composite
def multi_turn_batch(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(loss_mask_bt, turn_rewards_bk, K): random runs of kept tokens between masked ones."""
    b, t = draw(st.integers(1, 3)), draw(st.integers(1, 16))
    mask = torch.tensor(draw(st.lists(st.booleans(), min_size=b * t, max_size=b * t)))
    mask = mask.reshape(b, t)
    num_turns = int(turn_index_from_loss_mask(mask).max()) + 1 + draw(st.integers(0, 2))
    rewards = draw(st.lists(st.floats(-1, 3), min_size=b * num_turns, max_size=b * num_turns))
    return mask, torch.tensor(rewards, dtype=torch.float64).reshape(b, num_turns), num_turns


def runs(mask_row: torch.Tensor) -> list[list[int]]:
    """Maximal runs of kept positions, in order: the turns, read the slow way."""
    out: list[list[int]] = []
    for t, kept in enumerate(mask_row.tolist()):
        if kept and t > 0 and mask_row[t - 1]:
            out[-1].append(t)
        elif kept:
            out.append([t])
    return out


@TORCH_SETTINGS
@given(batch=multi_turn_batch())
def test_turns_are_runs_of_kept_tokens(batch: tuple[torch.Tensor, torch.Tensor, int]) -> None:
    mask, _, _ = batch
    turn = turn_index_from_loss_mask(mask)
    assert turn.dtype == torch.int64 and (turn[~mask] == -1).all()
    for b in range(mask.shape[0]):
        for k, positions in enumerate(runs(mask[b])):
            assert (turn[b, positions] == k).all()


@TORCH_SETTINGS
@given(batch=multi_turn_batch())
def test_each_turn_reward_lands_on_its_last_kept_token(
    batch: tuple[torch.Tensor, torch.Tensor, int],
) -> None:
    mask, turn_rewards, _ = batch
    turn = turn_index_from_loss_mask(mask)
    token_rewards = turn_rewards_at_turn_ends(turn_rewards, turn, mask)
    expected = torch.zeros(mask.shape, dtype=torch.float64)
    for b in range(mask.shape[0]):
        for k, positions in enumerate(runs(mask[b])):
            expected[b, positions[-1]] = turn_rewards[b, k]
    torch.testing.assert_close(token_rewards, expected)


@TORCH_SETTINGS
@given(batch=multi_turn_batch(), gamma=st.floats(0, 1))
def test_discounted_turn_returns_are_the_explicit_sums(
    batch: tuple[torch.Tensor, torch.Tensor, int], gamma: float
) -> None:
    _, turn_rewards, num_turns = batch
    returns = discounted_returns(turn_rewards, gamma=gamma)
    for b in range(turn_rewards.shape[0]):
        for k in range(num_turns):
            expected = sum(
                gamma ** (j - k) * float(turn_rewards[b, j]) for j in range(k, num_turns)
            )
            assert float(returns[b, k]) == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_kevin_example_gamma_04() -> None:
    # Kevin (arXiv 2507.11948): turn rewards 0, 0, 1 with gamma 0.4 credit the first turn 0.16.
    returns = discounted_returns(torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64), gamma=0.4)
    torch.testing.assert_close(returns, torch.tensor([[0.16, 0.4, 1.0]], dtype=torch.float64))


@TORCH_SETTINGS
@given(batch=multi_turn_batch(), gamma=st.floats(0, 1))
def test_turn_returns_spread_equal_token_returns_with_turn_end_rewards(
    batch: tuple[torch.Tensor, torch.Tensor, int], gamma: float
) -> None:
    """Two roads to the same credit: per-turn returns spread onto tokens, or token returns
    with rewards at turn ends read at each turn's end, once discounting happens only across
    turns (gamma applies at turn ends: the discount per token is 1 inside a turn)."""
    mask, turn_rewards, _ = batch
    turn = turn_index_from_loss_mask(mask)
    # Turns a row does not have (padding turns) are masked out of the turn-level returns.
    turns_per_row = (turn.amax(dim=-1) + 1).clamp(min=0)
    turn_mask = torch.arange(turn_rewards.shape[1]) < turns_per_row[:, None]
    turn_returns = discounted_returns(turn_rewards, gamma=gamma, mask_bt=turn_mask)
    spread = spread_turns_to_tokens(turn_returns, turn, mask)
    token_rewards = turn_rewards_at_turn_ends(turn_rewards, turn, mask)
    is_end = turn_rewards_at_turn_ends(torch.ones_like(turn_rewards), turn, mask) > 0
    # Discount only when stepping from a turn's end to the next turn: per-token gamma is 1
    # inside a turn, gamma at the last token of a turn (via a manual recurrence).
    expected = torch.zeros_like(token_rewards)
    for b in range(mask.shape[0]):
        acc = 0.0
        for t in reversed(range(mask.shape[1])):
            if mask[b, t]:
                acc = float(token_rewards[b, t]) + (gamma if is_end[b, t] else 1.0) * acc
                expected[b, t] = acc
    torch.testing.assert_close(spread, expected)
    assert (spread[~mask] == 0).all()


def test_spread_ignores_garbage_turn_index_outside_the_mask() -> None:
    mask = torch.tensor([[False, True, True, False, True]])
    turn = torch.tensor([[99, 0, 0, -7, 1]])
    values = torch.tensor([[2.0, 5.0]])
    torch.testing.assert_close(
        spread_turns_to_tokens(values, turn, mask), torch.tensor([[0.0, 2.0, 2.0, 0.0, 5.0]])
    )
    torch.testing.assert_close(
        turn_rewards_at_turn_ends(values, turn, mask), torch.tensor([[0.0, 0.0, 2.0, 0.0, 5.0]])
    )
    assert not math.isnan(float(spread_turns_to_tokens(values, turn, mask).sum()))
