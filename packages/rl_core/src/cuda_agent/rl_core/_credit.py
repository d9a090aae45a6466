"""Credit assignment over time: discounted returns, and turn-level credit for multi-turn agents.

A multi-turn trajectory is one token sequence `[T]`: prompt, then for each turn the policy's
answer followed by the tool's output. The loss mask keeps the policy's tokens only, so each
maximal run of kept tokens is one turn. `turn_index_from_loss_mask` numbers the turns,
`turn_rewards_at_turn_ends` turns per-turn rewards `[B, K]` into token rewards (for
`gae_advantages` or `discounted_returns` over tokens), and `spread_turns_to_tokens` gives
every token of a turn that turn's value (a return or an advantage), 0 outside the mask.
"""

import torch

from cuda_agent.rl_core._aggregation import check_mask
from cuda_agent.rl_core._scan import reverse_discounted_cumsum


def discounted_returns(
    rewards_bt: torch.Tensor, *, gamma: float, mask_bt: torch.Tensor | None = None
) -> torch.Tensor:
    """Discounted reward-to-go along the last dim, `[B, T]`, 0 where the mask is False.

        G_t = r_t + gamma * G_{next(t)},    G after the last kept step = 0

    `next(t)` is the next kept step: masked-out steps are skipped (neither rewarded nor
    discounted). The time axis may be tokens or turns: over per-turn rewards `[B, K]` it is
    Kevin's multi-turn credit (Baronio et al., arXiv 2507.11948: each turn is credited with
    the discounted sum of its own and later turns' rewards, gamma = 0.4 worked best), so a
    turn that sets up a later fast kernel gets part of its reward. Over token rewards it is
    REINFORCE's return (Williams 1992). Inputs are detached.
    """
    if mask_bt is None:
        mask_bt = torch.ones_like(rewards_bt, dtype=torch.bool)
    kept_bt = check_mask(rewards_bt, mask_bt)
    rewards_bt = torch.where(kept_bt, rewards_bt.detach(), 0)
    # full_like, not a Python scalar: torch.where would round gamma to float32.
    discount_bt = torch.where(kept_bt, torch.full_like(rewards_bt, gamma), 1.0)
    return torch.where(kept_bt, reverse_discounted_cumsum(rewards_bt, discount_bt), 0)


def turn_index_from_loss_mask(loss_mask_bt: torch.Tensor) -> torch.Tensor:
    """Index of the turn each token belongs to, int64 `[B, T]`; -1 outside the loss mask.

        turn_bt = (number of runs of kept tokens starting at or before t) - 1,  where m_bt

    A run starts at a kept token whose predecessor is not kept (or that is the first token),
    so prompt and tool-output tokens separate turns. Two turns with nothing masked between
    them would read as one: the agent always puts the tool's output (or a user message)
    between them.
    """
    kept_bt = loss_mask_bt.bool()
    previous_bt = torch.cat([torch.zeros_like(kept_bt[..., :1]), kept_bt[..., :-1]], dim=-1)
    starts_bt = kept_bt & ~previous_bt
    turn_bt = starts_bt.long().cumsum(dim=-1) - 1
    return torch.where(kept_bt, turn_bt, -1)


def turn_rewards_at_turn_ends(
    turn_rewards_bk: torch.Tensor, turn_index_bt: torch.Tensor, loss_mask_bt: torch.Tensor
) -> torch.Tensor:
    """Token rewards `[B, T]`: each turn's reward on its last kept token, 0 elsewhere.

        r_bt = turn_rewards_bk[b, k]  if m_bt and t = max{s : m_bs, turn_bs = k},  else 0

    The sparse-reward layout of PPO for language models (the reward arrives with the token
    that ends the answer; Ouyang et al., arXiv 2203.02155), applied per turn, so
    `gae_advantages` and `discounted_returns` over tokens see when each reward was earned.
    `turn_index_bt` must lie in `[0, K)` on kept tokens (see `turn_index_from_loss_mask`);
    it is ignored elsewhere. A turn with no kept token places nothing.
    """
    kept_bt, turn_bt = _check_turns(turn_rewards_bk, turn_index_bt, loss_mask_bt)
    if turn_rewards_bk.shape[-1] == 0:  # no turns: nothing to place (and nothing to gather)
        return torch.zeros(turn_bt.shape, dtype=turn_rewards_bk.dtype, device=turn_bt.device)
    positions_bt = torch.arange(kept_bt.shape[-1], device=kept_bt.device).expand_as(turn_bt)
    last_position_bk = torch.full_like(turn_rewards_bk, -1, dtype=torch.long).scatter_reduce(
        -1, turn_bt, torch.where(kept_bt, positions_bt, -1), reduce="amax"
    )
    is_end_bt = kept_bt & (positions_bt == last_position_bk.gather(-1, turn_bt))
    return torch.where(is_end_bt, turn_rewards_bk.detach().gather(-1, turn_bt), 0)


def spread_turns_to_tokens(
    turn_values_bk: torch.Tensor, turn_index_bt: torch.Tensor, loss_mask_bt: torch.Tensor
) -> torch.Tensor:
    """Each kept token gets its turn's value, `[B, T]`; prompt and tool tokens get 0.

        v_bt = turn_values_bk[b, turn_bt]  if m_bt,  else 0

    How per-turn returns or advantages (Kevin, arXiv 2507.11948) become per-token advantages
    for a token-level policy loss. `turn_index_bt` as in `turn_rewards_at_turn_ends`.
    """
    kept_bt, turn_bt = _check_turns(turn_values_bk, turn_index_bt, loss_mask_bt)
    if turn_values_bk.shape[-1] == 0:
        return torch.zeros(turn_bt.shape, dtype=turn_values_bk.dtype, device=turn_bt.device)
    return torch.where(kept_bt, turn_values_bk.detach().gather(-1, turn_bt), 0)


def _check_turns(
    turn_values_bk: torch.Tensor, turn_index_bt: torch.Tensor, loss_mask_bt: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The mask as bool and the turn index made safe to gather with (0 outside the mask)."""
    kept_bt = check_mask(turn_index_bt, loss_mask_bt)
    if turn_values_bk.shape[:-1] != turn_index_bt.shape[:-1]:
        raise ValueError(
            f"turn values {tuple(turn_values_bk.shape)} and turn_index_bt "
            f"{tuple(turn_index_bt.shape)} must share their batch dims"
        )
    return kept_bt, torch.where(kept_bt, turn_index_bt.long(), 0)
