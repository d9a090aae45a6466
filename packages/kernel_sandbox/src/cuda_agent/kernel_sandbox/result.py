"""``EvalResult``: the immutable, JSON-serialisable verdict on one candidate."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

# ``unjudged``: no verdict on the candidate is possible because the trusted reference failed
# (its inputs or forward raised, e.g. out of GPU memory, or its worker died) and failed alone
# too, without the candidate's process beside it (``Sandbox.evaluate``): not the candidate's
# fault, and not its success. A trainer leaves such an answer out of its update.
Status = Literal[
    "ok", "compile_error", "runtime_error", "timeout", "incorrect", "rejected", "unjudged"
]
STATUSES: tuple[Status, ...] = (
    "ok",
    "compile_error",
    "runtime_error",
    "timeout",
    "incorrect",
    "rejected",
    "unjudged",
)


@dataclass(frozen=True)
class TrialOutcome:
    """One correctness trial: the input seed, whether it passed, and the worst errors seen."""

    seed: int
    passed: bool
    max_abs_error: float
    max_rel_error: float
    message: str = ""


@dataclass(frozen=True)
class EvalResult:
    """What the sandbox concluded about a candidate.

    Times are medians in milliseconds, spreads are half the interquartile range (a robust
    noise estimate); ``None`` means not measured. ``flags`` lists anti-cheat findings: a
    candidate with any flag must not be rewarded as fast or correct.
    """

    status: Status
    message: str = ""
    task: str = ""
    backend: str = ""
    trials: tuple[TrialOutcome, ...] = ()
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    candidate_time_ms: float | None = None
    candidate_time_spread_ms: float | None = None
    eager_time_ms: float | None = None
    eager_time_spread_ms: float | None = None
    compile_time_ms: float | None = None
    compile_time_spread_ms: float | None = None
    flags: tuple[str, ...] = ()
    build_seconds: float | None = None
    wall_seconds: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        """True when the candidate passed every check (status ``ok``) and carries no flag."""
        return self.status == "ok" and not self.flags

    @property
    def speedup_vs_eager(self) -> float | None:
        """Eager time over candidate time (> 1 means the candidate is faster)."""
        return _ratio(self.eager_time_ms, self.candidate_time_ms)

    @property
    def speedup_vs_compile(self) -> float | None:
        """``torch.compile`` time over candidate time (> 1 means the candidate is faster)."""
        return _ratio(self.compile_time_ms, self.candidate_time_ms)

    @property
    def speedup_vs_eager_range(self) -> tuple[float, float] | None:
        """Speedup vs eager with both times moved by their spreads: (pessimistic, optimistic).

        ``(t0 - s0) / (t + s)`` to ``(t0 + s0) / (t - s)``; a range containing 1 means the two
        are not distinguishable at the measured noise.
        """
        return _ratio_range(
            self.eager_time_ms,
            self.eager_time_spread_ms,
            self.candidate_time_ms,
            self.candidate_time_spread_ms,
        )

    @property
    def speedup_vs_compile_range(self) -> tuple[float, float] | None:
        """Like ``speedup_vs_eager_range``, against ``torch.compile``."""
        return _ratio_range(
            self.compile_time_ms,
            self.compile_time_spread_ms,
            self.candidate_time_ms,
            self.candidate_time_spread_ms,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready), including the derived speedups."""
        data = asdict(self)
        data["speedup_vs_eager"] = self.speedup_vs_eager
        data["speedup_vs_compile"] = self.speedup_vs_compile
        data["speedup_vs_eager_range"] = self.speedup_vs_eager_range
        data["speedup_vs_compile_range"] = self.speedup_vs_compile_range
        data["correct"] = self.correct
        return data

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        """Inverse of ``to_dict`` (derived keys and unknown keys are ignored)."""
        names = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        if kwargs.get("status") not in STATUSES:
            raise ValueError(f"unknown status {kwargs.get('status')!r}")
        kwargs["trials"] = tuple(TrialOutcome(**t) for t in kwargs.get("trials", ()))
        kwargs["flags"] = tuple(kwargs.get("flags", ()))
        return cls(**kwargs)


def _ratio(baseline: float | None, candidate: float | None) -> float | None:
    if baseline is None or candidate is None or candidate <= 0 or not math.isfinite(candidate):
        return None
    return baseline / candidate


def _ratio_range(
    baseline: float | None,
    baseline_spread: float | None,
    candidate: float | None,
    candidate_spread: float | None,
) -> tuple[float, float] | None:
    if _ratio(baseline, candidate) is None:
        return None
    assert baseline is not None and candidate is not None
    sb, sc = baseline_spread or 0.0, candidate_spread or 0.0
    low = max(baseline - sb, 0.0) / (candidate + sc)
    high = (baseline + sb) / (candidate - sc) if candidate > sc else math.inf
    return (low, high)


def with_extra(result: EvalResult, **extra: object) -> EvalResult:
    """``result`` with ``extra`` merged into its ``extra`` mapping."""
    data = asdict(result)
    data["extra"] = {**(data.get("extra") or {}), **extra}
    return EvalResult.from_dict(data)


def with_wall_time(result: EvalResult, seconds: float) -> EvalResult:
    """``result`` with its ``wall_seconds``."""
    data = asdict(result)
    data["wall_seconds"] = seconds
    return EvalResult.from_dict(data)


def out_of_memory(result: EvalResult) -> bool:
    """A verdict that may be the neighbours' doing: the job ran out of (GPU) memory."""
    return result.status in ("runtime_error", "unjudged") and says_out_of_memory(result.message)


def alone_rerun(result: EvalResult) -> tuple[str, str]:
    """Whether a job judged beside other lanes runs again with its device alone: (why it does,
    or ""; why it does not though it ran out of memory, or "").

    It does when it ran out of (GPU) memory (``out_of_memory``): the other lanes' jobs hold
    memory too (seen on the H200: 8 lanes of 4 GiB-input tasks filled its 139 GiB). So also
    when it was judged, but its task's trivial-answer rule could not be decided for want of
    memory (``rule_out_of_memory``; on the H100, 2026-12-06, 12 of KernelBench's 23 L1
    problems were judged so, unchecked): the rerun decides the rule alone (``TrivialCache``
    keeps no such failure). It does not when its one request was larger than the whole device
    (``beyond_the_device``): alone it fails the same, and the rerun would hold every other lane
    back until the device drained (on the H100 soak, 2026-12-06, a 10 TB request waited a
    median 8.1 s for it, 17 jobs, and then failed alone in 0.4 s)."""
    if out_of_memory(result):
        hopeless = beyond_the_device(result.message, result.extra.get("gpu_total_bytes"))
        if hopeless:
            return "", hopeless
        return f"out of memory beside other lanes: {first_line(result.message)}", ""
    if rule_out_of_memory(result):
        reason = first_line(str(result.extra.get("trivial_answer_reason", "")))
        return f"out of memory beside other lanes: its task's trivial-answer rule: {reason}", ""
    return "", ""


def rule_out_of_memory(result: EvalResult) -> bool:
    """A verdict judged without its task's trivial-answer rule, which the reference worker could
    not decide for want of (GPU) memory: the neighbours' doing, maybe, as ``out_of_memory``."""
    reason = result.extra.get("trivial_answer_reason")
    return (
        result.extra.get("trivial_answer_rule") == "unchecked"
        and isinstance(reason, str)
        and says_out_of_memory(reason)
    )


def first_line(message: str, limit: int = 300) -> str:
    """A message's first non-blank line, at most ``limit`` characters ("" for a blank one)."""
    lines = message.strip().splitlines()
    return lines[0][:limit] if lines else ""


_SIZE = r"(\d+(?:\.\d+)?) ?(B|KiB|MiB|GiB|TiB|PiB)\b"
_UNIT = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50}


def _size(match: re.Match[str]) -> int:
    return int(float(match.group(1)) * _UNIT[match.group(2)])


def beyond_the_device(message: str, device_bytes: object = None) -> str:
    """Why running again with the device alone cannot help a job that ran out of memory: torch's
    message says it asked for one block larger than the whole device ("Tried to allocate 10.00
    TiB. GPU 0 has a total capacity of 79.18 GiB", or ``device_bytes``, the verdict's
    ``gpu_total_bytes``). "" when the message says no such thing: it may be the neighbours'."""
    tried = re.search(r"Tried to allocate " + _SIZE, message)
    if tried is None:
        return ""
    total = re.search(r"total capacity of " + _SIZE, message)
    device = _size(total) if total else device_bytes if isinstance(device_bytes, int) else 0
    if not device or _size(tried) <= device:
        return ""
    return (
        f"not run again alone: it asked for {tried.group(1)} {tried.group(2)} at once, more "
        f"than the device's {device / (1 << 30):.1f} GiB"
    )


def says_out_of_memory(message: str) -> bool:
    """Whether an error message is a device running out of memory."""
    text = message.lower()
    return "out of memory" in text or "do not fit in gpu memory" in text
