"""Aggregation of per-turn rewards `rewards_t` (one float per turn) into trajectory rewards."""

from collections.abc import Sequence


def last_turn(rewards_t: Sequence[float]) -> float:
    """The final turn's reward, `r_{T-1}`: what the agent ended with."""
    _require_nonempty(rewards_t)
    return float(rewards_t[-1])


def best_turn(rewards_t: Sequence[float]) -> float:
    """The best turn's reward, `max_t r_t`: CUDA Agent scores the best kernel of a trajectory."""
    _require_nonempty(rewards_t)
    return float(max(rewards_t))


def discounted_sum(rewards_t: Sequence[float], gamma: float) -> float:
    """The discounted return from the first turn, `G_0 = sum_t gamma^t r_t` (0.0 if empty).

    Kevin-32B (Cognition, 2025) sums per-turn rewards with gamma = 0.4.
    """
    return discounted_returns(rewards_t, gamma)[0] if rewards_t else 0.0


def discounted_returns(rewards_t: Sequence[float], gamma: float) -> tuple[float, ...]:
    """The reward-to-go of every turn, `G_t = r_t + gamma * G_{t+1}`, `G_T = 0`; length T.

    Kevin-32B credits each turn with its own `G_t`, so a turn is rewarded for the later turns
    it enabled.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    returns_t: list[float] = []
    future = 0.0
    for reward in reversed(rewards_t):
        future = float(reward) + gamma * future
        returns_t.append(future)
    return tuple(reversed(returns_t))


def _require_nonempty(rewards_t: Sequence[float]) -> None:
    if len(rewards_t) == 0:
        raise ValueError("rewards_t is empty: a trajectory needs at least one turn's reward")
