"""Property-based checking of a candidate against its reference, with hypothesis.

A candidate verified only on the task's visible sizes may hard-code them, or fail on odd sizes,
tails of the value distribution or huge magnitudes. ``check_candidate`` first evaluates one case
just above the visible sizes (each one more, ``above_visible_case``): a loop bound or buffer
sized from the visible problem leaves the tail unwritten there. Then it draws other problem
sizes (the task's module-level integers: tiny, odd, up to the visible ones) and other value
distributions, evaluates each case in the sandbox (correctness only), and shrinks a failure to
the smallest counterexample. Every evaluation also guards the tensors the candidate receives
and allocates, so a write past their bounds on the smaller sizes fails
(``out_of_bounds_write``)::

    report = check_candidate(sandbox, task, candidate_source, max_examples=25)
    assert report.passed, report

In a test suite, ``assert_candidate_matches(...)`` raises ``AssertionError`` with that report.
Cases where the *reference* fails (sizes it cannot take) are discarded, not blamed on the
candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from hypothesis import HealthCheck, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure

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
    # which case failed: "drawn" (by hypothesis, shrunk) or "above_visible"; "" when passed
    found_by: str = ""
    above_visible: Case | None = None  # the case above the visible sizes that was judged

    def __str__(self) -> str:
        if self.passed:
            above = " and one above the visible sizes" if self.above_visible else ""
            return f"candidate matched the reference on {self.examples} cases (drawn{above})"
        assert self.counterexample is not None and self.result is not None
        where = ""
        if self.found_by == "above_visible":
            where = " (above the visible sizes"
            where += ", which pass: hard-coded?)" if "hard_coded_size" in self.result.flags else ")"
        return (
            f"candidate fails with sizes {self.counterexample.sizes}{where} and "
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
    ``normal`` distribution. The visible sizes are those used on ``backend`` (CPU_SIZES on "cpu").
    With the default ``max_scale`` no size exceeds the visible one: ``check_candidate`` adds
    ``above_visible_case`` for that."""
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


def above_visible_case(
    task: Task, *, backend: str = "cuda", names: Sequence[str] | None = None
) -> Case:
    """The case just above the visible problem: each size in ``names`` (default: all
    module-level integers) one more than on ``backend``, ``normal`` inputs. One more is enough:
    a size hard-coded from the visible problem leaves the last row or element unwritten (the
    sandbox's allocations are poisoned), and the problem stays as cheap as the visible one."""
    visible = task.sizes_for(backend)
    chosen = list(visible) if names is None else list(names)
    return Case(sizes={n: visible[n] + 1 for n in chosen})


def _above_visible_cases(task: Task, backend: str, names: Sequence[str] | None) -> list[Case]:
    """``above_visible_case``, then (for a reference that refuses it: sizes tied to each
    other) each size alone one above the visible one."""
    every = above_visible_case(task, backend=backend, names=names)
    alone = [Case(sizes={n: v}) for n, v in every.sizes.items()] if len(every.sizes) > 1 else []
    return [every, *alone]


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The exceptions inside ``group`` and its nested groups."""
    found: list[BaseException] = []
    for e in group.exceptions:
        found.extend(_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    return found


class _CaseFailed(Exception):
    def __init__(self, case: Case, result: EvalResult) -> None:
        flags = f" [{', '.join(result.flags)}]" if result.flags else ""
        super().__init__(f"{case}: {result.status}{flags}: {result.message[:500]}")
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
    above_visible: bool = True,
) -> PropertyReport:
    """Evaluate ``candidate`` on drawn cases; return the minimal failing case, if any.

    With ``above_visible`` (the default), the case with every size one above the visible one
    comes first (``above_visible_case``; where the reference refuses it, each size alone one
    above, until the reference takes one). A candidate that fails there but passes at the
    visible sizes (evaluated next) is reported at once, its verdict flagged ``hard_coded_size``
    (``found_by == "above_visible"``), without drawing: such a kernel usually writes far past
    its buffers on the small drawn sizes, and each crash costs a worker restart while
    hypothesis shrinks. Otherwise ``max_examples`` cases are drawn by ``case_strategy`` (sizes
    up to the visible ones times ``max_scale``) and a failure is shrunk (``found_by ==
    "drawn"``); a failure above the visible sizes that no drawn case reproduces is reported last,
    unflagged. Every evaluation guards the candidate's tensors, so a write out of their bounds
    fails a case as ``out_of_bounds_write``. A case that fails once and passes when replayed
    (a race) is still a failure, its verdict flagged ``flaky``.

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

    def judge(case: Case) -> EvalResult:
        nonlocal evaluated
        evaluated += 1
        return sandbox.evaluate(
            task,
            candidate,
            sizes=case.sizes,
            distribution=case.distribution,
            measure_time=False,
        )

    above: tuple[Case, EvalResult] | None = None
    if above_visible:
        for case in _above_visible_cases(task, sandbox.backend, names):
            result = judge(case)
            if not result.extra.get("reference_failed"):
                above = (case, result)
                break
    if above is not None and not above[1].correct:
        case, result = above
        visible = task.sizes_for(sandbox.backend)
        if judge(Case(sizes={n: visible[n] for n in case.sizes})).correct:
            flagged = replace(result, flags=(*result.flags, "hard_coded_size"))
            return PropertyReport(False, evaluated, case, flagged, "above_visible", case)

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def holds(case: Case) -> None:
        result = judge(case)
        if result.extra.get("reference_failed"):
            reject()  # the reference cannot take this case: not the candidate's fault
        if not result.correct:
            raise _CaseFailed(case, result)

    above_case = above[0] if above is not None else None
    try:
        hypothesis_seed(seed)(holds)()
    except _CaseFailed as failure:
        return PropertyReport(False, evaluated, failure.case, failure.result, "drawn", above_case)
    except FlakyFailure as flaky:
        # A case failed once and passed when hypothesis replayed it: a race or a read of memory
        # the kernel did not write. Still a failure; the verdict is flagged ``flaky``.
        failures = [e for e in _leaves(flaky) if isinstance(e, _CaseFailed)]
        if not failures:
            raise
        first = failures[0]
        flagged = replace(first.result, flags=(*first.result.flags, "flaky"))
        return PropertyReport(False, evaluated, first.case, flagged, "drawn", above_case)
    if above is not None and not above[1].correct:
        return PropertyReport(False, evaluated, above[0], above[1], "above_visible", above_case)
    return PropertyReport(True, evaluated, above_visible=above_case)


def assert_candidate_matches(
    sandbox: Sandbox, task: Task, candidate: str, **kwargs: object
) -> PropertyReport:
    """pytest helper: ``check_candidate`` that raises ``AssertionError`` naming the smallest
    counterexample (sizes, distribution, verdict)."""
    report = check_candidate(sandbox, task, candidate, **kwargs)  # type: ignore[arg-type]
    if not report.passed:
        raise AssertionError(str(report))
    return report
