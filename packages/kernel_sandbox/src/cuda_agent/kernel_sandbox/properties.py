"""Property-based checking of a candidate against its reference, with hypothesis.

A candidate verified only on the task's visible sizes may hard-code them, or fail on odd sizes,
tails of the value distribution or huge magnitudes. ``check_candidate`` draws other problem
sizes (the task's module-level integers: tiny, odd, up to the visible ones) and other value
distributions, evaluates each case in the sandbox (correctness only), and shrinks a failure to
the smallest counterexample::

    report = check_candidate(sandbox, task, candidate_source, max_examples=25)
    assert report.passed, report

In a test suite, ``assert_candidate_matches(...)`` raises ``AssertionError`` with that report.
Cases where the *reference* fails (sizes it cannot take) are discarded, not blamed on the
candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from .config import INPUT_DISTRIBUTIONS
from .result import EvalResult
from .sandbox import Sandbox
from .tasks import Task

DISTRIBUTIONS = INPUT_DISTRIBUTIONS


@dataclass(frozen=True)
class Case:
    """One drawn problem: size overrides and the value distribution of floating inputs."""

    sizes: dict[str, int] = field(default_factory=dict)
    distribution: str = "normal"


@dataclass(frozen=True)
class PropertyReport:
    passed: bool
    examples: int  # cases evaluated (including those discarded and the shrinking runs)
    counterexample: Case | None = None
    result: EvalResult | None = None  # the verdict on the counterexample

    def __str__(self) -> str:
        if self.passed:
            return f"candidate matched the reference on {self.examples} drawn cases"
        assert self.counterexample is not None and self.result is not None
        return (
            f"candidate fails with sizes {self.counterexample.sizes} and "
            f"{self.counterexample.distribution} inputs: {self.result.status}: {self.result.message}"
        )


def case_strategy(
    task: Task,
    *,
    backend: str = "cuda",
    names: Sequence[str] | None = None,
    max_scale: float = 1.0,
    distributions: Sequence[str] = DISTRIBUTIONS,
) -> st.SearchStrategy[Case]:
    """Cases for ``task``: each size in ``names`` (default: all module-level integers) drawn from
    1..max(1, visible * max_scale), biased toward tiny and odd values; shrinks toward 1 and the
    ``normal`` distribution. The visible sizes are those used on ``backend`` (CPU_SIZES on "cpu")."""
    visible = task.sizes_for(backend)
    chosen = list(visible) if names is None else list(names)
    unknown = [n for n in chosen if n not in visible]
    if unknown:
        raise ValueError(
            f"task {task.name!r} has no module-level integer(s) {unknown}; it has {sorted(visible)}"
        )
    if not distributions or any(d not in DISTRIBUTIONS for d in distributions):
        raise ValueError(f"distributions must be a non-empty subset of {DISTRIBUTIONS}")

    def size(value: int) -> st.SearchStrategy[int]:
        top = max(1, int(value * max_scale))
        odd = sorted({max(1, v) for v in (value - 1, value + 1, value // 2 + 1, 3, 7)} - {0})
        return st.one_of(
            st.integers(1, min(top, 4)),
            st.integers(1, top),
            st.sampled_from([v for v in odd if v <= max(top, 1)] or [1]),
        )

    sizes = st.fixed_dictionaries({n: size(visible[n]) for n in chosen})
    return st.builds(Case, sizes=sizes, distribution=st.sampled_from(list(distributions)))


class _CaseFailed(Exception):
    def __init__(self, case: Case, result: EvalResult) -> None:
        super().__init__(f"{case}: {result.status}")
        self.case = case
        self.result = result


def check_candidate(
    sandbox: Sandbox,
    task: Task,
    candidate: str,
    *,
    max_examples: int = 25,
    seed: int = 0,
    names: Sequence[str] | None = None,
    max_scale: float = 1.0,
    distributions: Sequence[str] = DISTRIBUTIONS,
) -> PropertyReport:
    """Evaluate ``candidate`` on drawn cases; return the minimal failing case, if any.

    Deterministic for a given ``seed`` (no example database is read or written).
    """
    strategy = case_strategy(
        task,
        backend=sandbox.backend,
        names=names,
        max_scale=max_scale,
        distributions=distributions,
    )
    evaluated = 0

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def holds(case: Case) -> None:
        nonlocal evaluated
        evaluated += 1
        result = sandbox.evaluate(
            task,
            candidate,
            sizes=case.sizes,
            distribution=case.distribution,
            measure_time=False,
        )
        if result.extra.get("reference_failed"):
            reject()  # the reference cannot take this case: not the candidate's fault
        if not result.correct:
            raise _CaseFailed(case, result)

    try:
        hypothesis_seed(seed)(holds)()
    except _CaseFailed as failure:
        return PropertyReport(False, evaluated, failure.case, failure.result)
    return PropertyReport(True, evaluated)


def assert_candidate_matches(
    sandbox: Sandbox, task: Task, candidate: str, **kwargs: object
) -> PropertyReport:
    """pytest helper: ``check_candidate`` that raises ``AssertionError`` naming the smallest
    counterexample (sizes, distribution, verdict)."""
    report = check_candidate(sandbox, task, candidate, **kwargs)  # type: ignore[arg-type]
    if not report.passed:
        raise AssertionError(str(report))
    return report
