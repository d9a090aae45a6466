"""One evaluation job, as run inside a candidate worker process: load, verify, time.

Everything here may execute hostile candidate code; it runs only in candidate worker processes
(``_worker.py``). Candidate failures become result dictionaries, never exceptions. The expected
outputs are never computed here: each trial's outputs go to the reference worker through the
parent (``Ask``), which answers with the verdict.
"""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .. import launch
from .._shared import task_runtime as _task_runtime
from .._shared.protocol import Check, Job, JobConfig, PrepareReport, PrepareRequest
from .._shared.sections import Sections
from .._shared.task_runtime import TaskFailure
from .._shared.timing import time_interleaved
from ..candidates import kernel_sources
from ..errors import CompileError
from . import decoys as _decoys
from . import extension_hooks as _extension_hooks
from . import runtime_checks as _runtime_checks
from .trials import Ask, Trials
from .verdict import Verdict, reference_failed, trim

Phase = Callable[[str], None]


def run_job(
    job: Job, workdir: Path, enter_phase: Phase, ask: Ask, sections: Sections | None = None
) -> dict[str, Any]:
    """Evaluate ``job.candidate`` against ``job.task``; return EvalResult fields.

    ``job.checks`` is the parent's plan (``_parent.plan.plan_checks``): for each check a stage
    (``trial``, ``inplace``, ``config``, ``reverify`` or ``after`` timing), a seed and the
    sizes. Their verdicts are recorded by the parent, not here. Device work happens in
    ``sections`` of the device's timing gate: loading, each check and the profile read, the
    timing writes (``_shared.sections``).
    """
    sections = sections or Sections()
    cfg = job.config
    device = torch.device(cfg.device)
    result: dict[str, Any] = {}
    plan = job.checks
    seconds: dict[str, float] = {}  # where the job's time went (EvalResult.extra["seconds"])
    seconds_extra: dict[str, Any] = {}  # other extra findings of the job
    trial: Trials | None = None
    launch._seconds_by_name.clear()  # this job's kernels only
    _extension_hooks.reset_outcomes()
    if device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats(device)
    try:
        enter_phase("load")
        try:
            task = _task_runtime.load_task(job.task, workdir / "reference.py")
            _task_runtime.override_sizes(task, job.sizes)
        except TaskFailure as exc:
            raise reference_failed(exc) from None
        _extension_hooks.install()  # load_inline extensions: cached, counted
        threads_at_load = _runtime_checks.python_threads()
        t0 = time.perf_counter()
        with sections.correctness("load"):
            candidate = _load_candidate(job.candidate, workdir, cfg.backend)
            _extension_hooks.count_triton_launches()
            result["build_seconds"] = time.perf_counter() - t0
            reference, model_new = _build_models(task, candidate, device, cfg.seed)
        trial = Trials(task, model_new, device, cfg, job.exchange, ask, threads_at_load, sections)
        seconds["load"] = time.perf_counter() - t0

        enter_phase("correctness")
        launches_before = launch.launch_count()
        inputs: list[Any] = []  # the last trial's, on the task's own distribution: timed
        for index, step in enumerate(plan):
            if step.stage == "trial":
                drawn = trial.run(index, step)
                inputs = drawn if step.distribution is None else inputs
            elif step.stage == "inplace":
                trial.run(index, step, inplace=True)
        if cfg.require_custom_kernel and launch.launch_count() == launches_before:
            raise Verdict(
                "rejected",
                "no custom kernel was launched: ModelNew must compute with kernels built by "
                "cpu_kernel / cuda_kernel, not with PyTorch operators",
                flags=["no_custom_kernel"],
            )
        for index, step in enumerate(plan):
            if step.stage == "config":
                with sections.correctness("check"):
                    _check_config(task, candidate, trial, index, step)
        if cfg.runtime_checks and cfg.require_custom_kernel:
            t_profile = time.perf_counter()
            with sections.correctness("profile"):
                _judge_decoys(trial, model_new, inputs, cfg, seconds_extra)
            seconds["profile"] = time.perf_counter() - t_profile

        if cfg.measure_time:
            enter_phase("timing")
            t_timing = time.perf_counter()
            waited = sections.waited_s
            with sections.timing():
                t_timing += sections.waited_s - waited  # the time is the timing's, not the gate's
                result.update(_time(task, reference, model_new, inputs, device, cfg))
            seconds["timing"] = time.perf_counter() - t_timing
            # Re-check on fresh inputs: a candidate that behaves differently once it has been
            # called many times (detects warm-up, caches results) is caught here.
            enter_phase("correctness")
            required = set(job.required_checks(result))
            for index, step in enumerate(plan):
                if step.stage in ("after", "reverify") and index in required:
                    trial.run(index, step, after_timing=True)
        result["status"] = "ok"
        result["message"] = "correct"
    except Verdict as verdict:
        result["status"] = verdict.status
        result["message"] = verdict.message
        result.update(verdict.extra)
    seconds["gate_wait"] = sections.waited_s
    # extensions_built / extensions_cached: compiled by this job, or found built in the cache
    seconds_extra.update(_extension_hooks.outcomes())
    if trial is not None:
        seconds.update(trial.seconds)
        seconds_extra["outputs_via"] = trial.outputs_via
        seconds_extra["reserve_trims"] = trial.reserve_trims
    if device.type == "cuda" and torch.cuda.is_available():
        seconds_extra["peak_gpu_bytes"] = torch.cuda.max_memory_allocated(device)
        seconds_extra["gpu_total_bytes"] = torch.cuda.get_device_properties(device).total_memory
    extra = result.get("extra")
    result["extra"] = {
        **(extra if isinstance(extra, dict) else {}),
        **seconds_extra,
        "seconds": seconds,
    }
    return result


def prepare(request: PrepareRequest, workdir: Path) -> PrepareReport:
    """Import the candidate only to build its extensions into the shared cache (in a compile
    worker, with no GPU). Whatever fails here is left for the real job to report."""
    _extension_hooks.install()
    t0 = time.perf_counter()
    try:
        _load_candidate(request.candidate, workdir, "cuda")
        outcome = "built"
    except Verdict as verdict:
        outcome = verdict.status
    except BaseException as exc:
        outcome = type(exc).__name__
    return PrepareReport(outcome, time.perf_counter() - t0)


# ------------------------------------------------------------------------------------ loading
def _load_candidate(
    candidate: str | dict[str, str], workdir: Path, backend: str
) -> types.ModuleType:
    """Import the candidate: module source, or a work directory whose kernels are built first."""
    sys.modules.pop("cuda_extension", None)
    if isinstance(candidate, dict):
        source = _prepare_work_directory(candidate, workdir, backend)
    else:
        source = candidate
    sys.path.insert(0, str(workdir))  # model_new.py may import its own helper modules
    try:
        module = _task_runtime.load_module(source, workdir / "model_new.py", "model_new")
    except CompileError as exc:
        raise Verdict("compile_error", str(exc)) from None
    except SyntaxError as exc:
        raise Verdict(
            "compile_error", f"model_new.py:{exc.lineno}: SyntaxError: {exc.msg}"
        ) from None
    except Exception as exc:
        raise Verdict("runtime_error", "importing model_new.py failed:\n" + trim(exc)) from None
    finally:
        sys.path.remove(str(workdir))
    if not hasattr(module, "ModelNew"):
        raise Verdict("compile_error", "model_new.py does not define class ModelNew")
    return module


def _prepare_work_directory(files: dict[str, str], workdir: Path, backend: str) -> str:
    """Write a work directory's files and build its ``kernels/`` into ``cuda_extension``."""
    for name, text in files.items():
        path = workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    sources = kernel_sources(files)
    with_cuda = any(s.endswith(".cu") for s in sources)
    if with_cuda and backend != "cuda":
        raise Verdict(
            "compile_error",
            "kernels/*.cu files need the CUDA backend; on the CPU backend write the kernels "
            "as kernels/*.cpp",
        )
    if sources:
        try:
            _extension_hooks.build_work_directory(workdir, sources, with_cuda)
        except CompileError as exc:
            raise Verdict("compile_error", str(exc)) from None
        except Exception as exc:
            raise Verdict(
                "runtime_error", f"loading the built extension failed: {type(exc).__name__}: {exc}"
            ) from None
    return files["model_new.py"]


def _build_models(
    task: types.ModuleType, candidate: types.ModuleType, device: torch.device, seed: int
) -> tuple[torch.nn.Module, torch.nn.Module]:
    try:
        reference, init_inputs = _task_runtime.build_reference(task, device, seed)
    except TaskFailure as exc:
        raise reference_failed(exc) from None
    torch.manual_seed(seed)
    try:
        model_new = candidate.ModelNew(*init_inputs)
        if not isinstance(model_new, torch.nn.Module):
            raise Verdict("runtime_error", "ModelNew(...) did not return an nn.Module")
        model_new = model_new.to(device).eval()
        # Same weights as the reference (the reference system copies the state dict).
        ref_state = reference.state_dict()
        if set(ref_state) == set(model_new.state_dict()):
            model_new.load_state_dict(ref_state)
    except Verdict:
        raise
    except Exception as exc:
        raise Verdict("runtime_error", "constructing ModelNew failed:\n" + trim(exc)) from None
    return reference, model_new


# -------------------------------------------------------------------------------- correctness
def _check_config(task, candidate, trial: Trials, index: int, step: Check) -> None:
    """One trial on a declared extra size configuration, with the models rebuilt for it; the
    main sizes are restored afterwards (timing and the re-check use them)."""
    saved = {name: getattr(task, name) for name in step.sizes}
    try:
        _task_runtime.override_sizes(task, step.sizes)
        _, model_new = _build_models(task, candidate, trial.device, trial.cfg.seed)
        main_model, trial.model_new = trial.model_new, model_new
        try:
            trial.run(index, step)
        finally:
            trial.model_new = main_model
    except TaskFailure as exc:
        raise reference_failed(exc) from None
    finally:
        _task_runtime.override_sizes(task, saved)


def _judge_decoys(trial: Trials, model_new, inputs, cfg: JobConfig, extra: dict[str, Any]) -> None:
    """A kernel launched for show while the answer is computed elsewhere (``_candidate.decoys``): on a
    GPU, by kernels that are not its own; on either backend, on the host.

    The host-time verdict is given only in a timed evaluation: it guards a speed claim, at the
    task's own sizes. An untimed one (property checks at drawn sizes, often a few elements)
    reports the split without judging it: there an honest forward is nearly all interpreter
    overhead, which load inflates (an honest ``relu`` at 4 elements spent 0.31 ms outside its
    kernels on the loaded 2-core CI machine, and was rejected)."""
    own_device_s = 0.0  # the candidate's own kernels' device time: its launches' work
    if trial.device.type == "cuda":
        shares = _decoys.device_time_shares(
            lambda: model_new(*inputs), trial.device, launch.kernel_names()
        )
        extra["device_time_shares"] = shares
        allowed = bool(cfg.allowed_torch_ops)
        message = _decoys.device_verdict(shares, library_allowed=allowed)
        if message:
            raise Verdict("rejected", message, flags=["foreign_kernels"])
        if shares:
            own_device_s = shares["own"] * shares["device_us"] * 1e-6
    on_host = trial.device.type == "cpu"
    report, message = _decoys.host_verdict(trial.host_splits, on_host, own_device_s)
    if message and cfg.measure_time:
        # A second look before rejecting: load only adds CPU time, so more forwards' least
        # figures are nearer the candidate's own (an honest layernorm was rejected at 0.20 ms
        # against its 0.19 ms limit in a soak on the H100, its neighbours' hangs spinning).
        trial.more_host_splits(inputs, _decoys.SECOND_LOOK_FORWARDS)
        report, message = _decoys.host_verdict(trial.host_splits, on_host, own_device_s)
        report["second_look_forwards"] = _decoys.SECOND_LOOK_FORWARDS
    extra["host_time_split"] = report
    extra["kernel_seconds_by_name"] = launch.kernel_seconds_by_name()
    if message and cfg.measure_time:
        raise Verdict("rejected", message, flags=["compute_outside_kernels"])


# ----------------------------------------------------------------------------------- timing
def _time(task, reference, model_new, inputs, device, cfg: JobConfig) -> dict[str, Any]:
    """Candidate and eager, interleaved. The ``torch.compile`` baseline is never compiled here
    (a candidate must not be able to touch it): it was timed beside eager by the reference
    worker, and is carried over scaled by eager now over eager then."""

    def candidate_call() -> object:
        with torch.no_grad():
            return model_new(*inputs)

    def eager_call() -> object:
        with torch.no_grad():
            return reference(*inputs)

    fns: list[Callable[[], object]] = [candidate_call, eager_call]
    baseline = cfg.compile_baseline if cfg.time_compile else None
    try:
        timings = time_interleaved(
            fns,
            device=device,
            warmup=cfg.warmup,
            repeats=cfg.repeats,
            budget_s=cfg.timing_budget_s,
            precision=cfg.timing_precision,
        )
    except Exception as exc:
        raise Verdict("runtime_error", "failed while timing:\n" + trim(exc)) from None
    out: dict[str, Any] = {
        "candidate_time_ms": timings[0].median_ms,
        "candidate_time_spread_ms": timings[0].spread_ms,
        "eager_time_ms": timings[1].median_ms,
        "eager_time_spread_ms": timings[1].spread_ms,
    }
    if baseline:
        scale = timings[1].median_ms / baseline["eager_ms"] if baseline["eager_ms"] > 0 else 1.0
        out["compile_time_ms"] = baseline["compile_ms"] * scale
        out["compile_time_spread_ms"] = baseline["compile_spread_ms"] * scale
        out["extra"] = {"compile_baseline": baseline.get("source", "cached")}
    return out
