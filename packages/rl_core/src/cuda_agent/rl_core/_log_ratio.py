"""The one clamped per-token log-ratio behind every ratio and KL term of `rl_core`.

    l_bt = clamp(logprobs_bt - base_logprobs_bt, -20, 20)     0 where both are the same infinity

Why a clamp: `exp(l)` overflows float32 once `l` passes about 88.7, and then the loss is
`inf * 0 = NaN` where the advantage is 0; worse, a masked-out token (padding, a prompt or
feedback token between turns) whose log-ratio overflows gives a NaN *gradient* even though the
aggregation ignores its value: the aggregation sends it a zero gradient, and the exponential's
backward multiplies that zero by `exp(l) = inf`. A per-token log-ratio of 20 is a probability
ratio of 4.9e8 (or 2e-9 at -20): no policy pair close enough to learn from gets there, so the
clamp changes no ordinary result. Beyond it the value is the bound's and the gradient is 0
(clamp's derivative), as in verl's PPO loss and k3, which clamp at +-20 too.

Why the same-infinity rule: `-inf - -inf` is NaN, which a clamp keeps. Two equal infinite
log-probs mean a token impossible under both policies, which only padding can be; counting its
log-ratio as 0 (ratio 1) keeps value and gradient finite. A NaN input stays NaN: at a kept token
it is a bug upstream that must show.

Float32, float64 and bfloat16 hold `exp(20)`; float16 (max 65504) does not: compute log-probs
in float32.
"""

import torch

MAX_LOG_RATIO = 20.0


def clamped_log_ratio(logprobs_bt: torch.Tensor, base_logprobs_bt: torch.Tensor) -> torch.Tensor:
    """`clamp(logprobs_bt - base_logprobs_bt, -20, 20)`, 0 where both are the same infinity.

    Same shape as the inputs (or their broadcast). Gradients flow through `logprobs_bt` only;
    they are 0 where the clamp is active.
    """
    base_bt = base_logprobs_bt.detach()
    same_infinity_bt = torch.isinf(base_bt) & (logprobs_bt.detach() == base_bt)
    log_ratio_bt = torch.where(same_infinity_bt, 0.0, logprobs_bt - base_bt)
    return log_ratio_bt.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
