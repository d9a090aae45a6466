"""Advantage estimators: group baselines (GRPO, Dr. GRPO, RLOO), GAE, batch whitening.

Shapes: `_gn` = `[num_groups, group_size]` (any leading dims; a group lies along the last),
`_bt` = `[batch, time]`. Advantages are constants of the policy update: every estimator works
on detached inputs and returns tensors without gradient history.
"""

from typing import NamedTuple

import torch

from cuda_agent.rl_core._aggregation import check_mask
from cuda_agent.rl_core._scan import reverse_discounted_cumsum


def group_normalized_advantages(
    rewards_gn: torch.Tensor,
    eps: float = 1e-6,
    scale: bool = True,
    *,
    mask_gn: torch.Tensor | None = None,
) -> torch.Tensor:
    """Group-relative advantages of GRPO (DeepSeekMath, arXiv 2402.03300), shape of the input.

        A_gi = (r_gi - mean_g) / (std_g + eps)     scale=True  (GRPO)
        A_gi =  r_gi - mean_g                      scale=False (Dr. GRPO, arXiv 2503.20783)

    `rewards_gn` is `[num_groups, group_size]` (any leading dims; groups lie along the last):
    the rewards of `group_size` answers to the same prompt. `std_g` is the population standard
    deviation (divide by `group_size`, not `group_size - 1`): it is defined for every group
    size, and a group whose rewards are all equal (including a group of one) gets all-zero
    advantages, since nothing in it is better than its peers. Dr. GRPO drops the division
    because it up-weights prompts whose rewards barely vary (too easy or too hard).

    `mask_gn` (bool, shape of `rewards_gn`): groups of different sizes padded to one width,
    e.g. the turns of a group's multi-turn episodes (Kevin normalises every turn's return
    against all turns of its group, arXiv 2507.11948). The mean and std are then over the kept
    entries (`n_g = sum_i m_gi`), and masked-out entries get 0.
    """
    rewards_gn = rewards_gn.detach()
    if mask_gn is None:
        kept_gn = torch.ones_like(rewards_gn, dtype=torch.bool)
    else:
        kept_gn = check_mask(rewards_gn, mask_gn)
    rewards_gn = torch.where(kept_gn, rewards_gn, 0)
    count_g1 = kept_gn.sum(dim=-1, keepdim=True).clamp(min=1)
    mean_g1 = rewards_gn.sum(dim=-1, keepdim=True) / count_g1
    centred_gn = torch.where(kept_gn, rewards_gn - mean_g1, 0)
    # Exactly zero where a group's rewards are all equal: the mean of equal floats can differ
    # from them by a rounding error (2.6992 three times: 4e-10 off in float64).
    high_g1 = torch.where(kept_gn, rewards_gn, -torch.inf).amax(dim=-1, keepdim=True)
    low_g1 = torch.where(kept_gn, rewards_gn, torch.inf).amin(dim=-1, keepdim=True)
    equal_g1 = ~(high_g1 > low_g1)
    centred_gn = torch.where(equal_g1, torch.zeros_like(centred_gn), centred_gn)
    if not scale:
        return centred_gn
    std_g1 = (centred_gn.square().sum(dim=-1, keepdim=True) / count_g1).sqrt()
    return centred_gn / (std_g1 + eps)


def leave_one_out_advantages(
    rewards_gn: torch.Tensor, *, mask_gn: torch.Tensor | None = None
) -> torch.Tensor:
    """RLOO advantages: each reward minus the mean of the others in its group, shape of input.

        A_gi = r_gi - (1 / (n - 1)) sum_{j != i} r_gj  =  n / (n - 1) * (r_gi - mean_g)

    Kool et al., "Buy 4 REINFORCE samples, get a baseline for free!" (ICLR workshop 2019);
    Ahmadian et al., "Back to Basics" (arXiv 2402.14740). The baseline does not depend on the
    sample it is subtracted from, so the policy gradient stays unbiased. Needs `n >= 2`.
    With `mask_gn` the sums and `n_g` are over kept entries; a group with fewer than two kept
    entries has no baseline and gets 0, as do masked-out entries.
    """
    group_size = rewards_gn.shape[-1]
    rewards_gn = rewards_gn.detach()
    if mask_gn is None:
        if group_size < 2:
            raise ValueError(
                f"leave-one-out needs groups of at least 2 samples, got {group_size}; "
                "sample more answers per prompt or use group_normalized_advantages"
            )
        others_sum_gn = rewards_gn.sum(dim=-1, keepdim=True) - rewards_gn
        return rewards_gn - others_sum_gn / (group_size - 1)
    kept_gn = check_mask(rewards_gn, mask_gn)
    rewards_gn = torch.where(kept_gn, rewards_gn, 0)
    count_g1 = kept_gn.sum(dim=-1, keepdim=True)
    others_sum_gn = rewards_gn.sum(dim=-1, keepdim=True) - rewards_gn
    advantages_gn = rewards_gn - others_sum_gn / (count_g1 - 1).clamp(min=1)
    return torch.where(kept_gn & (count_g1 >= 2), advantages_gn, 0)


def informative_groups(rewards_gn: torch.Tensor) -> torch.Tensor:
    """True for each group whose rewards are not all equal, bool `[num_groups]`.

        keep_g = max_i r_gi > min_i r_gi

    DAPO's dynamic sampling (arXiv 2503.14476): a group with zero reward variance has all-zero
    group-relative advantages, so it adds compute and no signal; drop it with
    `rewards_gn[keep_g]` (and its sequences) before the update. Exact comparison: rewards that
    differ by rounding only still count as different.
    """
    return rewards_gn.amax(dim=-1) > rewards_gn.amin(dim=-1)


class GaeOutput(NamedTuple):
    """Advantages and value targets of GAE, both `[B, T]`, zero where the mask is False."""

    advantages_bt: torch.Tensor
    returns_bt: torch.Tensor


def gae_advantages(
    rewards_bt: torch.Tensor,
    values_bt: torch.Tensor,
    *,
    gamma: float,
    lam: float,
    mask_bt: torch.Tensor | None = None,
) -> GaeOutput:
    """Generalised advantage estimation (Schulman et al., arXiv 1506.02438) and its returns.

        delta_t = r_t + gamma * V_{next(t)} - V_t
        A_t     = delta_t + gamma * lam * A_{next(t)}          (A and V after the end: 0)
        R_t     = A_t + V_t                                    (the value target)

    `next(t)` is the next position the mask keeps: tokens the policy did not generate (tool
    outputs between turns, padding) are skipped as if absent, so a multi-turn trajectory is one
    episode over its own tokens, and rewards and values at masked-out positions are ignored
    (place turn rewards on kept tokens, see `turn_rewards_at_turn_ends`). No mask: every
    position is kept. lam = 1 gives Monte-Carlo returns minus values, lam = 0 the one-step TD
    error; CUDA Agent uses gamma = 1, lam = 0.95 with the reward on the last token. Inputs are
    detached: the outputs are regression and policy-gradient targets.
    """
    if values_bt.shape != rewards_bt.shape:
        raise ValueError(
            f"values_bt {tuple(values_bt.shape)} must have the shape of rewards_bt "
            f"{tuple(rewards_bt.shape)}"
        )
    if mask_bt is None:
        mask_bt = torch.ones_like(rewards_bt, dtype=torch.bool)
    kept_bt = check_mask(rewards_bt, mask_bt)
    rewards_bt = torch.where(kept_bt, rewards_bt.detach(), 0)
    values_bt = torch.where(kept_bt, values_bt.detach(), 0)
    next_value_bt = _value_at_next_kept(values_bt, kept_bt)
    delta_bt = torch.where(kept_bt, rewards_bt + gamma * next_value_bt - values_bt, 0)
    # full_like, not a Python scalar: torch.where would round gamma * lam to float32.
    discount_bt = torch.where(kept_bt, torch.full_like(delta_bt, gamma * lam), 1.0)
    advantages_bt = torch.where(kept_bt, reverse_discounted_cumsum(delta_bt, discount_bt), 0)
    return GaeOutput(advantages_bt, torch.where(kept_bt, advantages_bt + values_bt, 0))


def _value_at_next_kept(values_bt: torch.Tensor, kept_bt: torch.Tensor) -> torch.Tensor:
    """`V_{next(t)}`: the value at the first kept position after t, 0 if there is none."""
    num_steps = kept_bt.shape[-1]
    positions_bt = torch.arange(num_steps, device=kept_bt.device).expand_as(kept_bt)
    # Index of the first kept position >= t (num_steps: none), by a reversed running minimum.
    kept_index_bt = torch.where(kept_bt, positions_bt, num_steps)
    first_kept_bt = kept_index_bt.flip(-1).cummin(dim=-1).values.flip(-1)
    after_end_b1 = torch.full_like(first_kept_bt[..., :1], num_steps)
    next_kept_bt = torch.cat([first_kept_bt[..., 1:], after_end_b1], dim=-1)
    values_with_end_bt = torch.cat([values_bt, torch.zeros_like(values_bt[..., :1])], dim=-1)
    return values_with_end_bt.gather(-1, next_kept_bt)


def batch_normalized_advantages(
    advantages_bt: torch.Tensor, mask_bt: torch.Tensor, *, eps: float = 1e-8
) -> torch.Tensor:
    """Advantages whitened over all kept tokens of the batch, `[B, T]`, 0 where masked out.

        A'_bt = (A_bt - mean_kept) / (std_kept + eps)    (population std over kept tokens)

    REINFORCE++ (Hu, arXiv 2501.03262) normalises token-level returns by batch statistics
    instead of a learned critic or per-prompt groups; REINFORCE++-baseline first subtracts the
    group mean (`group_normalized_advantages(..., scale=False)`), then applies this. Compute it
    on the whole batch before splitting into micro-batches: the statistics are global.
    """
    kept_bt = check_mask(advantages_bt, mask_bt)
    advantages_bt = torch.where(kept_bt, advantages_bt.detach(), 0)
    num_kept = kept_bt.sum().clamp(min=1)
    mean = advantages_bt.sum() / num_kept
    centred_bt = torch.where(kept_bt, advantages_bt - mean, 0)
    std = (centred_bt.square().sum() / num_kept).sqrt()
    return centred_bt / (std + eps)
