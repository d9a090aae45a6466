"""Critic loss, per token; reduce it with an aggregation function."""

import torch


def value_loss(
    values_bt: torch.Tensor,
    returns_bt: torch.Tensor,
    *,
    old_values_bt: torch.Tensor | None = None,
    clip_eps: float | None = None,
) -> torch.Tensor:
    """Per-token squared error of the value head, optionally clipped, shape `[B, T]`.

        loss_bt = 1/2 (V_bt - R_bt)^2
        clipped:  1/2 max((V_bt - R_bt)^2, (V_old + clip(V_bt - V_old, -eps, eps) - R_bt)^2)

    The clipped form is PPO's value clipping (OpenAI baselines ppo2; studied by Engstrom et
    al., "Implementation Matters", arXiv 2005.12729): a value that moves further than `eps`
    from the one used to compute the advantages gets no credit for the extra distance, so the
    critic's step stays in a trust region like the policy's. `returns_bt` (e.g.
    `gae_advantages(...).returns_bt`) and `old_values_bt` are constants; gradients flow only
    through `values_bt`. Give `old_values_bt` and `clip_eps` together or not at all.
    """
    if (old_values_bt is None) != (clip_eps is None):
        raise ValueError("value clipping needs both old_values_bt and clip_eps (or neither)")
    if returns_bt.shape != values_bt.shape:
        raise ValueError(
            f"returns_bt {tuple(returns_bt.shape)} must have the shape of values_bt "
            f"{tuple(values_bt.shape)}"
        )
    returns_bt = returns_bt.detach()
    squared_error_bt = (values_bt - returns_bt).square()
    if old_values_bt is None or clip_eps is None:
        return 0.5 * squared_error_bt
    if clip_eps < 0:
        raise ValueError(f"clip_eps must be >= 0, got {clip_eps}")
    old_values_bt = old_values_bt.detach()
    clipped_values_bt = old_values_bt + torch.clamp(values_bt - old_values_bt, -clip_eps, clip_eps)
    return 0.5 * torch.maximum(squared_error_bt, (clipped_values_bt - returns_bt).square())
