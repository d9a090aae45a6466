"""A deadline for one invocation of ``cuda-agent train``: a run longer than one allowed stretch
of time (a device call of at most ten minutes) is done in several back-to-back invocations,
each stopping cleanly before its deadline and the next one resuming (``--resume``).

The run is cut only between units of work: a step of any training stage, an evaluation, the
baselines, the collection of the rejection fine-tuning's episodes. Before a unit starts,
``Deadline.check`` decides whether it is expected to finish in the time left; when it is not,
``DeadlineStop`` is raised, the last committed step being the run's state on disk.

The estimate of a unit is the longest unit of its kind (a stage's name, ``evaluation
<set>``, ``collection``, ``baselines``) this process finished, else the longest one an
earlier invocation of the run recorded (``RunState.unit_seconds``), else what the caller
estimated for the kind (``Deadline.prior``: ``cuda-agent train --unit-estimates``, say
another run's ``state.json``), times ``MARGIN``. A kind with none of these is taken to need
half of the invocation (from the ``Deadline``'s creation to its moment): it starts while at
least that much is left, or as an invocation's first unit. (Guessing it from other kinds
failed twice on the H200: the first rft collection, estimated from a 128 s evaluation, started
with 60 s left and took 72 s; the first evaluation of a warm-start-only run, estimated from a
15 s baselines unit, started with about 220 s left, needed more, and the call's end killed it,
losing the call.) Two rules keep every invocation useful and none late:

- no unit starts once the deadline has passed (a deadline already passed when the run is
  ready stops it before its first unit: the policy is loaded and ``config.json`` written,
  nothing else is done);
- while time is left, the first unit of an invocation always starts: an estimate that a unit
  would not fit in any one invocation must not stop the run for ever. (Cut by something
  harder than the deadline, a unit is redone on resume, as after any kill.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
        if self.left <= 0:
            why = f"the deadline passed {_seconds(max(0.0, -self.left))} s ago"
        elif self.needed is None:
            why = (
                f"{_seconds(self.left)} s left; its kind was never timed and is taken to need "
                "half an invocation (--unit-estimates gives estimates)"
            )
        else:
            why = f"{_seconds(self.left)} s left, about {_seconds(self.needed)} s needed"
        text = f"stopped for the deadline before {self.what} ({why}); nothing is lost"
        if self.run_dir is not None:
            text += f": continue with cuda-agent train --resume {self.run_dir}"
        return text


def read_unit_estimates(path: str | Path) -> dict[str, float]:
    """The estimates (kind -> seconds) in ``path``: a run directory or its ``state.json``
    (their ``unit_seconds``: what that run's units took), or a JSON object of kind to seconds.
    Raises ValueError, saying what is wrong."""
    path = Path(path)
    file = path / "state.json" if path.is_dir() else path
    try:
        data: Any = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read unit estimates from {file}: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("unit_seconds"), dict):
        data = data["unit_seconds"]
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
        for k, v in data.items()
    ):
        raise ValueError(
            f"{file}: expected a run's state.json or a JSON object of unit kind to seconds "
            '(e.g. {"evaluation heldout": 250, "rl": 98})'
        )
    return {k: float(v) for k, v in data.items()}


def _seconds(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


@dataclass
class Deadline:
    """Stop by ``at`` (seconds since the epoch, read on ``clock``)."""

    at: float
    clock: Callable[[], float] = time.time
    longest: dict[str, float] = field(default_factory=dict)  # kind -> seconds, this process
    units: int = 0  # units this process finished
    prior: dict[str, float] = field(default_factory=dict)  # kind -> seconds, the caller's
    started: float | None = None  # the invocation's start on ``clock`` (None: at creation)

    def __post_init__(self) -> None:
        if self.started is None:
            self.started = self.clock()

    def left(self) -> float:
        return self.at - self.clock()

    def needed(self, kind: str, recorded: float | None = None) -> float | None:
        """The seconds a unit of ``kind`` is expected to take, with the margin: its kind's
        longest here, else an earlier invocation's (``recorded``), else the caller's estimate
        (``prior``); None when the kind was never timed."""
        seconds = self.longest.get(kind, recorded)
        if seconds is None:
            seconds = self.prior.get(kind)
        return None if seconds is None else MARGIN * seconds

    def check(self, kind: str, what: str, recorded: float | None = None) -> None:
        """Raise ``DeadlineStop`` when the unit ``what`` (of ``kind``) should not start: past
        the deadline; or, after this invocation's first unit, when its estimate is longer
        than the time left (a kind never timed: half the invocation)."""
        left = self.left()
        needed = self.needed(kind, recorded)
        assert self.started is not None
        estimate = (self.at - self.started) / 2 if needed is None else needed
        if left <= 0 or (self.units and estimate > left):
            raise DeadlineStop(what, left, needed)

    def finished(self, kind: str, seconds: float) -> None:
        """A unit of ``kind`` took ``seconds``."""
        self.longest[kind] = max(seconds, self.longest.get(kind, 0.0))
        self.units += 1
