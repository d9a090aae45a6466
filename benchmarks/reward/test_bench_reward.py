"""Timings of the hot reward functions on the CPU (pytest-benchmark).

Each benchmark scores a whole batch, the way a trainer step does: 10^4 outcomes (a large RL
step's worth of evaluations) or 10^4 trajectories of 8 turns. Run (figures in README.md):

    python -m pytest benchmarks/reward -p no:cacheprovider --benchmark-enable \
        --benchmark-json=benchmarks/results/<date>-cpu-reward.json -o addopts=""
"""

import dataclasses
import random

import pytest

from cuda_agent.reward import (
    best_turn,
    discounted_returns,
    last_turn,
    log_speedup_reward,
    milestone_reward,
    tiered_reward,
)

N_OUTCOMES = 10_000
N_TRAJECTORIES = 10_000
N_TURNS = 8


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A minimal `EvalOutcome` (the sandbox's `EvalResult` reads the same way)."""

    correct: bool
    flags: tuple[str, ...]
    candidate_time_ms: float | None
    eager_time_ms: float | None
    compile_time_ms: float | None
    candidate_time_spread_ms: float | None
    eager_time_spread_ms: float | None
    compile_time_spread_ms: float | None


def _outcomes(n: int, seed: int = 0) -> list[Outcome]:
    """A plausible mix: about 30% incorrect, 2% flagged, speedups log-normal around 0.8x."""
    rng = random.Random(seed)
    result = []
    for _ in range(n):
        eager_ms = rng.lognormvariate(0.0, 1.0)
        compile_ms = eager_ms * rng.uniform(0.5, 1.1)
        time_ms = eager_ms / rng.lognormvariate(-0.2, 0.5)
        result.append(
            Outcome(
                correct=rng.random() > 0.3,
                flags=("side_stream",) if rng.random() < 0.02 else (),
                candidate_time_ms=time_ms,
                eager_time_ms=eager_ms,
                compile_time_ms=compile_ms,
                candidate_time_spread_ms=0.02 * time_ms,
                eager_time_spread_ms=0.02 * eager_ms,
                compile_time_spread_ms=0.02 * compile_ms,
            )
        )
    return result


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    return _outcomes(N_OUTCOMES)


@pytest.fixture(scope="module")
def trajectories() -> list[list[float]]:
    rng = random.Random(1)
    return [
        [rng.choice((-1.0, 1.0, 2.0, 3.0)) for _ in range(N_TURNS)] for _ in range(N_TRAJECTORIES)
    ]


def test_milestone_reward_10k_outcomes(benchmark, outcomes: list[Outcome]) -> None:
    rewards = benchmark(lambda: [milestone_reward(o) for o in outcomes])
    assert len(rewards) == N_OUTCOMES


def test_log_speedup_reward_10k_outcomes(benchmark, outcomes: list[Outcome]) -> None:
    rewards = benchmark(lambda: [log_speedup_reward(o) for o in outcomes])
    assert len(rewards) == N_OUTCOMES


def test_tiered_reward_10k_outcomes(benchmark, outcomes: list[Outcome]) -> None:
    rewards = benchmark(lambda: [tiered_reward(o) for o in outcomes])
    assert len(rewards) == N_OUTCOMES


def test_best_turn_10k_trajectories(benchmark, trajectories: list[list[float]]) -> None:
    rewards = benchmark(lambda: [best_turn(r) for r in trajectories])
    assert len(rewards) == N_TRAJECTORIES


def test_last_turn_10k_trajectories(benchmark, trajectories: list[list[float]]) -> None:
    rewards = benchmark(lambda: [last_turn(r) for r in trajectories])
    assert len(rewards) == N_TRAJECTORIES


def test_discounted_returns_10k_trajectories(benchmark, trajectories: list[list[float]]) -> None:
    returns = benchmark(lambda: [discounted_returns(r, 0.4) for r in trajectories])
    assert len(returns) == N_TRAJECTORIES
