"""How a job ends early: a verdict, and the candidate's part of a traceback."""

from __future__ import annotations

import traceback
from typing import Any


class Verdict(Exception):
    """Ends a job early with a final status."""

    def __init__(self, status: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


def reference_failed(reason: object) -> Verdict:
    """The reference itself failed (e.g. on sizes drawn by a property check): no verdict on
    the candidate is possible, and the result says so."""
    return Verdict("runtime_error", str(reason), extra={"reference_failed": True})


def trim(exc: BaseException, limit: int = 1500) -> str:
    """The candidate's part of a traceback: frames in model_new.py, then the exception line."""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith("model_new.py")
    ]
    lines = [f"  model_new.py, line {f.lineno}, in {f.name}: {f.line}" for f in frames[-3:]]
    text = "\n".join([*lines, f"{type(exc).__name__}: {exc}"])
    return text if len(text) <= limit else text[: limit - 20] + "\n... (truncated)"
