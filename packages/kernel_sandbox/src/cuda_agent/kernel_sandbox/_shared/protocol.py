"""The messages between the parent and its workers, typed, and the one decision of which checks
a job needs.

Every message still travels as one JSON line (``_pool.Worker``). Each class here is one kind of
message, with ``to_json`` (what is sent) and ``from_json`` (what is read back):

- to a **candidate worker**: ``Job`` (one evaluation: the task, the candidate, the parent's plan
  of ``Check`` steps and the ``JobConfig``) and ``PrepareRequest`` (a compile worker builds a
  candidate's extensions);
- to a **reference worker**: ``ReferenceCheck`` (judge one check's outputs), ``BaselineRequest``
  (time eager and ``torch.compile``), ``TrivialAnswersRequest`` (``validate_task``) and
  ``DeviceBufferRequest``; ``Draw`` is what they share: which reference model and inputs;
- back to the parent: ``CheckRequest`` (a candidate worker asks for a check's verdict),
  ``CheckVerdict`` (the reference worker's answer), ``BaselineReport``, ``PrepareReport``.

A job's messages from the parent are trusted: ``from_json`` of them raises ``KeyError`` on a
missing field (a harness bug, never a silent default). A candidate worker runs hostile code, so
what comes from it (``CheckRequest``) and what is relayed from it is read with ``parse``, which
returns ``None`` for anything malformed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, Literal, Self

Stage = Literal["trial", "inplace", "config", "reverify", "after"]
STAGES: tuple[Stage, ...] = ("trial", "inplace", "config", "reverify", "after")


def speedup(eager_ms: Any, candidate_ms: Any) -> float:
    """The measured speedup over eager: ``eager_ms / candidate_ms``; ``inf`` for a candidate
    timed at 0 ms (nothing is that fast: it must be re-verified), 0 when either time is missing
    (not timed: nothing to re-verify)."""
    if not isinstance(eager_ms, int | float) or not isinstance(candidate_ms, int | float):
        return 0.0
    if candidate_ms <= 0:
        return math.inf
    return float(eager_ms) / float(candidate_ms)


def needs_reverify(eager_ms: Any, candidate_ms: Any, bound: float) -> bool:
    """Whether a timed candidate must pass the ``reverify`` checks: its speedup over eager is
    above ``bound`` (``SandboxConfig.reverify_speedup``). The candidate worker runs them and the
    parent requires them by this same rule."""
    return speedup(eager_ms, candidate_ms) > bound


def required_checks(checks: Sequence[Check], report: dict[str, Any], bound: float) -> list[int]:
    """Indices of the checks a successful candidate must have passed, by the candidate worker's
    ``report``: every one, but the ``reverify`` ones only when its measured speedup is above
    ``bound`` (``needs_reverify``)."""
    fast = needs_reverify(report.get("eager_time_ms"), report.get("candidate_time_ms"), bound)
    return [i for i, c in enumerate(checks) if c.stage != "reverify" or fast]


class _Request:
    """A request the parent sends a worker: its fields as JSON, with the ``kind`` that routes it
    (``_worker.main``); read back strictly (a missing field is a ``KeyError``)."""

    kind: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}  # type: ignore[call-overload]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return cls(**{f.name: data[f.name] for f in fields(cls)})  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------- the job
@dataclass(frozen=True)
class Check:
    """One check of the parent's plan (``_parent.plan.plan_checks``): inputs drawn from ``seed`` at
    ``sizes``, from ``distribution`` (None: the job's), judged by the reference worker;
    ``label`` starts the message of a failure."""

    stage: Stage
    seed: int
    sizes: dict[str, int]
    distribution: str | None = None
    label: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Check:
        return cls(**data)


@dataclass(frozen=True)
class JobConfig:
    """What a worker needs of the ``SandboxConfig`` for one job, and of the task."""

    backend: str
    device: str  # "cuda:0" (a worker sees its one GPU as device 0) or "cpu"
    trials: int
    atol: float
    rtol: float
    dtype_tolerances: dict[str, list[float]]
    seed: int
    warmup: int
    repeats: int
    timing_budget_s: float
    timing_precision: float
    time_compile: bool
    require_custom_kernel: bool
    runtime_checks: bool
    allowed_torch_ops: tuple[str, ...]
    reverify_speedup: float
    device_exchange: bool
    max_output_tensor_bytes: int
    task_digest: str
    distribution: str
    measure_time: bool
    # the torch.compile baseline (BaselineReport's fields) the reference worker timed; None
    # when not timed
    compile_baseline: dict[str, Any] | None = None
    # the job runs with the device to itself (a rerun after running out of memory beside other
    # lanes): the candidate worker lifts its share of the GPU's memory for it
    device_alone: bool = False
    # the share of the GPU's memory the candidate worker may allocate for this job: the room
    # the pool admitted it into (_parent/lanes.py, LanePool.room_share); 0: the worker's own
    # share (a quarter beside seven other lanes). Never lowers that share.
    memory_share: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "allowed_torch_ops": list(self.allowed_torch_ops)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobConfig:
        return cls(**{**data, "allowed_torch_ops": tuple(data["allowed_torch_ops"])})


@dataclass(frozen=True)
class Job:
    """One evaluation, for a candidate worker."""

    task: str  # the task module's source
    task_name: str
    candidate: str | dict[str, str]  # a module's source, or a work directory's files
    sizes: dict[str, int]
    checks: tuple[Check, ...]
    config: JobConfig
    exchange: int = -1  # the slot's exchange descriptor (set when a slot takes the job)

    kind = "evaluate"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "task": self.task,
            "task_name": self.task_name,
            "candidate": self.candidate,
            "sizes": self.sizes,
            "checks": [c.to_json() for c in self.checks],
            "config": self.config.to_json(),
            "exchange": self.exchange,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        return cls(
            task=data["task"],
            task_name=data["task_name"],
            candidate=data["candidate"],
            sizes=data["sizes"],
            checks=tuple(Check.from_json(c) for c in data["checks"]),
            config=JobConfig.from_json(data["config"]),
            exchange=data["exchange"],
        )

    def required_checks(self, report: dict[str, Any]) -> list[int]:
        """``required_checks`` of this job's plan."""
        return required_checks(self.checks, report, self.config.reverify_speedup)

    def draw(self, check: Check) -> Draw:
        """The reference model and inputs of ``check``."""
        return Draw(
            task=self.task,
            task_digest=self.config.task_digest,
            sizes=check.sizes,
            seed=check.seed,
            model_seed=self.config.seed,
            device=self.config.device,
            distribution=check.distribution or self.config.distribution,
        )


@dataclass(frozen=True)
class PrepareRequest(_Request):
    """For a compile worker (no GPU): import the candidate only to build its extensions."""

    candidate: str | dict[str, str]
    kind = "prepare"


# ------------------------------------------------------------------- reference worker jobs
@dataclass(frozen=True)
class Draw:
    """Which reference model (task, sizes, ``model_seed``, device) and which inputs (``seed``,
    ``distribution``): the reference worker's expected outputs are cached by these."""

    task: str
    task_digest: str
    sizes: dict[str, int]
    seed: int
    model_seed: int
    device: str
    distribution: str


@dataclass(frozen=True)
class ReferenceCheck(Draw, _Request):
    """Judge one check: the candidate's ``outputs`` (their layout in the slot's ``exchange``)
    against the reference's on the same inputs (``inputs``: the candidate worker's fingerprint
    of them)."""

    atol: float
    rtol: float
    dtype_tolerances: dict[str, list[float]]
    outputs: Any
    inputs: Any
    exchange: int
    # per output, an (atol, rtol) over the others: the trivial-answer rule's (``_parent.trivial``)
    output_tolerances: list[list[float] | None] | None = None
    kind = "reference"


@dataclass(frozen=True)
class ExpectedRequest(Draw, _Request):
    """Compute (and cache) the reference's expected outputs of one draw, judging nothing: the
    parent's probe of whether the reference runs without the candidate's process beside it."""

    kind = "expected"


@dataclass(frozen=True)
class BaselineRequest(Draw, _Request):
    """Time the eager reference and ``torch.compile`` of it, interleaved, on one draw."""

    warmup: int
    repeats: int
    timing_budget_s: float
    timing_precision: float
    kind = "baseline"


@dataclass(frozen=True)
class TrivialAnswersRequest(_Request):
    """``validate_task``'s job: which answers that compute nothing would pass the task's checks
    over the draws of ``seeds`` (``_reference.trivial_answers``); ``repeat``: also run the task twice on
    the same inputs."""

    task: str
    task_digest: str
    sizes: dict[str, int]
    model_seed: int
    device: str
    seeds: tuple[int, ...]
    atol: float
    rtol: float
    dtype_tolerances: dict[str, list[float]]
    repeat: bool = True
    kind = "validate"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return replace(super().from_json(data), seeds=tuple(data["seeds"]))

    def draw(self, seed: int) -> Draw:
        return Draw(
            task=self.task,
            task_digest=self.task_digest,
            sizes=self.sizes,
            seed=seed,
            model_seed=self.model_seed,
            device=self.device,
            distribution="normal",
        )


@dataclass(frozen=True)
class DeviceBufferRequest(_Request):
    """The slot's device buffer (``_shared.device_exchange``), at least ``bytes`` long, at most
    ``limit`` bytes."""

    bytes: Any  # as the candidate worker asked: checked by the reference worker
    limit: int
    kind = "device_buffer"


# ------------------------------------------------------------------------------- reports
@dataclass(frozen=True)
class CheckRequest:
    """A candidate worker's request for check ``index``'s verdict: its ``outputs`` (layout in
    the exchange) and ``inputs`` (fingerprint). From hostile code: read with ``parse``."""

    index: int
    outputs: Any = None
    inputs: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"type": "check", **asdict(self)}

    @classmethod
    def parse(cls, message: dict[str, Any]) -> CheckRequest | None:
        index = message.get("index")
        if type(index) is not int:
            return None
        return cls(index=index, outputs=message.get("outputs"), inputs=message.get("inputs"))


@dataclass(frozen=True)
class CheckVerdict:
    """The reference worker's verdict on one check; ``reference_failed`` (a message) when the
    task itself failed and no verdict was possible."""

    passed: bool = False
    max_abs_error: float = math.inf
    max_rel_error: float = math.inf
    message: str = ""
    reference_failed: str | None = None
    # the reference worker's peak of allocated GPU memory while it judged, and what it held
    # when the check began (its caches, and anything an earlier request left), 0: not on a GPU
    peak_gpu_bytes: int = 0
    held_gpu_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        if self.reference_failed is not None:
            return {"reference_failed": self.reference_failed}
        return {k: v for k, v in asdict(self).items() if k != "reference_failed"}

    @classmethod
    def parse(cls, data: Any) -> CheckVerdict:
        """A verdict from whatever came back: anything but a well-formed pass is a failure."""
        if not isinstance(data, dict):
            return cls(message="the reference worker sent an unreadable verdict")
        if "reference_failed" in data:
            return cls(reference_failed=str(data["reference_failed"]))
        return cls(
            passed=data.get("passed") is True,
            max_abs_error=_number(data.get("max_abs_error")),
            max_rel_error=_number(data.get("max_rel_error")),
            message=str(data.get("message", "")),
            peak_gpu_bytes=_bytes(data.get("peak_gpu_bytes")),
            held_gpu_bytes=_bytes(data.get("held_gpu_bytes")),
        )


@dataclass(frozen=True)
class BaselineReport:
    """A reference worker's eager and ``torch.compile`` times (ms); ``source``: "measured"
    now, or "cached". On a GPU also what the measurement needed there (``peak_gpu_bytes``:
    the task's inputs and the two outputs, above what the worker held before) and the device's
    memory (``gpu_total_bytes``): the pool admits a task's jobs by it before any has run
    (``_parent/lanes.py``); 0 where unknown (the CPU, a report kept before they were)."""

    eager_ms: float
    eager_spread_ms: float
    compile_ms: float
    compile_spread_ms: float
    source: str = "measured"
    peak_gpu_bytes: int = 0
    gpu_total_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, data: Any) -> BaselineReport | None:
        """The report in ``data``, or None unless every time is a finite number >= 0."""
        names = ("eager_ms", "eager_spread_ms", "compile_ms", "compile_spread_ms")
        if not isinstance(data, dict) or not all(
            isinstance(data.get(n), int | float) and math.isfinite(data[n]) and data[n] >= 0
            for n in names
        ):
            return None
        return cls(
            **{n: float(data[n]) for n in names},
            source=str(data.get("source", "measured")),
            peak_gpu_bytes=_bytes(data.get("peak_gpu_bytes")),
            gpu_total_bytes=_bytes(data.get("gpu_total_bytes")),
        )

    def cached(self) -> BaselineReport:
        return replace(self, source="cached")


@dataclass(frozen=True)
class PrepareReport:
    """A compile worker's answer: ``outcome`` "built", or what stopped the build."""

    outcome: str
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "seconds": self.seconds}

    @classmethod
    def parse(cls, data: Any) -> PrepareReport:
        if not isinstance(data, dict):
            return cls(outcome="unreadable")
        return cls(outcome=str(data.get("outcome")), seconds=_number(data.get("seconds"), 0.0))


def _bytes(value: Any) -> int:
    """A byte count from a message: a non-negative finite number, else 0."""
    number = _number(value, 0.0)
    return int(number) if 0 <= number < 2**62 else 0


def _number(value: Any, default: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return default
    return float(value)
