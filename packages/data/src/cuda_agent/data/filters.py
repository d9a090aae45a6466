"""The filters a synthesized task must pass, run where task code runs: the sandbox's workers.

``run_filters(tasks, backend, ...)`` checks tasks in parallel (one reference worker per lane),
with a progress bar, and returns one ``FilterVerdict`` per task, in order:

1. ``reference_error``: the reference fails to build, draw inputs or run, eagerly;
2. ``non_finite``: an output holds NaN or Inf;
3. ``nondeterministic``: built and run twice on the same inputs, the outputs differ (a
   stochastic operator);
4. ``trivial``: a zero, constant or input-independent answer would pass (the sandbox's task
   validation, ``kernel_sandbox.validate_tasks``);
5. ``compile_error``: ``torch.compile`` of the reference fails (timed beside eager, as an
   evaluation's baseline);
6. ``window``: the eager time is outside the backend's window (``sizing.WINDOWS``);
7. ``solution``: a reference solution written for the task (``solutions.cpu_solution``) is not
   judged correct by the sandbox (only for tasks given one).

The first filter a task fails is its ``dropped_by``; the order above is the order of the
yield report.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, Task, TaskValidation, TaskValidator

SANDBOX_FILTERS = (
    "reference_error",
    "non_finite",
    "nondeterministic",
    "trivial",
    "compile_error",
    "window",
    "solution",
)
_FINDING_FILTER = {
    "reference_error": "reference_error",
    "non_finite_output": "non_finite",
    "nondeterministic_output": "nondeterministic",
    "near_zero_output": "trivial",
    "constant_output": "trivial",
    "input_independent_output": "trivial",
    "compile_error": "compile_error",
}


@dataclass(frozen=True)
class FilterVerdict:
    """One task through the filters: ``dropped_by`` (a ``SANDBOX_FILTERS`` name) and the
    reason, or kept; the reference's eager and compiled times (ms) where measured; whether
    its solution was checked and found correct (None: none was given)."""

    task: str
    dropped_by: str | None
    reason: str = ""
    eager_ms: float | None = None
    compile_ms: float | None = None
    solution_ok: bool | None = None

    @property
    def kept(self) -> bool:
        return self.dropped_by is None


def run_filters(
    tasks: Sequence[Task],
    backend: Literal["cpu", "cuda"] = "cpu",
    window: tuple[float, float] = (0.0, float("inf")),
    solutions: Mapping[str, str] | None = None,
    workers: int = 2,
    progress: Callable[[FilterVerdict], None] | None = None,
) -> list[FilterVerdict]:
    """Every task through the filters, ``workers`` lanes at a time; ``solutions`` maps a task
    name to a ``ModelNew`` source to check; ``progress`` gets each verdict when it is made."""
    with Filters(backend, window, workers) as filters:
        return filters.run(tasks, solutions, progress)


class Filters:
    """The filters' workers, kept up between calls of ``run`` (one reference worker per lane,
    whose first ``torch.compile`` is paid once; one sandbox for the solutions)."""

    def __init__(
        self,
        backend: Literal["cpu", "cuda"] = "cpu",
        window: tuple[float, float] = (0.0, float("inf")),
        workers: int = 2,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.window = window
        config = SandboxConfig(backend=backend, workers=1, threads_per_worker=1)
        self._lanes = [TaskValidator(config, timing=True) for _ in range(workers)]
        self._box: Sandbox | None = None
        self._sandbox_config = SandboxConfig(backend=backend, workers=workers, threads_per_worker=1)

    def run(
        self,
        tasks: Sequence[Task],
        solutions: Mapping[str, str] | None = None,
        progress: Callable[[FilterVerdict], None] | None = None,
    ) -> list[FilterVerdict]:
        """The verdicts on ``tasks``, in order (lanes take every ``workers``-th task)."""
        solutions = solutions or {}
        if solutions and self._box is None:
            self._box = Sandbox(self._sandbox_config)
        verdicts: dict[str, FilterVerdict] = {}
        lock = threading.Lock()
        width = len(self._lanes)

        def lane(validate: TaskValidator, chunk: Sequence[Task]) -> None:
            for task in chunk:
                verdict = _verdict(validate(task), self.window)
                if verdict.kept and task.name in solutions and self._box is not None:
                    verdict = _check_solution(self._box, task, solutions[task.name], verdict)
                with lock:
                    verdicts[task.name] = verdict
                if progress is not None:
                    progress(verdict)

        with concurrent.futures.ThreadPoolExecutor(width) as pool:
            futures = [
                pool.submit(lane, validate, tasks[k::width])
                for k, validate in enumerate(self._lanes)
            ]
            for future in futures:
                future.result()
        return [verdicts[t.name] for t in tasks]

    def close(self) -> None:
        for validate in self._lanes:
            validate.close()
        if self._box is not None:
            self._box.close()

    def __enter__(self) -> Filters:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _verdict(report: TaskValidation, window: tuple[float, float]) -> FilterVerdict:
    kept = FilterVerdict(report.task, None, "", report.eager_time_ms, report.compile_time_ms)
    failed = {_FINDING_FILTER[f.code]: str(f) for f in report.findings}
    for name in SANDBOX_FILTERS:
        if name in failed:
            return replace(kept, dropped_by=name, reason=failed[name])
    eager = report.eager_time_ms
    low, high = window
    if eager is None or not low <= eager <= high:
        reason = f"eager {eager:.3g} ms is outside [{low:g}, {high:g}] ms" if eager else "untimed"
        return replace(kept, dropped_by="window", reason=reason)
    return kept


def _check_solution(box: Sandbox, task: Task, source: str, verdict: FilterVerdict) -> FilterVerdict:
    result = box.evaluate(task, source, measure_time=False)
    if result.correct:
        return replace(verdict, solution_ok=True)
    reason = f"the reference solution was judged {result.status}: {result.message[:300]}"
    return replace(verdict, dropped_by="solution", reason=reason, solution_ok=False)
