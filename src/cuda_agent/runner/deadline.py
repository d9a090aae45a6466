"""A deadline for one invocation of ``cuda-agent train``: a run longer than one allowed stretch
of time (a device call of at most ten minutes) is done in several back-to-back invocations,
each stopping cleanly before its deadline and the next one resuming (``--resume``).

The run is cut only between units of work: a step of any training stage, an evaluation, the
baselines, the collection of the rejection fine-tuning's episodes. Before a unit starts,
``Deadline.check`` decides whether it is expected to finish in the time left; when it is not,
``DeadlineStop`` is raised, the last committed step being the run's state on disk.

The estimate of a unit is the longest unit of its kind (a stage's name, ``evaluation
<set>``, ``collection``, ``baselines``) this process finished, else the longest one an
earlier invocation recorded (``RunState.unit_seconds``), else (a kind never timed) the
longest unit of any kind this process finished, times ``MARGIN``. (On the H200 the first rft
collection, never timed, started with 60 s left, took 72 s and the call's end killed it; the
longest unit before it was a 128 s evaluation.) Two rules keep every invocation useful and
none late:

- no unit starts once the deadline has passed (a deadline already passed when the run is
  ready stops it before its first unit: the policy is loaded and ``config.json`` written,
  nothing else is done);
- while time is left, the first unit of an invocation always starts, and so does a unit of a
  kind never timed when nothing has been timed yet: an estimate that a unit would not fit in
  any one invocation must not stop the run for ever. (Cut by something harder than the
  deadline, a unit is redone on resume, as after any kill.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

EX_TEMPFAIL = 75  # the exit status of a stop for the deadline (sysexits.h: try again later)
MARGIN = 1.25  # a unit is expected to take its estimate and a quarter more


class DeadlineStop(Exception):
    """The invocation stopped for its deadline before ``what``; the run resumes from there."""

    def __init__(self, what: str, left: float, needed: float | None) -> None:
        super().__init__(what)
        self.what = what
        self.left = left  # seconds to the deadline when it stopped (negative: past it)
        self.needed = needed  # the unit's estimate with the margin (None: not timed yet)
        self.run_dir: Path | None = None  # set by ``train``

    def __str__(self) -> str:
        if self.left <= 0 or self.needed is None:
            why = f"the deadline passed {_seconds(max(0.0, -self.left))} s ago"
        else:
            why = f"{_seconds(self.left)} s left, about {_seconds(self.needed)} s needed"
        text = f"stopped for the deadline before {self.what} ({why}); nothing is lost"
        if self.run_dir is not None:
            text += f": continue with cuda-agent train --resume {self.run_dir}"
        return text


def _seconds(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


@dataclass
class Deadline:
    """Stop by ``at`` (seconds since the epoch, read on ``clock``)."""

    at: float
    clock: Callable[[], float] = time.time
    longest: dict[str, float] = field(default_factory=dict)  # kind -> seconds, this process
    units: int = 0  # units this process finished

    def left(self) -> float:
        return self.at - self.clock()

    def needed(self, kind: str, recorded: float | None = None) -> float | None:
        """The seconds a unit of ``kind`` is expected to take, with the margin: its kind's
        longest here, else an earlier invocation's (``recorded``), else the longest unit of
        any kind here (None: nothing timed yet)."""
        seconds = self.longest.get(kind, recorded)
        if seconds is None and self.longest:
            seconds = max(self.longest.values())
        return None if seconds is None else MARGIN * seconds

    def check(self, kind: str, what: str, recorded: float | None = None) -> None:
        """Raise ``DeadlineStop`` when the unit ``what`` (of ``kind``) should not start."""
        left = self.left()
        needed = self.needed(kind, recorded)
        if left <= 0 or (self.units and needed is not None and needed > left):
            raise DeadlineStop(what, left, needed)

    def finished(self, kind: str, seconds: float) -> None:
        """A unit of ``kind`` took ``seconds``."""
        self.longest[kind] = max(seconds, self.longest.get(kind, 0.0))
        self.units += 1
