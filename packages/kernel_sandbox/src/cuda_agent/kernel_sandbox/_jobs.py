"""One evaluation as the parent sees it: the job and its check plan, brokering each trial's
verdict from the reference worker, and the final ``EvalResult``.

The parent decides which checks a candidate must pass (seeds and sizes) and records every
verdict the reference worker gives. The candidate worker's own report is believed only for
what it alone can know (build time, timings, its own errors): its trials, and whether it
passed them, come from the parent's record.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._compile import cache_dir
from ._pool import Worker, WorkerDied
from .config import SandboxConfig
from .result import EvalResult, TrialOutcome
from .tasks import Task

# Seeds of each stage's inputs, offset from ``SandboxConfig.seed``.
TRIAL_SEED, INPLACE_SEED, DISTRIBUTION_SEED = 1000, 2000, 3000
CONFIG_SEED, REVERIFY_SEED, AFTER_TIMING_SEED = 5000, 7000, 9000


def plan_checks(
    task: Task,
    config: SandboxConfig,
    base_sizes: Mapping[str, int],
    caller_sizes: bool,
    measure_time: bool,
) -> list[dict[str, Any]]:
    """The checks a candidate must pass, in order.

    ``trial``: ``trials`` draws from ``get_inputs()``, then (unless the caller chose the sizes or
    runtime checks are off) one per ``extra_distributions`` (heavy tails catch work skipped
    where tolerances allow) and ``inplace``: the same input tensors overwritten with new
    values (catches results cached by tensor identity). ``config``: one per declared input
    configuration. ``reverify``: fresh draws, run only when the measured speedup exceeds
    ``reverify_speedup``. ``after``: fresh inputs after timing (catches warm-up detection).
    """
    seed, sizes = config.seed, dict(base_sizes)
    plan: list[dict[str, Any]] = [
        {"stage": "trial", "seed": seed + TRIAL_SEED + t, "sizes": sizes}
        for t in range(config.trials)
    ]
    if not caller_sizes and config.runtime_checks:
        for k, distribution in enumerate(config.extra_distributions):
            plan.append(
                {
                    "stage": "trial",
                    "seed": seed + DISTRIBUTION_SEED + k,
                    "sizes": sizes,
                    "distribution": distribution,
                    "label": f"with {distribution} inputs: ",
                }
            )
        plan.append(
            {
                "stage": "inplace",
                "seed": seed + INPLACE_SEED,
                "sizes": sizes,
                "label": "after new values were written into the same input tensors: ",
            }
        )
    if not caller_sizes:
        for k, extra in enumerate(task.input_configs):
            plan.append(
                {
                    "stage": "config",
                    "seed": seed + CONFIG_SEED + k,
                    "sizes": {**base_sizes, **extra},
                    "label": f"with sizes {dict(extra)}: ",
                }
            )
    if measure_time:
        if config.runtime_checks:
            plan += [
                {"stage": "reverify", "seed": seed + REVERIFY_SEED + k, "sizes": sizes}
                for k in range(3)
            ]
        plan.append({"stage": "after", "seed": seed + AFTER_TIMING_SEED, "sizes": sizes})
    return plan


def required_checks(plan: list[dict[str, Any]], raw: dict[str, Any], bound: float) -> list[int]:
    """Indices of the checks a successful candidate must have passed: all, except the
    re-verification ones when its measured speedup stayed within ``bound``."""
    eager, cand = raw.get("eager_time_ms"), raw.get("candidate_time_ms")
    speedup = (
        eager / cand
        if isinstance(eager, int | float) and isinstance(cand, int | float) and cand > 0
        else 0.0
    )
    return [i for i, step in enumerate(plan) if step["stage"] != "reverify" or speedup > bound]


@dataclass
class Broker:
    """Answers a candidate worker's ``check`` requests by asking the reference worker, and
    remembers every verdict."""

    job: dict[str, Any]
    reference: Worker
    exchange: int
    record: dict[int, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0  # spent waiting for the reference worker

    def __call__(self, message: dict[str, Any]) -> dict[str, Any]:
        if message.get("type") == "buffer":
            return self._device_buffer(message)
        plan = self.job["checks"]
        index = message.get("index")
        if type(index) is not int or not 0 <= index < len(plan) or index in self.record:
            # A check outside the plan, or asked twice: never judged, and never counted.
            return {"passed": False, "message": "check not in the plan"}
        cfg = self.job["config"]
        step = plan[index]
        request = {
            "kind": "reference",
            "task": self.job["task"],
            "task_digest": cfg["task_digest"],
            "sizes": step["sizes"],
            "seed": step["seed"],
            "model_seed": cfg["seed"],
            "distribution": step.get("distribution", cfg["distribution"]),
            "device": cfg["device"],
            "atol": cfg["atol"],
            "rtol": cfg["rtol"],
            "dtype_tolerances": cfg["dtype_tolerances"],
            "outputs": message.get("outputs"),
            "inputs": message.get("inputs"),
            "exchange": self.exchange,
        }
        started = time.perf_counter()
        try:
            answer = self.reference.run(request)
        except WorkerDied as death:
            answer = {"reference_failed": f"the reference worker failed: {death.reason}"}
        self.seconds += time.perf_counter() - started
        self.record[index] = answer
        return answer

    def _device_buffer(self, message: dict[str, Any]) -> dict[str, Any]:
        """A candidate worker's request for the slot's device buffer (``_device_exchange``):
        the reference worker's answer, or an error (the outputs then take the host path)."""
        request = {
            "kind": "device_buffer",
            "bytes": message.get("bytes"),
            "limit": self.job["config"]["max_output_tensor_bytes"],
        }
        try:
            return self.reference.run(request)
        except WorkerDied as death:
            return {"error": f"the reference worker failed: {death.reason}"}


def compose(raw: dict[str, Any], broker: Broker, task: Task, backend: str) -> EvalResult:
    """The final result from the candidate worker's report and the broker's record."""
    plan = broker.job["checks"]
    trials = []
    for index in sorted(broker.record):
        answer, step = broker.record[index], plan[index]
        if "reference_failed" in answer:
            continue
        passed = answer.get("passed") is True
        message = str(answer.get("message", ""))
        if not passed and message:
            message = step.get("label", "") + message
        trials.append(
            TrialOutcome(
                seed=step["seed"],
                passed=passed,
                max_abs_error=_number(answer.get("max_abs_error")),
                max_rel_error=_number(answer.get("max_rel_error")),
                message=message,
            )
        )
    data: dict[str, Any] = {
        key: raw[key]
        for key in (
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
        if key in raw
    }
    data.update(task=task.name, backend=backend, trials=[t.__dict__ for t in trials])
    extra: dict[str, Any] = data["extra"] if isinstance(data.get("extra"), dict) else {}
    seconds = extra["seconds"] if isinstance(extra.get("seconds"), dict) else {}
    data["extra"] = {**extra, "seconds": {**seconds, "reference": broker.seconds}}
    if trials:
        data["max_abs_error"] = max(t.max_abs_error for t in trials)
        data["max_rel_error"] = max(t.max_rel_error for t in trials)
    required = required_checks(plan, raw, float(broker.job["config"]["reverify_speedup"]))
    verified = {i for i, answer in broker.record.items() if answer.get("passed") is True}
    if data.get("status") == "ok" and not set(required) <= verified:
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


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not math.isnan(value) else math.inf


class BaselineCache:
    """``torch.compile`` baselines (with the eager time measured beside them) per task, sizes,
    GPU model and torch version, in memory and as JSON files under
    ``$CUDA_AGENT_CACHE/baselines``. Only the parent writes them, from a reference worker's
    measurement, so no candidate can plant a slow baseline."""

    def __init__(self) -> None:
        self._memory: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(job: dict[str, Any], identity: Mapping[str, str]) -> str:
        cfg = job["config"]
        text = json.dumps(
            [cfg["task_digest"], job["sizes"], identity.get("device"), identity.get("torch")],
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def get(
        self, job: dict[str, Any], reference: Worker, use_cache: bool = True
    ) -> dict[str, Any] | None:
        """The job's baseline: cached, or measured now by ``reference`` (None if that failed).
        ``use_cache=False`` measures it afresh and keeps nothing."""
        if not reference.alive():
            reference.start()
        key = self.key(job, reference.identity)
        path = cache_dir("baselines") / f"{key}.json"
        if use_cache:
            with self._lock:
                if key in self._memory:
                    return self._memory[key]
            with contextlib.suppress(OSError, ValueError):
                found = json.loads(path.read_text())
                if _is_baseline(found):
                    found["source"] = "cached"
                    with self._lock:
                        self._memory[key] = found
                    return found
        cfg = job["config"]
        request = {
            "kind": "baseline",
            "task": job["task"],
            "task_digest": cfg["task_digest"],
            "sizes": job["sizes"],
            "seed": job["checks"][0]["seed"],
            "model_seed": cfg["seed"],
            "device": cfg["device"],
            "warmup": cfg["warmup"],
            "repeats": cfg["repeats"],
            "timing_budget_s": cfg["timing_budget_s"],
            "timing_precision": cfg.get("timing_precision", 0.0),
        }
        try:
            measured = reference.run(request)
        except WorkerDied:
            return None
        if not _is_baseline(measured):
            return None
        if not use_cache:
            return {**measured, "source": "measured"}
        measured["source"] = "cached"
        staged = path.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.tmp")
        with contextlib.suppress(OSError):
            staged.write_text(json.dumps(measured))
            os.replace(staged, path)
        with self._lock:
            self._memory[key] = measured
        return measured


def _is_baseline(data: Any) -> bool:
    names = ("eager_ms", "eager_spread_ms", "compile_ms", "compile_spread_ms")
    return isinstance(data, dict) and all(
        isinstance(data.get(n), int | float) and math.isfinite(data[n]) and data[n] >= 0
        for n in names
    )
