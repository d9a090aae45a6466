"""The reference worker's job: compute the expected outputs and judge a candidate's.

The reference worker runs task code only, never candidate code, so expected outputs never live
in a process a candidate can inspect. For each trial the candidate worker writes its outputs to
an exchange file; the parent asks the reference worker to draw the same inputs (same task, sizes
and seed), run the reference, and compare.
"""

from __future__ import annotations

import contextlib
import json
import types
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from .._shared import compare as _compare
from .._shared import exchange as _exchange
from .._shared import task_runtime as _task_runtime
from .._shared.protocol import BaselineReport, BaselineRequest, CheckVerdict, Draw, ReferenceCheck
from .._shared.sections import Sections
from .._shared.timing import time_interleaved

_MODELS: OrderedDict[str, tuple[types.ModuleType, torch.nn.Module]] = OrderedDict()
_MAX_MODELS = 4


def _model(request: Draw, home: Path) -> tuple[types.ModuleType, torch.nn.Module]:
    """The task module and reference model for the request's task, sizes and device (cached)."""
    key = json.dumps(
        [request.task_digest, request.sizes, request.device, request.model_seed],
        sort_keys=True,
    )
    if key in _MODELS:
        _MODELS.move_to_end(key)
        return _MODELS[key]
    if request.device.startswith("cuda"):  # a new task's weights: the others' go first
        for other in [k for k in _MODELS if json.loads(k)[0] != request.task_digest]:
            del _MODELS[other]
    task = _task_runtime.load_task(request.task, home / f"reference_{len(_MODELS)}.py")
    _task_runtime.override_sizes(task, request.sizes)
    model, _ = _task_runtime.build_reference(task, torch.device(request.device), request.model_seed)
    _MODELS[key] = (task, model)
    while len(_MODELS) > _MAX_MODELS:
        _MODELS.popitem(last=False)
    return task, model


_EXPECTED: _task_runtime.BoundedCache | None = None


@contextlib.contextmanager
def _full_float32() -> Iterator[None]:
    """TF32 off for the expected outputs: cuDNN convolutions run in TF32 by default, which
    would put errors of order 1e-2 into the reference itself. (Eager timing keeps torch's
    defaults: that is the speed a user gets.)"""
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    saved = cudnn.allow_tf32, matmul.allow_tf32
    cudnn.allow_tf32 = matmul.allow_tf32 = False
    try:
        yield
    finally:
        cudnn.allow_tf32, matmul.allow_tf32 = saved


def _expected(request: Draw, home: Path) -> tuple[list[Any], list[torch.Tensor]]:
    """(input fingerprint, expected outputs) of one trial, computed once per worker and kept:
    every candidate for a task is checked on the same seeds. On a GPU, a new task's outputs
    replace the previous task's, and an out-of-memory error is retried once with every cache
    freed. Raises ``TaskFailure``."""
    try:
        return _expected_once(request, home)
    except _task_runtime.TaskFailure as exc:
        if not request.device.startswith("cuda") or not _task_runtime.is_out_of_memory(exc):
            raise
    release_caches()
    return _expected_once(request, home)


def release_caches() -> None:
    """Drop the cached expected outputs and models, and return the allocator's reserve."""
    if _EXPECTED is not None:
        _EXPECTED.clear()
    _MODELS.clear()
    _task_runtime.release_gpu_memory()


def _expected_once(request: Draw, home: Path) -> tuple[list[Any], list[torch.Tensor]]:
    global _EXPECTED
    device = torch.device(request.device)
    if _EXPECTED is None:
        _EXPECTED = _task_runtime.BoundedCache(_task_runtime.cache_budget(device))
    key = _EXPECTED.key(
        request.task_digest,
        request.sizes,
        request.seed,
        request.distribution,
        request.device,
        request.model_seed,
    )
    found = _EXPECTED.get(key)
    if found is not None:
        return found
    inputs, want = _forward(request, home)
    entry = (_compare.fingerprint(inputs), [w.detach() for w in want])
    _EXPECTED.put(key, entry, group=request.task_digest)
    return entry


def forward_reseeded(request: Draw, home: Path, generator_seed: int) -> list[torch.Tensor]:
    """The reference's outputs on the inputs of ``request.seed``, with torch's generator
    reseeded to ``generator_seed`` between drawing the inputs and the forward (so a forward
    that draws random numbers gives other ones), the model built afresh; never cached.
    Raises ``TaskFailure``."""
    release_caches()
    _, want = _forward(request, home, generator_seed)
    return [w.detach() for w in want]


def inputs_of(request: Draw, home: Path) -> list[Any]:
    """The inputs of ``request`` (drawn again, as the candidate worker draws them). Raises
    ``TaskFailure``."""
    task, _ = _model(request, home)
    _task_runtime.override_sizes(task, request.sizes)
    device = torch.device(request.device)
    return _task_runtime.draw_inputs(task, device, request.seed, request.distribution)


def _forward(
    request: Draw, home: Path, generator_seed: int | None = None
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    device = torch.device(request.device)
    task, model = _model(request, home)
    # Module-level sizes are read by get_inputs: set them for this entry again.
    _task_runtime.override_sizes(task, request.sizes)
    inputs = _task_runtime.draw_inputs(task, device, request.seed, request.distribution)
    if generator_seed is not None:
        torch.manual_seed(generator_seed)
    try:
        with torch.no_grad(), _full_float32():
            want = _task_runtime.as_tensors(model(*inputs))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception as exc:
        raise _task_runtime.TaskFailure(
            f"the reference forward failed: {type(exc).__name__}: {exc}"
        ) from None
    if want is None:
        raise _task_runtime.TaskFailure(
            "the reference forward returned neither a tensor nor a tuple"
        )
    return inputs, want


def expected(request: Draw, home: Path, sections: Sections | None = None) -> dict[str, Any]:
    """The reference's expected outputs of ``request``, computed and kept, nothing judged:
    ``{"ok": True}``, or ``reference_failed`` (a message) when the task failed. (Run in a
    correctness section of its own: ``sections``.)"""
    with (sections or Sections()).correctness("expected"):
        try:
            _expected(request, home)
        except _task_runtime.TaskFailure as exc:
            return {"reference_failed": str(exc)}
    return {"ok": True}


def check(request: ReferenceCheck, home: Path, sections: Sections | None = None) -> dict[str, Any]:
    """Judge one trial. Returns ``passed``, the worst errors and a message; or
    ``reference_failed`` (a message) when the task itself failed, so no verdict is possible.
    (It runs inside the section of the candidate worker that asked: ``sections`` traces it.)"""
    with (sections or Sections()).correctness("verdict"):
        return _check(request, home)


def _check(request: ReferenceCheck, home: Path) -> dict[str, Any]:
    device = torch.device(request.device)
    held = 0
    if device.type == "cuda":
        held = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    try:
        prints, want = _expected(request, home)
    except _task_runtime.TaskFailure as exc:
        return CheckVerdict(reference_failed=str(exc)).to_json()
    if not _compare.same_fingerprint(prints, request.inputs or []):
        return CheckVerdict(
            reference_failed="the task's get_inputs() drew different inputs in the reference "
            "worker than in the candidate worker from the same seed; it must draw only from "
            "torch's global generator"
        ).to_json()
    try:
        got = _exchange.read_outputs(request.exchange, request.outputs, device)
    except _exchange.ExchangeError as exc:
        return CheckVerdict(False, _compare.INF, _compare.INF, str(exc)).to_json()
    passed, max_abs, max_rel, message = _compare.compare(
        got, want, request.atol, request.rtol, request.dtype_tolerances, request.output_tolerances
    )
    del got, want  # (kept only if the cache holds them)
    peak = 0
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)  # what this check needed (the pool's
        _task_runtime.trim_reserve(device)  # admission by memory, _parent/lanes.py)
    return CheckVerdict(
        passed, max_abs, max_rel, message, peak_gpu_bytes=peak, held_gpu_bytes=held
    ).to_json()


def baseline(
    request: BaselineRequest, home: Path, sections: Sections | None = None
) -> dict[str, Any]:
    """Time the eager reference and ``torch.compile`` of it, interleaved, on one input draw.

    Runs in the trusted reference worker, so a cached baseline cannot be forged by a candidate.
    The compilation (seconds, mostly on the CPU) and a first call of each are a correctness
    section; only the timing holds the device alone. Returns median times and spreads in ms,
    or ``error``.
    """
    device = torch.device(request.device)
    sections = sections or Sections()
    held = 0  # what the worker held before (inputs it keeps for other tasks' checks)
    if device.type == "cuda":
        held = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    try:
        with sections.correctness("baseline"):
            task, model = _model(request, home)
            _task_runtime.override_sizes(task, request.sizes)
            inputs = _task_runtime.draw_inputs(task, device, request.seed, request.distribution)
            compiled = torch.compile(model)

            def eager_call() -> object:
                with torch.no_grad():
                    return model(*inputs)

            def compile_call() -> object:
                with torch.no_grad():
                    return compiled(*inputs)

            compile_call()  # compiles
            eager_call()
        with sections.timing():
            eager, comp = time_interleaved(
                [eager_call, compile_call],
                device=device,
                warmup=request.warmup,
                repeats=request.repeats,
                budget_s=request.timing_budget_s,
                precision=request.timing_precision,
            )
        peak = total = 0
        if device.type == "cuda":  # what the measurement needed: the pool's admission by memory
            peak = max(0, torch.cuda.max_memory_allocated(device) - held)
            total = torch.cuda.get_device_properties(device).total_memory
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        if device.type == "cuda":
            with sections.correctness("cleanup"):
                _task_runtime.release_gpu_memory()
    return BaselineReport(
        eager.median_ms,
        eager.spread_ms,
        comp.median_ms,
        comp.spread_ms,
        peak_gpu_bytes=peak,
        gpu_total_bytes=total,
    ).to_json()
