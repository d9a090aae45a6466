"""Policy-gradient losses, per token; reduce them with an aggregation function."""

import torch


def ppo_clipped_policy_loss(
    logprobs_bt: torch.Tensor,
    old_logprobs_bt: torch.Tensor,
    advantages_bt: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> torch.Tensor:
    """Per-token clipped surrogate loss of PPO (arXiv 1707.06347), shape `[B, T]`.

        rho_bt  = exp(logprobs_bt - old_logprobs_bt)
        loss_bt = -min(rho_bt * A_bt, clip(rho_bt, 1 - eps_low, 1 + eps_high) * A_bt)

    The asymmetric clip (eps_high > eps_low, "clip-higher") is DAPO's (arXiv 2503.14476) and
    CUDA Agent's (0.2, 0.28); eps_low = eps_high gives PPO. `advantages_bt` is `[B, T]` or
    broadcasts to it (`[B, 1]`: one advantage per sequence). Gradients flow only through
    `logprobs_bt`: the old log-probs and the advantages are constants of the update. Where
    the clip is active (rho > 1 + eps_high with A > 0, rho < 1 - eps_low with A < 0) the
    gradient is exactly zero. Note: a log-ratio beyond ~88 (float32) overflows rho to inf.
    """
    if old_logprobs_bt.shape != logprobs_bt.shape:
        raise ValueError(
            f"old_logprobs_bt {tuple(old_logprobs_bt.shape)} must have the shape of "
            f"logprobs_bt {tuple(logprobs_bt.shape)}"
        )
    if torch.broadcast_shapes(advantages_bt.shape, logprobs_bt.shape) != logprobs_bt.shape:
        raise ValueError(
            f"advantages_bt {tuple(advantages_bt.shape)} must broadcast to logprobs_bt "
            f"{tuple(logprobs_bt.shape)}; use [B, 1] for one advantage per sequence"
        )
    if not 0.0 <= eps_low < 1.0 or eps_high < 0.0:
        raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0, got {eps_low}, {eps_high}")
    advantages_bt = advantages_bt.detach()
    ratio_bt = torch.exp(logprobs_bt - old_logprobs_bt.detach())
    clipped_ratio_bt = torch.clamp(ratio_bt, 1.0 - eps_low, 1.0 + eps_high)
    return -torch.minimum(ratio_bt * advantages_bt, clipped_ratio_bt * advantages_bt)
