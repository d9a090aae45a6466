"""Learning-rate schedules as pure functions of the step.

A function of the step index alone, so a run resumed at any step sets the same rate as an
unbroken one (nothing about the schedule needs saving).
"""

from __future__ import annotations

import math
from typing import Literal

LrSchedule = Literal["constant", "cosine"]
"""The schedules :func:`scheduled_lr` knows."""

LR_SCHEDULES: tuple[LrSchedule, ...] = ("constant", "cosine")


def scheduled_lr(kind: LrSchedule, peak: float, step: int, steps: int, floor: float) -> float:
    """The learning rate of step ``step`` (0-based) of ``steps``.

    - ``constant``: ``peak``;
    - ``cosine``: ``peak * (floor + (1 - floor) * (1 + cos(pi * s / (steps - 1))) / 2)`` with
      ``s = clamp(step, 0, steps - 1)``: ``peak`` at the first step, ``peak * floor`` at the last
      and after it (one step: ``peak``).

    Raises ``ValueError`` for another ``kind``.
    """
    if kind not in LR_SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}: one of {', '.join(LR_SCHEDULES)}")
    if kind == "constant" or steps <= 1:
        return peak
    done = min(max(step, 0), steps - 1) / (steps - 1)
    return peak * (floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * done)))
