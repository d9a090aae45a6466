"""The timing loop: when it stops measuring."""

from __future__ import annotations

import torch


def test_timing_stops_once_every_median_is_precise_and_not_before_twenty_rounds():
    from cuda_agent.kernel_sandbox._shared.timing import (
        MIN_ROUNDS,
        precise_enough,
        time_interleaved,
    )

    steady = [[1.0 + 0.001 * (i % 3) for i in range(20)]] * 2
    noisy = [[1.0 + 0.3 * (i % 3) for i in range(20)], steady[0]]
    assert precise_enough(steady, 0.003)
    assert not precise_enough(noisy, 0.003)  # one imprecise median keeps both going
    calls = []

    def fn() -> None:
        calls.append(1)

    times = time_interleaved(
        [fn], device=torch.device("cpu"), warmup=0, repeats=60, budget_s=100.0, precision=0.0
    )
    assert times[0].samples == 60 == len(calls)  # without the rule: every round
    times = time_interleaved(
        [fn], device=torch.device("cpu"), warmup=0, repeats=60, budget_s=100.0, precision=0.5
    )
    assert MIN_ROUNDS <= times[0].samples <= 60
