"""A trace of where every worker did device work, to check the timing gate from outside it.

With ``CUDA_AGENT_TRACE`` set to a directory, each worker appends one JSON line per section of
device work (``_shared.sections``) to its own file there, opened when the worker starts (before
its confinement): ``{"pid", "role", "lane", "device", "kind", "start", "end"}``, with ``kind``
``"timing"`` or a correctness kind (``"load"``, ``"check"``, ``"profile"``, ...) and the times
from ``time.monotonic()`` (one clock for every process of the machine). A section's end is
taken after its device work has finished (the device synchronised), so the span covers that
work. The spans are written by the code that does the work, not by the gate, so a gate that
let two lanes through would show in them (``timing_overlaps``); the benchmark's control
(``SandboxConfig(timing_gate=False)``) must find such overlaps.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ENV = "CUDA_AGENT_TRACE"

_file: IO[str] | None = None
_where: dict[str, str] = {}


def open_from_env(role: str) -> None:
    """In a worker at start: open this process's trace file if ``CUDA_AGENT_TRACE`` is set."""
    global _file
    directory = os.environ.get(ENV)
    if not directory:
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    _file = open(Path(directory) / f"{role}-{os.getpid()}.jsonl", "a", buffering=1)  # noqa: SIM115
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    on_gpu = os.environ.get("CUDA_AGENT_BACKEND") == "cuda" and visible
    _where.update(
        role=role,
        lane=os.environ.get("CUDA_AGENT_LANE", ""),
        device=f"gpu{visible}" if on_gpu else "host",
    )


def record(kind: str, start: float, end: float) -> None:
    if _file is None:
        return
    line = {"pid": os.getpid(), **_where, "kind": kind, "start": start, "end": end}
    _file.write(json.dumps(line) + "\n")


@dataclass(frozen=True)
class Span:
    pid: int
    role: str
    lane: str
    device: str
    kind: str
    start: float
    end: float

    @property
    def timing(self) -> bool:
        return self.kind == "timing"


def read_spans(directory: str | Path) -> list[Span]:
    """Every span the workers wrote under ``directory`` (a torn last line is skipped)."""
    spans = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                data: dict[str, Any] = json.loads(line)
                spans.append(Span(**data))
            except (ValueError, TypeError):
                continue
    return spans


def timing_overlaps(spans: Iterable[Span]) -> list[tuple[Span, Span]]:
    """Pairs (a timing, another process's span on the same device) that overlap in time: any
    device work beside a timing, a second timing included. Spans of one process never count
    against each other (a process does one thing at a time)."""
    by_device: dict[str, list[Span]] = {}
    for span in spans:
        by_device.setdefault(span.device, []).append(span)
    found = []
    for group in by_device.values():
        for timing in (s for s in group if s.timing):
            for other in group:
                if other.pid == timing.pid or not (
                    other.start < timing.end and timing.start < other.end
                ):
                    continue
                if other.timing and (other.start, other.pid) < (timing.start, timing.pid):
                    continue  # a pair of timings is counted once
                found.append((timing, other))
    return found
