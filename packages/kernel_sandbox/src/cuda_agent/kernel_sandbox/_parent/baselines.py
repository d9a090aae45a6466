"""The ``torch.compile`` baselines (the parent): measured by a reference worker, kept in memory
and on disk."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from .._shared.compile import cache_dir
from .._shared.protocol import BaselineReport, BaselineRequest, Job
from ..result import first_line, says_out_of_memory
from .pool import Worker, WorkerDied

if TYPE_CHECKING:
    from .lanes import Lane, LanePool


class BaselineCache:
    """``torch.compile`` baselines (with the eager time measured beside them) per task, sizes,
    GPU model and torch version, in memory and as JSON files under
    ``$CUDA_AGENT_CACHE/baselines``. Only the parent writes them, from a reference worker's
    measurement, so no candidate can plant a slow baseline."""

    def __init__(self) -> None:
        self._memory: dict[str, BaselineReport] = {}
        self._lock = threading.Lock()
        self._measuring: dict[str, threading.Lock] = {}  # one measurement per key at a time
        self._failures: dict[str, str] = {}  # key -> why its last measurement gave no baseline

    @staticmethod
    def key(job: Job, identity: Mapping[str, str]) -> str:
        text = json.dumps(
            [job.config.task_digest, job.sizes, identity.get("device"), identity.get("torch")],
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def get(self, job: Job, reference: Worker, use_cache: bool = True) -> BaselineReport | None:
        """The job's baseline: cached, or measured now by ``reference`` (None if that failed).
        ``use_cache=False`` measures it afresh and keeps nothing. Lanes asking for the same
        baseline at once wait for one measurement."""
        if not reference.alive():
            reference.start()
        key = self.key(job, reference.identity)
        if not use_cache:
            return self._measure(job, reference, key, keep=False)
        with self._lock:
            measuring = self._measuring.setdefault(key, threading.Lock())
        with measuring:
            return self._cached(key) or self._measure(job, reference, key, keep=True)

    def _cached(self, key: str) -> BaselineReport | None:
        """The baseline kept in memory or on disk, or None."""
        with self._lock:
            if key in self._memory:
                return self._memory[key]
        path = cache_dir("baselines") / f"{key}.json"
        with contextlib.suppress(OSError, ValueError):
            found = BaselineReport.parse(json.loads(path.read_text()))
            if found is not None:
                found = found.cached()
                with self._lock:
                    self._memory[key] = found
                return found
        return None

    def _failed(self, key: str, why: str) -> None:
        with self._lock:
            self._failures[key] = why

    def failure(self, job: Job, reference: Worker) -> str:
        """Why the job's last measurement gave no baseline ("" when none failed)."""
        with self._lock:
            return self._failures.get(self.key(job, reference.identity), "")

    def ahead(self, job: Job, reference: Worker) -> tuple[BaselineStatus, BaselineReport | None]:
        """One task's baseline measured ahead (``Sandbox.measure_baselines``) on a lane's
        ``reference`` worker: its status (``kept``, ``measured`` or ``failed``) and the
        baseline, kept or found (None when it failed)."""
        started = time.perf_counter()
        try:
            kept = self.known(job, reference)
            found = self.get(job, reference)  # kept: from memory
            seconds = time.perf_counter() - started
            if kept:
                return BaselineStatus(job.task_name, "kept"), found
            if found:
                return BaselineStatus(job.task_name, "measured", seconds), found
            why = self.failure(job, reference)
            return BaselineStatus(job.task_name, "failed", seconds, why), None
        except WorkerDied as death:
            return BaselineStatus(job.task_name, "failed", message=death.reason), None

    def known(self, job: Job, reference: Worker) -> bool:
        """Whether the job's baseline is kept already (in memory or on disk)."""
        if not reference.alive():
            reference.start()
        return self._cached(self.key(job, reference.identity)) is not None

    def _measure(self, job: Job, reference: Worker, key: str, keep: bool) -> BaselineReport | None:
        cfg = job.config
        request = BaselineRequest(
            **{**vars(job.draw(job.checks[0])), "distribution": "normal"},
            warmup=cfg.warmup,
            repeats=cfg.repeats,
            timing_budget_s=cfg.timing_budget_s,
            timing_precision=cfg.timing_precision,
        )
        try:
            answer = reference.run(request.to_json())
        except WorkerDied as death:
            self._failed(key, f"the reference worker died: {death.reason}")
            return None
        measured = BaselineReport.parse(answer)
        if measured is None:
            error = answer.get("error") if isinstance(answer, dict) else None
            self._failed(key, str(error or f"the reference worker answered {answer!r:.200}"))
        if measured is None or not keep:
            return measured
        path = cache_dir("baselines") / f"{key}.json"
        kept = measured.cached()
        staged = path.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.tmp")
        with contextlib.suppress(OSError):
            staged.write_text(json.dumps(kept.to_json()))
            os.replace(staged, path)
        with self._lock:
            self._memory[key] = kept
        return kept


@dataclass(frozen=True)
class BaselineStatus:
    """One task's ``torch.compile`` baseline after ``Sandbox.measure_baselines``: ``kept`` (found
    in the cache), ``measured`` (in ``seconds``), ``failed`` (no compile time will be
    reported for it; ``message`` says why when known) or ``off`` (not timed on this
    configuration)."""

    task: str
    status: Literal["kept", "measured", "failed", "off"]
    seconds: float = 0.0
    message: str = ""


def measure_ahead(
    baselines: BaselineCache, job: Job, lane: Lane, lanes: LanePool
) -> tuple[BaselineStatus, BaselineReport | None]:
    """``BaselineCache.ahead`` on ``lane``, measured once more with the device alone when it
    ran out of memory on a device it shares with other lanes (as an evaluation's job is,
    ``Sandbox._evaluate``): the other lanes' jobs finished, the reference worker
    started afresh (whatever its failed measurement held given back), the gate held throughout.
    A first-time task's footprint is unknown, so admission cannot keep such jobs apart: on the
    H200 (2026-12-05) eight KernelBench level-1 baselines measured at once, 6 GiB inputs each,
    and two ran out of memory beside the others. The status then says it was measured alone."""
    status, found = baselines.ahead(job, lane.reference)
    shared = sum(other.device == lane.device for other in lanes.lanes) > 1
    if not (shared and status.status == "failed" and says_out_of_memory(status.message)):
        return status, found
    with lanes.exclusive(lane), lane.hold.alone():
        lane.reference.kill()
        again, found = baselines.ahead(job, lane.reference)
    first = first_line(status.message)
    said = f"measured alone, after running out of memory beside other lanes: {first}"
    return replace(again, message=f"{said}; {again.message}" if again.message else said), found
