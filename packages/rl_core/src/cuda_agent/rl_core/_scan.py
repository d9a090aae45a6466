"""The one recurrence behind returns, GAE and turn credit: a reverse discounted cumulative sum."""

import math

import torch
import torch.nn.functional as F


def reverse_discounted_cumsum(x_bt: torch.Tensor, discount_bt: torch.Tensor) -> torch.Tensor:
    """`y_t = x_t + c_t * y_{t+1}` along the last dim, with `y_T = 0`; the shape of `x_bt`.

    `discount_bt` (`c`) has the shape of `x_bt`. A plain loop over `T` steps costs `T` small
    kernel launches (8192 for a long answer); this is a two-level scan that costs about
    `2 * sqrt(T)`: split time into `n` blocks of `k ~ sqrt(T)` steps, scan every block at
    once with zero carry while keeping the suffix products `P_t = c_t ... c_{end of block}`,
    scan the `n` block starts to get each block's carry, then `y_t = local_t + P_t * carry`.
    It multiplies and adds the same numbers as the loop, only regrouped (no division, no
    logarithm), so it agrees with the loop to rounding for any discount, zero included.
    """
    num_steps = x_bt.shape[-1]
    if num_steps == 0:
        return torch.zeros_like(x_bt)
    block = math.isqrt(num_steps - 1) + 1  # ceil(sqrt(T))
    num_blocks = -(-num_steps // block)
    pad = num_blocks * block - num_steps
    x_bnk = F.pad(x_bt, (0, pad)).unflatten(-1, (num_blocks, block))
    c_bnk = F.pad(discount_bt, (0, pad)).unflatten(-1, (num_blocks, block))

    local_k, suffix_k = [], []
    local_bn = torch.zeros_like(x_bnk[..., 0])
    suffix_bn = torch.ones_like(c_bnk[..., 0])
    for i in reversed(range(block)):
        local_bn = x_bnk[..., i] + c_bnk[..., i] * local_bn
        suffix_bn = c_bnk[..., i] * suffix_bn
        local_k.append(local_bn)
        suffix_k.append(suffix_bn)
    local_bnk = torch.stack(local_k[::-1], dim=-1)
    suffix_bnk = torch.stack(suffix_k[::-1], dim=-1)

    carry_n = []  # carry_n[j] = y at the first step of block j + 1
    carry_b = torch.zeros_like(local_bnk[..., 0, 0])
    for j in reversed(range(num_blocks)):
        carry_n.append(carry_b)
        carry_b = local_bnk[..., j, 0] + suffix_bnk[..., j, 0] * carry_b
    carry_bn1 = torch.stack(carry_n[::-1], dim=-1).unsqueeze(-1)
    y_bnk = local_bnk + suffix_bnk * carry_bn1
    return y_bnk.flatten(-2)[..., :num_steps]
