"""Benchmark metrics over per-task outcomes: pass rate, KernelBench's fast_p, geometric-mean
speedups and the unbiased pass@k estimator.

Names: ``fast_1`` is KernelBench's rule, correct and ``speedup > 1`` (fast_p at p = 1);
``faster_than_eager`` is kept for the reference system's rule, the milestone reward's faster
by a margin beyond the measured noise (``milestone_reward``, ``is_faster``). Each name means
one thing in every file.

A row is one task's outcome: a `TaskOutcome` or a mapping with its fields (extra keys are
ignored, so rows read back from JSON with more in them work as they are). Every share is over
ALL tasks (a task without a correct kernel counts as a miss); an empty set of rows has shares
of 0.0 and no geometric mean.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

SPEEDUP_KEYS = {"eager": "speedup_vs_eager", "compile": "speedup_vs_compile"}
DEFAULT_PS: tuple[float, ...] = (0, 0.5, 0.8, 1, 1.5, 2)
# pass@k reported by default: those of these that every task has the samples for.
DEFAULT_KS: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100)
# Keys renamed by issue 31 (new name -> the old one, which meant speedup > 1 under a name the
# milestone reward also used): readers of an old run's files look a key up under its old name
# when the new one is missing (``renamed_keys``).
OLD_NAMES = {
    "fast_1": "faster_than_eager",
    "fast_1_compile": "faster_than_compile",
    "fast_1_at_1": "faster_than_eager_at_1",
    "samples_fast_1": "samples_faster_than_eager",
}


def renamed_keys(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``mapping`` (an old run's record) with each old key of ``OLD_NAMES`` under its
    new name, unless the new name is already there (then the old key is left as it is)."""
    old_to_new = {old: new for new, old in OLD_NAMES.items()}
    return {
        (old_to_new[k] if k in old_to_new and old_to_new[k] not in mapping else k): v
        for k, v in mapping.items()
    }


@dataclass(frozen=True)
class TaskOutcome:
    """One task's result. ``correct``: its best kernel is correct; ``speedup_vs_*``: eager (or
    ``torch.compile``) time over the best kernel's time (None: not measured); ``samples``: n
    episodes run; ``samples_correct``: c of them whose best kernel was correct."""

    task: str
    correct: bool
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    samples: int = 1
    samples_correct: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.samples_correct <= self.samples:
            raise ValueError(
                f"task {self.task!r}: samples_correct must be in 0..samples "
                f"(got {self.samples_correct} of {self.samples})"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> TaskOutcome:
        """The outcome in ``row`` (keys that are not fields are ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})


Row = TaskOutcome | Mapping[str, Any]


def _outcomes(rows: Iterable[Row]) -> list[TaskOutcome]:
    return [r if isinstance(r, TaskOutcome) else TaskOutcome.from_dict(r) for r in rows]


def _speedup(row: TaskOutcome, key: str) -> float | None:
    if key not in SPEEDUP_KEYS:
        raise ValueError(f"key must be one of {sorted(SPEEDUP_KEYS)}, not {key!r}")
    value: float | None = getattr(row, SPEEDUP_KEYS[key])
    return value


def _share(hits: int, total: int) -> float:
    return hits / total if total else 0.0


def pass_rate(rows: Iterable[Row]) -> float:
    """Share of tasks with a correct kernel: ``#{correct} / #tasks``."""
    outcomes = _outcomes(rows)
    return _share(sum(r.correct for r in outcomes), len(outcomes))


def faster_than(rows: Iterable[Row], key: str = "eager", p: float = 1.0) -> float:
    """KernelBench's fast_p against the ``key`` baseline ("eager" or "compile"):

        fast_p = #{tasks correct and speedup > p} / #tasks

    over ALL tasks. ``p = 0`` is correctness alone (fast_0 = pass rate; a correct kernel whose
    time was not measured counts); for ``p > 0`` an unmeasured speedup (None, e.g. torch.compile
    not timed) is not faster. Non-increasing in ``p``.
    """
    if not p >= 0:
        raise ValueError(f"p must be >= 0, not {p}")
    outcomes = _outcomes(rows)
    hits = 0
    for r in outcomes:
        s = _speedup(r, key)
        if r.correct and (p == 0 or (s is not None and s > p)):
            hits += 1
    return _share(hits, len(outcomes))


def fast_p(rows: Iterable[Row], p: float, key: str = "eager") -> float:
    """``faster_than(rows, key, p)``: fast_p (vs eager unless ``key="compile"``)."""
    return faster_than(rows, key, p)


def geomean_speedup(rows: Iterable[Row], key: str = "eager") -> float | None:
    """Geometric mean speedup over the correct kernels with a measured speedup:

        exp(mean(log s_i))   for correct tasks i with s_i not None

    None when there is no such kernel.
    """
    logs = []
    for r in _outcomes(rows):
        s = _speedup(r, key)
        if r.correct and s is not None and 0 < s < math.inf:
            logs.append(math.log(s))
    return math.exp(math.fsum(logs) / len(logs)) if logs else None


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator (Chen et al. 2021) from n samples of which c passed:

        pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n-c+1}^{n} (1 - k / i)

    (1.0 when n - c < k). The product form needs no large binomials. Requires
    ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def mean_pass_at_k(rows: Iterable[Row], k: int) -> float:
    """The mean of ``pass_at_k(samples, samples_correct, k)`` over tasks (0.0 for none)."""
    outcomes = _outcomes(rows)
    values = [pass_at_k(r.samples, r.samples_correct, k) for r in outcomes]
    return math.fsum(values) / len(values) if values else 0.0


def p_label(p: float) -> str:
    """The key of ``p`` in ``summary``'s dicts: "0", "0.5", "1", "1.5", ..."""
    return f"{p:g}"


def summary(
    rows: Iterable[Row],
    ps: Sequence[float] = DEFAULT_PS,
    ks: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Every metric at once (shares in 0..1):

    ``pass_rate``, ``fast_1`` and ``fast_1_compile`` (fast_p at p = 1: correct and
    speedup > 1 against eager, against ``torch.compile``),
    ``geomean_speedup_vs_eager``, ``geomean_speedup_vs_compile``, ``fast_p`` (vs eager) and
    ``fast_p_compile`` keyed by ``p_label(p)``, ``pass_at_k`` keyed by ``str(k)``, ``tasks``.
    ``ks=None`` reports those of ``DEFAULT_KS`` that every task has the samples for.
    """
    outcomes = _outcomes(rows)
    if ks is None:
        least = min((r.samples for r in outcomes), default=0)
        ks = [k for k in DEFAULT_KS if k <= least]
    return {
        "pass_rate": pass_rate(outcomes),
        "fast_1": faster_than(outcomes, "eager", 1.0),
        "fast_1_compile": faster_than(outcomes, "compile", 1.0),
        "geomean_speedup_vs_eager": geomean_speedup(outcomes, "eager"),
        "geomean_speedup_vs_compile": geomean_speedup(outcomes, "compile"),
        "fast_p": {p_label(p): faster_than(outcomes, "eager", p) for p in ps},
        "fast_p_compile": {p_label(p): faster_than(outcomes, "compile", p) for p in ps},
        "pass_at_k": {str(k): mean_pass_at_k(outcomes, k) for k in ks},
        "tasks": len(outcomes),
    }
