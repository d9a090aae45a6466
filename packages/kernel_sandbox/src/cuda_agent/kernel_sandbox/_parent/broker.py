"""Brokering one evaluation (the parent): each check's verdict asked of the reference worker
and recorded, and the final ``EvalResult`` composed from that record.

The parent decides which checks a candidate must pass (``_parent.plan``) and records every verdict the
reference worker gives. The candidate worker's own report is believed only for what it alone
can know (build time, timings, its own errors): its trials, and whether it passed them, come
from the parent's record.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .._shared.protocol import CheckRequest, CheckVerdict, DeviceBufferRequest, Job, ReferenceCheck
from ..result import EvalResult, TrialOutcome
from ..tasks import Task
from .pool import Worker, WorkerDied, add_seconds

# The fields of a candidate worker's report that the result takes as they are.
_REPORTED = (
    "status",
    "message",
    "build_seconds",
    "candidate_time_ms",
    "candidate_time_spread_ms",
    "eager_time_ms",
    "eager_time_spread_ms",
    "compile_time_ms",
    "compile_time_spread_ms",
    "flags",
    "extra",
)


@dataclass
class Broker:
    """Answers a candidate worker's ``check`` requests by asking the reference worker, and
    remembers every verdict."""

    job: Job
    reference: Worker
    record: dict[int, CheckVerdict] = field(default_factory=dict)
    seconds: float = 0.0  # spent waiting for the reference worker
    reference_peak_bytes: int = 0  # the reference worker's peak of GPU memory over the checks
    reference_held_bytes: int = 0  # the most it held when a check began
    # per output, an (atol, rtol) over the job's: the trivial-answer rule's (``_parent.trivial``)
    output_tolerances: list[list[float] | None] | None = None

    def __call__(self, message: dict[str, Any]) -> dict[str, Any]:
        if message.get("type") == "buffer":
            return self._device_buffer(message)
        request = CheckRequest.parse(message)
        checks = self.job.checks
        if request is None or not 0 <= request.index < len(checks) or request.index in self.record:
            # A check outside the plan, or asked twice: never judged, and never counted.
            return CheckVerdict(message="check not in the plan").to_json()
        cfg = self.job.config
        draw = self.job.draw(checks[request.index])
        ask = ReferenceCheck(
            **vars(draw),
            atol=cfg.atol,
            rtol=cfg.rtol,
            dtype_tolerances=cfg.dtype_tolerances,
            outputs=request.outputs,
            inputs=request.inputs,
            exchange=self.job.exchange,
            output_tolerances=self.output_tolerances,
        )
        started = time.perf_counter()
        try:
            verdict = CheckVerdict.parse(self.reference.run(ask.to_json()))
        except WorkerDied as death:
            verdict = CheckVerdict(reference_failed=f"the reference worker failed: {death.reason}")
        self.seconds += time.perf_counter() - started
        self.reference_peak_bytes = max(self.reference_peak_bytes, verdict.peak_gpu_bytes)
        self.reference_held_bytes = max(self.reference_held_bytes, verdict.held_gpu_bytes)
        self.record[request.index] = verdict
        return verdict.to_json()

    def _device_buffer(self, message: dict[str, Any]) -> dict[str, Any]:
        """A candidate worker's request for the slot's device buffer (``_shared.device_exchange``):
        the reference worker's answer, or an error (the outputs then take the host path)."""
        request = DeviceBufferRequest(
            bytes=message.get("bytes"), limit=self.job.config.max_output_tensor_bytes
        )
        try:
            return self.reference.run(request.to_json())
        except WorkerDied as death:
            return {"error": f"the reference worker failed: {death.reason}"}


def compose(report: dict[str, Any], broker: Broker, task: Task, backend: str) -> EvalResult:
    """The final result from the candidate worker's ``report`` and the broker's record."""
    checks = broker.job.checks
    trials = []
    for index in sorted(broker.record):
        verdict, check = broker.record[index], checks[index]
        if verdict.reference_failed is not None:
            continue
        message = verdict.message
        if not verdict.passed and message:
            message = check.label + message
        trials.append(
            TrialOutcome(
                seed=check.seed,
                passed=verdict.passed,
                max_abs_error=verdict.max_abs_error,
                max_rel_error=verdict.max_rel_error,
                message=message,
            )
        )
    data: dict[str, Any] = {key: report[key] for key in _REPORTED if key in report}
    data.update(task=task.name, backend=backend, trials=[t.__dict__ for t in trials])
    add_seconds(data, reference=broker.seconds)
    if broker.reference_peak_bytes:
        data["extra"]["reference_peak_gpu_bytes"] = broker.reference_peak_bytes
        data["extra"]["reference_held_gpu_bytes"] = broker.reference_held_bytes
    if trials:
        data["max_abs_error"] = max(t.max_abs_error for t in trials)
        data["max_rel_error"] = max(t.max_rel_error for t in trials)
    unjudged = sorted(i for i, v in broker.record.items() if v.reference_failed is not None)
    failed = any(not v.passed and v.reference_failed is None for v in broker.record.values())
    if unjudged and not failed and data.get("status") == "runtime_error" and not data.get("flags"):
        # The trusted reference worker failed on a check (the parent's own record, not the
        # candidate's word), and no judged check failed: no verdict on the candidate.
        # ``Sandbox.evaluate`` then tries again and finds whose doing it was.
        first = broker.record[unjudged[0]].reference_failed
        data.update(
            status="unjudged",
            message=f"the sandbox could not judge this candidate: the reference failed on "
            f"check {unjudged[0]}: {first}",
        )
        data["extra"]["reference_failed_check"] = unjudged[0]
    verified = {i for i, verdict in broker.record.items() if verdict.passed}
    if data.get("status") == "ok" and not set(broker.job.required_checks(report)) <= verified:
        data.update(
            status="rejected",
            message="the candidate worker reported success for outputs that were not all "
            "verified by the reference worker",
            flags=[*data.get("flags", []), "unverified_result"],
        )
    try:
        return EvalResult.from_dict(data)
    except (TypeError, ValueError) as exc:
        return EvalResult(
            status="runtime_error",
            message=f"the worker returned an unreadable result ({exc})",
            task=task.name,
            backend=backend,
        )
