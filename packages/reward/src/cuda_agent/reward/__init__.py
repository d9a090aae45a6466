"""Pure reward functions from a kernel evaluation outcome (or a trajectory of them) to a scalar.

Standard library only; reads any object satisfying the `EvalOutcome` protocol.
"""

from cuda_agent.reward._src.milestone import (
    MilestoneValues,
    format_reward,
    is_faster,
    milestone_reward,
)
from cuda_agent.reward._src.outcome import EvalOutcome
from cuda_agent.reward._src.speedup import (
    Baseline,
    log_speedup_reward,
    outcome_speedup,
    speedup,
)
from cuda_agent.reward._src.tiered import TieredValues, tiered_reward
from cuda_agent.reward._src.trajectory import (
    best_turn,
    discounted_returns,
    discounted_sum,
    last_turn,
)

__all__ = [
    "Baseline",
    "EvalOutcome",
    "MilestoneValues",
    "TieredValues",
    "best_turn",
    "discounted_returns",
    "discounted_sum",
    "format_reward",
    "is_faster",
    "last_turn",
    "log_speedup_reward",
    "milestone_reward",
    "outcome_speedup",
    "speedup",
    "tiered_reward",
]
