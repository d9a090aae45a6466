"""How sure an evaluation is: bootstrap intervals over tasks, for one evaluation and for the
gain between two evaluations of the same tasks.

Every metric of an evaluation here is a mean over tasks of a per-task value (``task_values``:
pass@1 is the mean of ``c_i / n_i``, pass@k the mean of the unbiased per-task estimate,
faster-than-eager the mean of a 0/1 or of the share of samples that were faster). The
uncertainty that matters is which tasks were drawn, so tasks are what is resampled.

Percentile bootstrap (Efron and Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13):
draw ``B`` resamples of the ``n`` tasks with replacement, compute the mean of each, and read
the interval off the sorted resampled means. The resampled indices come from
``random.Random(seed)`` and depend only on ``(n, B, seed)``: the same call gives the same
interval, and every metric of one evaluation (and both sides of a paired comparison) is read
off the same resamples. Standard library only; no state, no I/O.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .metrics import Row, TaskOutcome, faster_than, pass_at_k, renamed_keys

DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap interval ``[low, high]`` at ``confidence``."""

    estimate: float
    low: float
    high: float
    confidence: float = DEFAULT_CONFIDENCE

    @property
    def excludes_zero(self) -> bool:
        """Whether 0 lies outside ``[low, high]`` (for a gain: it is significant)."""
        return self.low > 0.0 or self.high < 0.0

    def to_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high}


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _resampled_means(values: Sequence[float], resamples: int, seed: int) -> list[float]:
    """The sorted means of ``resamples`` resamples of ``values`` with replacement."""
    n = len(values)
    rng = random.Random(seed)
    return sorted(_mean(rng.choices(values, k=n)) for _ in range(resamples))


def _check(values: Sequence[float], confidence: float, resamples: int) -> None:
    if not values:
        raise ValueError("a bootstrap needs at least one task's value")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not all(math.isfinite(v) for v in values):
        raise ValueError("every task's value must be finite (a None or nan in the rows?)")


def bootstrap_mean(
    values_n: Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """The mean of ``values_n`` (one value per task) and its percentile bootstrap interval:

        estimate = (1/n) sum_i v_i
        m_b      = (1/n) sum_j v_{I_bj},  I_bj ~ Uniform{1..n},  b = 1..B  (B = resamples)
        r = max(1, ceil(B * alpha / 2)),   low = m_(r),   high = m_(B + 1 - r)

    with ``alpha = 1 - confidence`` and ``m_(r)`` the r-th smallest resampled mean (1-based):
    as many resampled means lie below ``low`` as above ``high``, so swapping the sign of
    the values swaps and negates the ends.
    A constant sample gives ``low = high = estimate``. ``ValueError`` on an empty sample, a
    non-finite value, ``confidence`` outside (0, 1) or ``resamples < 1``.
    """
    values = [float(v) for v in values_n]
    _check(values, confidence, resamples)
    estimate = _mean(values)
    if min(values) == max(values):  # every resample is the sample itself
        return Interval(estimate, estimate, estimate, confidence)
    means = _resampled_means(values, resamples, seed)
    rank = max(1, math.ceil(resamples * (1.0 - confidence) / 2))
    return Interval(estimate, means[rank - 1], means[resamples - rank], confidence)


def paired_bootstrap(
    before_n: Sequence[float],
    after_n: Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """The gain ``after - before`` of two evaluations of the same ``n`` tasks (the i-th value
    of each is the same task's) and its paired percentile bootstrap interval:

        d_i = after_i - before_i,   gain = (1/n) sum_i d_i,   interval = bootstrap_mean(d)

    Resampling tasks, not the two sides apart, keeps each task's before and after together:
    what varies between tasks (some are easy for both) cancels. Identical evaluations give a
    gain of 0 with the interval [0, 0]; ``Interval.excludes_zero`` says whether the gain is
    significant at ``confidence``. ``ValueError`` when the lengths differ.
    """
    if len(before_n) != len(after_n):
        raise ValueError(
            f"a paired bootstrap needs the same tasks on both sides ({len(before_n)} before, "
            f"{len(after_n)} after)"
        )
    gains = [float(a) - float(b) for b, a in zip(before_n, after_n, strict=True)]
    return bootstrap_mean(gains, confidence=confidence, resamples=resamples, seed=seed)


def _fast_1_share(row: TaskOutcome, extra: Mapping[str, Any] | None) -> float:
    """The share of a task's samples whose best kernel was correct and faster than eager
    (speedup > 1). A row of an old run has the count under its old name (``OLD_NAMES``)."""
    count = renamed_keys(extra or {}).get("samples_fast_1")
    if count is not None:
        if not 0 <= int(count) <= row.samples:
            raise ValueError(f"task {row.task!r}: samples_fast_1 not in 0..samples")
        return int(count) / row.samples
    if row.samples == 1:  # one sample: its best kernel is the task's
        return faster_than([row], "eager", 1.0)
    raise ValueError(
        f"task {row.task!r} has {row.samples} samples and no samples_fast_1: "
        "evaluate it again with this version (the per-sample count is recorded since)"
    )


def task_values(rows: Iterable[Row], metric: str) -> list[float]:
    """One value per task (in row order) whose mean over tasks is ``metric``:

    - ``pass_at_<k>``: ``pass_at_k(n_i, c_i, k)`` (``pass_at_1`` is ``c_i / n_i``);
    - ``pass_rate``: 1 if the task's best kernel over its samples is correct, else 0;
    - ``fast_1``: 1 if that kernel is correct and faster than eager (speedup > 1: KernelBench's
      fast_p at p = 1);
    - ``fast_1_at_1``: the share of the task's samples whose best kernel is correct and
      faster than eager (a row's ``samples_fast_1``; with one sample, the same as ``fast_1``).

    With one greedy sample per task, all of ``pass_at_1``, ``pass_rate`` and the two fast_1
    shares are 0/1 per task. ``ValueError`` naming an unknown metric.
    """
    raw = list(rows)
    outcomes = [r if isinstance(r, TaskOutcome) else TaskOutcome.from_dict(r) for r in raw]
    if metric.startswith("pass_at_"):
        k = int(metric.removeprefix("pass_at_"))
        return [pass_at_k(r.samples, r.samples_correct, k) for r in outcomes]
    if metric == "pass_rate":
        return [float(r.correct) for r in outcomes]
    if metric == "fast_1":
        return [faster_than([r], "eager", 1.0) for r in outcomes]
    if metric == "fast_1_at_1":
        return [
            _fast_1_share(r, None if isinstance(x, TaskOutcome) else x)
            for r, x in zip(outcomes, raw, strict=True)
        ]
    raise ValueError(f"unknown metric {metric!r}: pass_at_<k>, pass_rate, fast_1 or fast_1_at_1")


def intervals(
    rows: Iterable[Row],
    metrics: Sequence[str],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, Interval]:
    """``bootstrap_mean`` of each metric's ``task_values`` (metric -> Interval), all read off
    the same resamples of the tasks."""
    raw = list(rows)
    return {
        m: bootstrap_mean(
            task_values(raw, m), confidence=confidence, resamples=resamples, seed=seed
        )
        for m in metrics
    }


def paired_gains(
    before: Iterable[Row],
    after: Iterable[Row],
    metrics: Sequence[str],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, Interval]:
    """``paired_bootstrap`` of each metric between two evaluations of the same tasks, matched
    by task name (metric -> Interval of ``after - before``). ``ValueError`` naming the tasks
    when the two sets differ."""
    by_task = [{_task(r): r for r in side} for side in (before, after)]
    if set(by_task[0]) != set(by_task[1]):
        only = sorted(set(by_task[0]) ^ set(by_task[1]))
        raise ValueError(
            "a paired comparison needs the same tasks in both evaluations; in one only: "
            + ", ".join(only[:10])
        )
    names = sorted(by_task[0])
    sides = [[side[n] for n in names] for side in by_task]
    gains = {}
    for m in metrics:
        before_n, after_n = task_values(sides[0], m), task_values(sides[1], m)
        gains[m] = paired_bootstrap(
            before_n, after_n, confidence=confidence, resamples=resamples, seed=seed
        )
    return gains


def _task(row: Row) -> str:
    return row.task if isinstance(row, TaskOutcome) else str(row["task"])


def right_of_n(before: Iterable[Row], after: Iterable[Row]) -> dict[str, Any] | None:
    """Where the tasks went between two evaluations of the same tasks with ``n`` samples each:
    ``{"samples": n, "before": [t_0, ..., t_n], "after": [...], "up", "down", "same",
    "moves": {"b->a": count, ...}}``, where ``t_c`` counts the tasks with ``c`` of their ``n``
    samples correct, ``up`` the tasks with more right after than before (``down`` fewer,
    ``same`` as many), and ``moves`` each (before, after) pair of counts that occurred. A
    pass@1 gain can come from many tasks moving a little or a few moving from 0 to n; a gain
    of 0 can hide tasks moving both ways (the polarisation of a collapse). ``None`` unless
    every task has the same ``n > 1`` on both sides. ``ValueError`` when the tasks differ."""
    by_task = [
        {_task(o): o for o in (r if isinstance(r, TaskOutcome) else TaskOutcome.from_dict(r)
                               for r in side)}
        for side in (before, after)
    ]  # fmt: skip
    if set(by_task[0]) != set(by_task[1]):
        only = sorted(set(by_task[0]) ^ set(by_task[1]))
        raise ValueError(
            "the two evaluations hold other tasks; in one only: " + ", ".join(only[:10])
        )
    sizes = {o.samples for side in by_task for o in side.values()}
    if len(sizes) != 1 or (n := sizes.pop()) < 2:
        return None
    names = sorted(by_task[0])
    pairs = [(by_task[0][t].samples_correct, by_task[1][t].samples_correct) for t in names]
    moves: dict[str, int] = {}
    for b, a in sorted(pairs):
        moves[f"{b}->{a}"] = moves.get(f"{b}->{a}", 0) + 1
    return {
        "samples": n,
        "before": [sum(1 for b, _ in pairs if b == c) for c in range(n + 1)],
        "after": [sum(1 for _, a in pairs if a == c) for c in range(n + 1)],
        "up": sum(1 for b, a in pairs if a > b),
        "down": sum(1 for b, a in pairs if a < b),
        "same": sum(1 for b, a in pairs if a == b),
        "moves": moves,
    }
