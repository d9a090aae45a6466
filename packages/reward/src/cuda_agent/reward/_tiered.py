"""The tiered speedup reward of KernelGYM (Dr. Kernel, arXiv 2602.05885), for comparison."""

import bisect
import math
from dataclasses import dataclass
from itertools import pairwise

from cuda_agent.reward._outcome import EvalOutcome
from cuda_agent.reward._speedup import Baseline, outcome_speedup


@dataclass(frozen=True)
class TieredValues:
    """The values of the tiered reward; the defaults are KernelGYM's.

    `tier_speedups[k]` is the least speedup (inclusive) that earns `tier_values[k]`; a correct
    kernel below the first tier earns `slower`. Must be ordered
    `rejected <= compile_fail <= incorrect <= slower <= tier_values[0] <= ... <= tier_values[-1]`
    with strictly increasing positive `tier_speedups`, so that a better outcome never earns less
    and a rejected outcome never earns more than an honest failure.
    """

    rejected: float = -1.0
    compile_fail: float = -0.5
    incorrect: float = -0.3
    slower: float = -0.1
    tier_speedups: tuple[float, ...] = (1.0, 1.2, 1.5, 2.0, 3.0)
    tier_values: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0)

    def __post_init__(self) -> None:
        ordered = (self.rejected, self.compile_fail, self.incorrect, self.slower, *self.tier_values)
        speedups = self.tier_speedups
        if (
            len(speedups) != len(self.tier_values)
            or not all(math.isfinite(v) for v in (*ordered, *speedups))
            or list(ordered) != sorted(ordered)
            or not all(a < b for a, b in pairwise(speedups))
            or (len(speedups) > 0 and speedups[0] <= 0.0)
        ):
            raise ValueError(
                "TieredValues must be finite, ordered rejected <= compile_fail <= incorrect <= "
                "slower <= tier_values (non-decreasing), with one strictly increasing positive "
                f"tier_speedups entry per tier value; got values {ordered}, speedups {speedups}"
            )


def tiered_reward(
    outcome: EvalOutcome,
    *,
    compiled: bool = True,
    baseline: Baseline = "eager",
    values: TieredValues = TieredValues(),
    noise_aware: bool = True,
) -> float:
    """KernelGYM's tiered reward: a fixed value per speedup band.

        r = rejected        if any anti-cheat flag
            compile_fail    if not correct and not compiled
            incorrect       if not correct
            tier_values[k]  for the largest k with s >= tier_speedups[k]
            slower          if s < tier_speedups[0]
        s = outcome_speedup(outcome, baseline=..., noise_aware=...)

    With the defaults: flagged -1, compile failure -0.5, incorrect -0.3, correct and slower than
    the baseline -0.1, then 0.2 / 0.4 / 0.6 / 0.8 / 1.0 from 1.0x / 1.2x / 1.5x / 2.0x / 3.0x.

    Source: KernelGYM (github.com/hkust-nlp/KernelGYM), the environment of Dr. Kernel
    (arXiv 2602.05885): `KernelRewardClient.calculate_reward_like_kernel` in
    `drkernel/kernel/rewards/reward_client.py`, with the penalties `compilation_fail`,
    `correctness_fail`, `perf_degrade` of `drkernel/kernel/config/kernel_trainer.yaml`
    (read 2026-11-29; that config selects a different, weighted reward by default).
    There a decoy kernel (the anti-cheat finding) and an evaluation that did not complete both
    earn -1.0, and the speedup is over the PyTorch reference (eager unless configured).

    What we assumed, since `EvalOutcome` carries neither compile status nor "did not complete":
    the caller passes `compiled` (for the sandbox's result, `status != "compile_error"`), and
    every other failure, timeouts and crashes included, earns `incorrect`. With
    `noise_aware=False`, or zero spreads, the speedup is KernelGYM's `t0 / t`; with
    `noise_aware` (our default) it is pessimistic by the spreads, so a speedup within the
    measured noise does not reach the 1.0x tier. A correct outcome with no valid time counts as
    speedup 0, as KernelGYM reads a missing speedup.
    """
    if len(outcome.flags) > 0:
        return values.rejected
    if not outcome.correct:
        return values.incorrect if compiled else values.compile_fail
    if not compiled:
        raise ValueError(
            "tiered_reward got a correct outcome with compiled=False; a correct candidate "
            "compiled, so pass compiled=True (or derive it from the evaluation status)"
        )
    s = outcome_speedup(outcome, baseline=baseline, noise_aware=noise_aware)
    tier = bisect.bisect_right(values.tier_speedups, s)
    return values.slower if tier == 0 else values.tier_values[tier - 1]
