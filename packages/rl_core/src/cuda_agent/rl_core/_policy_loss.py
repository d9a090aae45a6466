"""Policy-gradient losses, per token; reduce them with an aggregation function."""

import torch

from cuda_agent.rl_core._aggregation import check_mask
from cuda_agent.rl_core._log_ratio import clamped_log_ratio


def ppo_clipped_policy_loss(
    logprobs_bt: torch.Tensor,
    old_logprobs_bt: torch.Tensor,
    advantages_bt: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    dual_clip: float | None = None,
) -> torch.Tensor:
    """Per-token clipped surrogate loss of PPO (arXiv 1707.06347), shape `[B, T]`.

        rho_bt  = exp(clamp(logprobs_bt - old_logprobs_bt, -20, 20))
        loss_bt = -min(rho_bt * A_bt, clip(rho_bt, 1 - eps_low, 1 + eps_high) * A_bt)
        dual clip (A_bt < 0 only):  loss_bt = min(loss_bt, -dual_clip * A_bt)

    The asymmetric clip (eps_high > eps_low, "clip-higher") is DAPO's (arXiv 2503.14476) and
    CUDA Agent's (0.2, 0.28); eps_low = eps_high gives PPO. The dual clip (Ye et al.,
    arXiv 1912.09729; verl's `clip_ratio_c`, typically 3) bounds the loss of a token with a
    negative advantage whose ratio has grown far past the trust region (stale or off-policy
    samples), which the plain clip leaves unbounded. `advantages_bt` is `[B, T]` or
    broadcasts to it (`[B, 1]`: one advantage per sequence). Gradients flow only through
    `logprobs_bt`: the old log-probs and the advantages are constants of the update. Where
    a clip is active (rho > 1 + eps_high with A > 0, rho < 1 - eps_low with A < 0,
    rho > dual_clip with A < 0) the gradient is exactly zero.

    The log-ratio is clamped to +-20 (as verl's PPO loss), and counts as 0 where both log-probs
    are the same infinity (`_log_ratio.py` says why): unclamped, a log-ratio past ~88
    overflows rho to inf in float32, which makes the loss NaN where A = 0 and, at a masked-out
    position the aggregation ignores, the gradient NaN. So for any finite or infinite log-probs
    (NaN excepted) and finite advantages, value and gradient are finite at every position; the
    clamp changes nothing while |logprobs - old| <= 20, and beyond it the gradient is 0.
    Advantages must be finite at masked positions too (the estimators here give 0 there): a
    product with an infinite advantage has no finite gradient.
    """
    _check_ratio_inputs(logprobs_bt, old_logprobs_bt, advantages_bt, eps_low, eps_high)
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1 (typically 3), got {dual_clip}")
    advantages_bt = advantages_bt.detach()
    ratio_bt = torch.exp(clamped_log_ratio(logprobs_bt, old_logprobs_bt))
    clipped_ratio_bt = torch.clamp(ratio_bt, 1.0 - eps_low, 1.0 + eps_high)
    loss_bt = -torch.minimum(ratio_bt * advantages_bt, clipped_ratio_bt * advantages_bt)
    if dual_clip is None:
        return loss_bt
    capped_bt = torch.minimum(loss_bt, -dual_clip * advantages_bt)
    return torch.where(advantages_bt < 0, capped_bt, loss_bt)


def gspo_policy_loss(
    logprobs_bt: torch.Tensor,
    old_logprobs_bt: torch.Tensor,
    advantages_bt: torch.Tensor,
    mask_bt: torch.Tensor,
    *,
    eps_low: float = 3e-4,
    eps_high: float = 4e-4,
) -> torch.Tensor:
    """Per-token loss of GSPO with a sequence-level ratio (Zheng et al., arXiv 2507.18071), `[B, T]`.

        l_bt    = clamp(logprobs_bt - old_logprobs_bt, -20, 20)
        s_b     = exp( (1 / |y_b|) sum_t m_bt * l_bt )
        s_bt    = sg[s_b] * exp(l_bt - sg[l_bt])     (value s_b, grad d logp_bt)
        loss_bt = -min(s_bt * A_bt, clip(s_bt, 1 - eps_low, 1 + eps_high) * A_bt)

    The importance ratio is the geometric mean of the token ratios of a sequence, so the clip
    keeps or drops whole sequences. This is the paper's GSPO-token form: with one advantage
    per sequence (`[B, 1]`) and `masked_seq_mean_token_mean` it is exactly GSPO, whose
    gradient is `-s_b A_b (1 / |y_b|) sum_t grad logp_bt`; with `[B, T]` advantages it lets
    them vary by token. The default clip range (3e-4, 4e-4) is the paper's: a sequence ratio
    moves far less than a token ratio. Gradients flow only through `logprobs_bt`.

    Each token's log-ratio is clamped before the mean (`_log_ratio.py` says why), so `s_b`
    lies in `[exp(-20), exp(20)]` and value and gradient are finite for any log-probs but NaN;
    masked positions are dropped before the exponential whatever they hold.
    """
    _check_ratio_inputs(logprobs_bt, old_logprobs_bt, advantages_bt, eps_low, eps_high)
    kept_bt = check_mask(logprobs_bt, mask_bt)
    advantages_bt = advantages_bt.detach()
    log_ratio_bt = torch.where(kept_bt, clamped_log_ratio(logprobs_bt, old_logprobs_bt), 0)
    seq_log_ratio_b1 = log_ratio_bt.sum(dim=-1, keepdim=True) / kept_bt.sum(
        dim=-1, keepdim=True
    ).clamp(min=1)
    token_log_ratio_bt = seq_log_ratio_b1.detach() + log_ratio_bt - log_ratio_bt.detach()
    ratio_bt = torch.exp(token_log_ratio_bt)
    clipped_ratio_bt = torch.clamp(ratio_bt, 1.0 - eps_low, 1.0 + eps_high)
    return -torch.minimum(ratio_bt * advantages_bt, clipped_ratio_bt * advantages_bt)


def _check_ratio_inputs(
    logprobs_bt: torch.Tensor,
    old_logprobs_bt: torch.Tensor,
    advantages_bt: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> None:
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
