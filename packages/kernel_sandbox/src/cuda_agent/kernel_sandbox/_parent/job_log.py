"""A log of the pool's jobs as they happen, to say where a run's sandbox time went, above all
in a run that was killed before its verdicts came back.

With ``CUDA_AGENT_JOB_LOG`` set to a file, the pool appends one JSON line to it at each moment
of each job's life (``Sandbox.evaluate``): ``arrive`` (the job was asked for: ``evaluate_many``
writes every job's at once, though a job may wait for a thread), ``start`` (it was handed a
lane: after its build on a compile worker and its wait for a lane, which the lanes' admission
by memory may hold back), ``alone`` (its rerun after running out of memory beside other lanes
got the device to itself) and ``end`` (its verdict). Each line has ``event``, ``job`` (a
number, unique within its writer), ``log`` (the writer: one per ``Sandbox``), ``pid``,
``task`` and ``t`` (``time.monotonic()``, the clock of ``CUDA_AGENT_TRACE``'s spans, so the
two line up); ``start`` and ``alone`` name the ``lane``; ``end`` adds ``status``, ``wall_s``
(the verdict's ``wall_seconds``; none for an evaluation that raised) and what the verdict
reported of its memory and build (``peak_gpu_bytes``, ``reference_peak_gpu_bytes``,
``build_seconds``, ``rerun_alone``).
Lines are written whole and flushed at once, so a log cut by a kill ends with a whole line
(or one torn line, which ``read_events`` skips).

``summarize`` reads such a log back: how many jobs arrived, started and ended, the verdicts,
and which jobs were still waiting for a lane or still running when the log stopped (the
questions a stalled call leaves: ``kernel-sandbox jobs FILE`` prints it).
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

ENV = "CUDA_AGENT_JOB_LOG"
EVENTS = ("arrive", "start", "alone", "end")
_REPORTED = ("peak_gpu_bytes", "reference_peak_gpu_bytes", "build_seconds", "rerun_alone")


class JobLog:
    """Appends the pool's job events to ``path`` (None: writes nothing). Thread-safe: the pool's
    jobs run on its executor's threads."""

    def __init__(self, path: str | Path | None) -> None:
        self._file: IO[str] | None = None
        self._lock = threading.Lock()
        self._next = 0
        self._tag = secrets.token_hex(4)  # this writer's: job numbers are unique within it
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", buffering=1)  # noqa: SIM115 (closed by close())

    @classmethod
    def from_env(cls) -> JobLog:
        return cls(os.environ.get(ENV) or None)

    def arrive(self, task: str) -> int:
        """A new job on ``task``: its number for the later events."""
        with self._lock:
            self._next += 1
            job = self._next
        self._write("arrive", job, task)
        return job

    def start(self, job: int, task: str, lane: str) -> None:
        self._write("start", job, task, lane=lane)

    def alone(self, job: int, task: str, lane: str) -> None:
        self._write("alone", job, task, lane=lane)

    def end(
        self,
        job: int,
        task: str,
        status: str,
        wall_s: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """The job's verdict (``status``; for a job whose evaluation raised, ``raised <type>``
        and no ``wall_s``)."""
        reported = {k: v for k, v in (extra or {}).items() if k in _REPORTED and v is not None}
        if wall_s is not None:
            reported["wall_s"] = round(wall_s, 4)
        self._write("end", job, task, lane=(extra or {}).get("lane"), status=status, **reported)

    def _write(self, event: str, job: int, task: str, **fields: Any) -> None:
        if self._file is None:
            return
        line = {"event": event, "job": job, "log": self._tag, "pid": os.getpid(),
                "task": task, "t": time.monotonic(), **fields}  # fmt: skip
        text = json.dumps(line, default=str) + "\n"
        with self._lock:
            if self._file is not None:
                self._file.write(text)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """The events of a job log, in file order; a torn or foreign line is skipped."""
    events = []
    for line in Path(path).read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") in EVENTS and "job" in event:
            events.append(event)
    return events


def summarize(events: Iterable[dict[str, Any]], now: float | None = None) -> dict[str, Any]:
    """What a job log says (module docstring). ``now`` (a ``time.monotonic()`` reading of the
    same machine) is when the log is judged; None: the time of its last event, which for a
    killed run is about when it stopped. Jobs are keyed by (``pid``, ``log``, ``job``), so
    several sandboxes appending to one file are read apart.

    Returns ``arrived``, ``started``, ``ended``, ``statuses`` (verdict -> count), ``wall_s``
    and ``lane_wait_s`` (median and max over ended jobs; the wait is from ``arrive`` to
    ``start``, the build included), ``reruns_alone``, and ``waiting`` / ``running``: the jobs
    that had arrived but had no lane yet / had a lane but no verdict at ``now``, each with its
    ``task``, ``lane`` and ``seconds`` so far, the longest first."""
    jobs: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    last = None
    for event in events:
        key = (event.get("pid"), event.get("log"), event["job"])
        jobs.setdefault(key, {"task": event.get("task")})[event["event"]] = event
        t = event.get("t")
        if isinstance(t, (int, float)):
            last = t if last is None else max(last, t)
    at = now if now is not None else (last or 0.0)
    ended = [j for j in jobs.values() if "end" in j]
    statuses: dict[str, int] = {}
    for j in ended:
        statuses[str(j["end"].get("status"))] = statuses.get(str(j["end"].get("status")), 0) + 1
    walls = [float(j["end"]["wall_s"]) for j in ended if "wall_s" in j["end"]]
    waits = [
        j["start"]["t"] - j["arrive"]["t"] for j in jobs.values() if "start" in j and "arrive" in j
    ]

    def open_jobs(since: str, until: str) -> list[dict[str, Any]]:
        found = [{"task": j["task"], "lane": j.get("start", {}).get("lane"),
                  "seconds": round(at - j[since]["t"], 3)}
                 for j in jobs.values() if since in j and until not in j and "end" not in j]  # fmt: skip
        return sorted(found, key=lambda x: -x["seconds"])

    return {
        "arrived": sum("arrive" in j for j in jobs.values()),
        "started": sum("start" in j for j in jobs.values()),
        "ended": len(ended),
        "statuses": dict(sorted(statuses.items())),
        "wall_s": _spread(walls),
        "lane_wait_s": _spread(waits),
        "reruns_alone": sum("alone" in j for j in jobs.values()),
        "waiting": open_jobs("arrive", "start"),
        "running": open_jobs("start", "end"),
    }


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": round(statistics.median(values), 4), "max": round(max(values), 4)}
