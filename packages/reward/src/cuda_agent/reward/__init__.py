"""Pure reward functions from a kernel evaluation outcome (or a trajectory of them) to a scalar,
the benchmark metrics over per-task outcomes (`metrics`: pass rate, fast_p, pass@k) and how
sure they are (`confidence`: bootstrap intervals over tasks, paired gains).

Standard library only; reads any object satisfying the `EvalOutcome` protocol.
"""

from cuda_agent.reward._milestone import (
    MilestoneValues,
    format_reward,
    is_faster,
    milestone_reward,
)
from cuda_agent.reward._outcome import EvalOutcome
from cuda_agent.reward._speedup import (
    Baseline,
    log_speedup_reward,
    outcome_speedup,
    speedup,
)
from cuda_agent.reward._tiered import TieredValues, tiered_reward
from cuda_agent.reward._trajectory import (
    best_turn,
    discounted_returns,
    discounted_sum,
    last_turn,
)
from cuda_agent.reward.confidence import (
    Interval,
    bootstrap_mean,
    intervals,
    paired_bootstrap,
    paired_gains,
    right_of_n,
    task_values,
)
from cuda_agent.reward.metrics import (
    TaskOutcome,
    fast_p,
    faster_than,
    geomean_speedup,
    mean_pass_at_k,
    pass_at_k,
    pass_rate,
    renamed_keys,
    summary,
)

__all__ = [
    "Baseline",
    "EvalOutcome",
    "Interval",
    "MilestoneValues",
    "TaskOutcome",
    "TieredValues",
    "best_turn",
    "bootstrap_mean",
    "discounted_returns",
    "discounted_sum",
    "fast_p",
    "faster_than",
    "format_reward",
    "geomean_speedup",
    "intervals",
    "is_faster",
    "last_turn",
    "log_speedup_reward",
    "mean_pass_at_k",
    "milestone_reward",
    "outcome_speedup",
    "paired_bootstrap",
    "paired_gains",
    "pass_at_k",
    "pass_rate",
    "renamed_keys",
    "right_of_n",
    "speedup",
    "summary",
    "task_values",
    "tiered_reward",
]
