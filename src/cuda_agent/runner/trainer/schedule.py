"""Learning-rate schedules of the supervised stages, as pure functions of the step.

A function of the step index alone, so a run resumed at any step sets the same rate as an
unbroken one (nothing about the schedule is saved).
"""

from __future__ import annotations

import math
from typing import Literal

Schedule = Literal["constant", "cosine"]


def scheduled_lr(kind: Schedule, peak: float, step: int, steps: int, floor: float) -> float:
    """The rate of step ``step`` (0-based) of ``steps``.

    - ``constant``: ``peak``;
    - ``cosine``: ``peak * (floor + (1 - floor) * (1 + cos(pi * step / (steps - 1))) / 2)``:
      ``peak`` at the first step, ``peak * floor`` at the last (one step: ``peak``).
    """
    if kind == "constant" or steps <= 1:
        return peak
    if kind != "cosine":
        raise ValueError(f"unknown schedule {kind!r}: constant or cosine")
    done = min(max(step, 0), steps - 1) / (steps - 1)
    return peak * (floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * done)))
