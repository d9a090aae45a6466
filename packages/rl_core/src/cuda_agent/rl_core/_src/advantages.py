"""Advantage estimators."""

import torch


def group_normalized_advantages(
    rewards_gn: torch.Tensor, eps: float = 1e-6, scale: bool = True
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
    """
    centred_gn = rewards_gn - rewards_gn.mean(dim=-1, keepdim=True)
    if not scale:
        return centred_gn
    std_g1 = rewards_gn.std(dim=-1, keepdim=True, correction=0)
    return centred_gn / (std_g1 + eps)
