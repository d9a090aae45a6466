"""``validate_task``: would an answer that computes nothing earn a task's reward?

    report = validate_task(task, SandboxConfig(backend="cpu"))
    if not report.ok:
        print("\\n".join(str(f) for f in report.findings))

A task is degenerate when its expected output is (per output) near zero (an all-zero answer
passes the sandbox's comparison at the configured tolerances), constant (all elements equal, to
the tolerance), or the same for inputs drawn from different seeds (a hard-coded tensor
passes). The reference runs where it always runs, in a reference worker (``_pool.Worker``: a
process of its own with a deadline), never in this process: here tasks are only read. The
draws are the first ``draws`` trial seeds a candidate is checked on, at the backend's sizes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, get_args

from ._parent.plan import TRIAL_SEED
from ._parent.pool import Worker, WorkerDied
from ._shared.protocol import BaselineReport, BaselineRequest, TrivialAnswersRequest
from .config import SandboxConfig
from .tasks import Task

TaskFindingCode = Literal[
    "near_zero_output",
    "constant_output",
    "input_independent_output",
    "non_finite_output",
    "nondeterministic_output",
    "reference_error",
    "compile_error",
]
FINDING_CODES: tuple[TaskFindingCode, ...] = get_args(TaskFindingCode)


@dataclass(frozen=True)
class TaskFinding:
    """One way a task rewards a trivial answer (or ``reference_error``: its reference failed).

    ``output`` is the index of the output concerned, None for the task as a whole.
    """

    code: TaskFindingCode
    message: str
    output: int | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


@dataclass(frozen=True)
class TaskValidation:
    """The verdict on one task: ``ok`` when no finding was made. ``sizes`` are the problem
    sizes it was run at, ``seeds`` the input draws, ``atol`` / ``rtol`` the tolerances.
    ``eager_time_ms`` / ``compile_time_ms``: the reference's median times, eager and under
    ``torch.compile`` (``validate_tasks(..., timing=True)``; None when not timed)."""

    task: str
    backend: str
    sizes: dict[str, int]
    seeds: tuple[int, ...]
    atol: float
    rtol: float
    findings: tuple[TaskFinding, ...] = ()
    eager_time_ms: float | None = None
    compile_time_ms: float | None = None

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready), with ``ok``."""
        return {**asdict(self), "ok": self.ok}

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)


def validate_task(
    task: Task, config: SandboxConfig | None = None, draws: int = 3, timing: bool = False
) -> TaskValidation:
    """Check ``task`` for outputs a trivial answer passes, on ``draws`` (>= 2) input draws, at
    the backend's sizes and ``config``'s tolerances; for outputs with NaN or Inf; and for
    outputs that differ when the reference is built and run twice on the same inputs. A
    reference that fails (to import, build, draw inputs or run; a crash or a hang past
    ``Deadlines.load``) is a ``reference_error`` finding, not an exception; a ``CPU_SIZES``
    that cannot be read raises ``TaskError``, as ``Sandbox.evaluate`` does. ``timing=True``
    also times the reference eager and under ``torch.compile`` as an evaluation's baseline
    does (a failure there is a ``compile_error`` finding)."""
    return validate_tasks([task], config, draws, timing)[0]


def validate_tasks(
    tasks: Sequence[Task],
    config: SandboxConfig | None = None,
    draws: int = 3,
    timing: bool = False,
    progress: Callable[[TaskValidation], None] | None = None,
) -> list[TaskValidation]:
    """``validate_task`` for each task, in order, in one reference worker (started once, and
    again after a task crashed it); ``progress`` is called with each verdict as it is made."""
    with TaskValidator(config, draws, timing) as validator:
        jobs = [validator.job(task) for task in tasks]  # a malformed CPU_SIZES raises here
        reports = []
        for task, job in zip(tasks, jobs, strict=True):
            reports.append(validator.run(task, job))
            if progress is not None:
                progress(reports[-1])
        return reports


class TaskValidator:
    """``validate_task`` over time in one reference worker that stays up between calls (a
    worker's first ``torch.compile`` on the CPU can take a minute: pay it once).

        with TaskValidator(SandboxConfig(backend="cpu"), timing=True) as validate:
            report = validate(task)
    """

    def __init__(
        self, config: SandboxConfig | None = None, draws: int = 3, timing: bool = False
    ) -> None:
        if draws < 2:
            raise ValueError("draws must be >= 2: input independence compares draws")
        self.config = replace(config or SandboxConfig(), workers=1).resolved()
        self.draws, self.timing = draws, timing
        self._worker = Worker(self.config, 0, "reference")

    def job(self, task: Task) -> TrivialAnswersRequest:
        return _job(task, self.config, self.draws)

    def run(self, task: Task, job: TrivialAnswersRequest) -> TaskValidation:
        report = _validate(task, job, self.config, self._worker)
        if self.timing and not any(f.code == "reference_error" for f in report.findings):
            report = _time(report, job, self.config, self._worker)
        return report

    def __call__(self, task: Task) -> TaskValidation:
        return self.run(task, self.job(task))

    def close(self) -> None:
        self._worker.kill()

    def __enter__(self) -> TaskValidator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _job(task: Task, cfg: SandboxConfig, draws: int) -> TrivialAnswersRequest:
    # Sizes, seeds and device as a candidate's trials use them (_plan.plan_job).
    tolerances = cfg.tolerances()
    return TrivialAnswersRequest(
        task=task.source,
        task_digest=task.digest,
        sizes=task.cpu_sizes if cfg.backend == "cpu" else {},
        model_seed=cfg.seed,
        device="cuda:0" if cfg.backend == "cuda" else "cpu",
        seeds=tuple(cfg.seed + TRIAL_SEED + k for k in range(draws)),
        atol=tolerances.atol,
        rtol=tolerances.rtol,
        dtype_tolerances={k: list(v) for k, v in tolerances.per_dtype.items()},
    )


def _validate(
    task: Task, job: TrivialAnswersRequest, cfg: SandboxConfig, worker: Worker
) -> TaskValidation:
    try:
        findings = _read_findings(worker.run(job.to_json()))
    except WorkerDied as death:
        reason = (
            f"the reference did not finish within {cfg.deadlines.load:g} s (Deadlines.load)"
            if death.timed_out
            else death.reason
        )
        findings = (TaskFinding("reference_error", reason),)
    return TaskValidation(
        task=task.name,
        backend=cfg.backend,
        sizes=task.sizes_for(cfg.backend),
        seeds=job.seeds,
        atol=job.atol,
        rtol=job.rtol,
        findings=findings,
    )


def _time(
    report: TaskValidation, job: TrivialAnswersRequest, cfg: SandboxConfig, worker: Worker
) -> TaskValidation:
    """``report`` with the reference's eager and ``torch.compile`` times (the baseline job an
    evaluation runs), or with a ``compile_error`` finding when that failed."""
    request = BaselineRequest(
        **vars(job.draw(job.seeds[0])),
        warmup=cfg.warmup,
        repeats=cfg.repeats,
        timing_budget_s=cfg.timing_budget_s,
        timing_precision=cfg.timing_precision,
    )
    try:
        answer = worker.run(request.to_json())
    except WorkerDied as death:
        answer = {"error": "timed out" if death.timed_out else death.reason}
    baseline = BaselineReport.parse(answer)
    if baseline is not None:
        return replace(report, eager_time_ms=baseline.eager_ms, compile_time_ms=baseline.compile_ms)
    error = TaskFinding(
        "compile_error",
        f"timing the reference eager and under torch.compile failed: {answer.get('error')}",
    )
    return replace(report, findings=(*report.findings, error))


def _read_findings(answer: dict[str, Any]) -> tuple[TaskFinding, ...]:
    """The findings in a reference worker's answer, checked field by field."""
    if "reference_failed" in answer:
        return (TaskFinding("reference_error", str(answer["reference_failed"])),)
    raw = answer.get("findings")
    unreadable = (TaskFinding("reference_error", "the reference worker sent an unreadable answer"),)
    if not isinstance(raw, list):
        return unreadable
    findings = []
    for item in raw:
        if not (
            isinstance(item, dict)
            and item.get("code") in FINDING_CODES
            and isinstance(item.get("message"), str)
            and (item.get("output") is None or type(item.get("output")) is int)
        ):
            return unreadable
        findings.append(TaskFinding(item["code"], item["message"], item.get("output")))
    return tuple(findings)
