"""Noise-aware speedups and the continuous (clipped log-speedup) reward."""

import math
from typing import Literal

from cuda_agent.reward._outcome import EvalOutcome, is_failure

Baseline = Literal["eager", "compile"]
"""Which reference a speedup is measured against: PyTorch eager or `torch.compile`."""


def speedup(
    time_ms: float,
    baseline_time_ms: float,
    *,
    time_spread_ms: float = 0.0,
    baseline_spread_ms: float = 0.0,
) -> float:
    """The speedup over a baseline, taken at the unfavourable end of the measured noise.

        s = (t0 - s0) / (t + s_t)        (0.0 when there is no valid measurement)

    With zero spreads this is the usual `t0 / t` (KernelBench, arXiv 2502.10517). The spreads
    move the candidate to the slow end of its noise and the baseline to the fast end, so
    `s > 1` only if `is_faster(t, t0, margin=0.0, ...)`: a speedup within the noise is
    not a speedup.

    Returns 0.0, "no evidence of any speed", for a non-positive or non-finite time (a failed or
    bogus measurement), a NaN or infinite spread (unknown noise), or a baseline no faster than
    its own noise (`t0 <= s0`). Never negative, never infinite.
    """
    if time_spread_ms < 0 or baseline_spread_ms < 0:
        raise ValueError(
            f"spreads must be >= 0 (got {time_spread_ms}, {baseline_spread_ms}); "
            "pass 0.0 when the noise is unknown"
        )
    if not (0.0 < time_ms < math.inf and 0.0 < baseline_time_ms < math.inf):
        return 0.0
    slow_time_ms = time_ms + time_spread_ms
    fast_baseline_ms = baseline_time_ms - baseline_spread_ms
    # NaN fails both comparisons, so an unknown spread lands here too.
    if not (fast_baseline_ms > 0.0 and slow_time_ms < math.inf):
        return 0.0
    return fast_baseline_ms / slow_time_ms


def outcome_speedup(
    outcome: EvalOutcome, *, baseline: Baseline = "eager", noise_aware: bool = True
) -> float:
    """The speedup of an outcome's candidate over one of its baselines; see `speedup`.

        s = speedup(candidate_time_ms, <baseline>_time_ms, spreads if noise_aware else 0)

    A missing time gives 0.0 (KernelGYM's client also reads a missing speedup as 0.0); a `None`
    spread counts as 0. Reads only times: correctness and flags are the reward's business.
    """
    if baseline == "eager":
        baseline_ms, baseline_spread_ms = outcome.eager_time_ms, outcome.eager_time_spread_ms
    elif baseline == "compile":
        baseline_ms, baseline_spread_ms = outcome.compile_time_ms, outcome.compile_time_spread_ms
    else:
        raise ValueError(f"baseline must be 'eager' or 'compile', got {baseline!r}")
    time_ms = outcome.candidate_time_ms
    if time_ms is None or baseline_ms is None:
        return 0.0
    time_spread_ms = outcome.candidate_time_spread_ms
    return speedup(
        time_ms,
        baseline_ms,
        time_spread_ms=time_spread_ms if noise_aware and time_spread_ms is not None else 0.0,
        baseline_spread_ms=(
            baseline_spread_ms if noise_aware and baseline_spread_ms is not None else 0.0
        ),
    )


def log_speedup_reward(
    outcome: EvalOutcome,
    *,
    baseline: Baseline = "eager",
    min_log_speedup: float = -1.0,
    max_log_speedup: float = 1.0,
    failure: float = -2.0,
    noise_aware: bool = True,
) -> float:
    """A continuous speed reward: the natural log of the speedup, clipped.

        r = failure                                        if not correct or any anti-cheat flag
            clip(ln s, min_log_speedup, max_log_speedup)   otherwise,
                s = outcome_speedup(outcome, baseline=..., noise_aware=...)

    Ours, for comparison with the milestone reward. Kevin-32B (Cognition, arXiv 2507.11948)
    rewards a correct kernel with its linear speedup on top of a correctness bonus; the log
    makes equal ratios equal steps (2x faster is +ln 2, 2x slower is -ln 2, and a batch's mean
    reward is the log of its geometric-mean speedup), and the clip bounds what one lucky or
    broken measurement can pull. Defaults: speedups from 1/e (0.37x) to e (2.72x) are told
    apart; the failure value sits one unit below the floor, so a correct kernel, however slow,
    always beats a failed one.

    A correct outcome with no valid time (untimed, bogus, or unknown noise) earns the floor,
    `min_log_speedup`: no evidence of speed earns nothing for speed. With `noise_aware` the
    spreads make the speedup pessimistic, so a speedup within the noise earns at most 0.
    """
    if not (
        math.isfinite(failure)
        and math.isfinite(min_log_speedup)
        and math.isfinite(max_log_speedup)
        and failure <= min_log_speedup < max_log_speedup
    ):
        raise ValueError(
            "log_speedup_reward needs finite failure <= min_log_speedup < max_log_speedup; got "
            f"{failure}, {min_log_speedup}, {max_log_speedup}"
        )
    if is_failure(outcome):
        return failure
    s = outcome_speedup(outcome, baseline=baseline, noise_aware=noise_aware)
    # s can underflow to 0.0 for absurd ratios; ln 0 is -inf, which the clip turns into the floor.
    log_s = math.log(s) if s > 0.0 else -math.inf
    return min(max(log_s, min_log_speedup), max_log_speedup)
