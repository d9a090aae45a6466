"""Sections of device work in a worker, each held on the device's timing gate (``_parent.gate``).

A worker asks the parent before device work: ``correctness(kind)`` for a reader's section
(loading a candidate, a check, a profile), ``timing()`` for the writer's (alone on the device).
At the end of a section the device is synchronised, so nothing of it still runs, and the
parent is told the section is over (no answer awaited). Sections nest: only the outermost
asks and releases. A worker with no ``ask`` (a reference worker's check, which runs inside the
candidate worker's section of the same lane) only traces its sections.

The gate is the harness's, not the candidate's: candidate code runs only inside these sections
(at import, in ``forward``), and the threads it might leave behind are rejected
(``background_thread``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from . import trace as _trace

Ask = Callable[[dict[str, Any]], dict[str, Any]]

# Bound at import, before any candidate code can replace it.
_synchronize = torch.cuda.synchronize


class Sections:
    """A worker's sections of device work in one job. ``ask`` sends the parent a message and
    returns its answer; ``tell`` sends one that has none. Without them, sections are only
    traced."""

    def __init__(
        self, ask: Ask | None = None, tell: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        self.ask = ask
        self.tell = tell
        self.kind: str | None = None  # the outermost open section's
        self.depth = 0
        self.waited_s = 0.0

    @contextlib.contextmanager
    def correctness(self, kind: str = "check") -> Iterator[None]:
        with self._section("read", kind):
            yield

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        with self._section("write", "timing"):
            yield

    @contextlib.contextmanager
    def _section(self, mode: str, kind: str) -> Iterator[None]:
        if self.depth:
            if (mode == "write") != (self.kind == "timing"):
                raise RuntimeError(f"a {kind} section cannot open inside a {self.kind} section")
            self.depth += 1
            try:
                yield
            finally:
                self.depth -= 1
            return
        if self.ask is not None:
            asked = time.perf_counter()
            self.ask({"type": "gate", "hold": mode})
            self.waited_s += time.perf_counter() - asked
        self.kind, self.depth = kind, 1
        start = time.monotonic()
        try:
            yield
        finally:
            self.depth, self.kind = 0, None
            self._settle()
            _trace.record(kind, start, time.monotonic())
            if self.tell is not None:
                self.tell({"type": "gate", "hold": "none"})

    def _settle(self) -> None:
        """Wait until the section's device work has finished (a broken context raises here:
        it runs nothing any more either)."""
        if torch.cuda.is_initialized():  # a worker sees its one GPU as its current device
            with contextlib.suppress(Exception):
                _synchronize()
