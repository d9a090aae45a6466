"""One evaluation job, as run inside a candidate worker process: load, verify, time.

Everything here may execute hostile candidate code; it runs only in candidate worker processes
(``_worker.py``). Candidate failures become result dictionaries, never exceptions. The expected
outputs are never computed here: each trial's outputs go to the reference worker through the
parent (``Check``), which answers with the verdict.
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from . import _compare, _exchange, _extension_hooks, _runtime_checks, _task_runtime, launch
from ._task_runtime import TaskFailure
from ._timing import time_interleaved
from .candidates import kernel_sources
from .errors import CompileError

Phase = Callable[[str], None]
# (index of the planned check, output descriptions, input fingerprint) -> the parent's answer
Check = Callable[[int, list[dict[str, Any]], list[Any]], dict[str, Any]]


class _Verdict(Exception):
    """Ends a job early with a final status."""

    def __init__(self, status: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


def run_job(job: dict[str, Any], workdir: Path, enter_phase: Phase, check: Check) -> dict[str, Any]:
    """Evaluate ``job['candidate']`` against ``job['task']``; return EvalResult fields.

    ``job['checks']`` is the parent's plan: for each check a stage (``trial``, ``config`` or
    ``after`` timing), a seed and the sizes. Trials are recorded by the parent, not here.
    """
    cfg = job["config"]
    device = torch.device(cfg["device"])
    result: dict[str, Any] = {}
    plan: list[dict[str, Any]] = job["checks"]
    seconds: dict[str, float] = {}  # where the job's time went (EvalResult.extra["seconds"])
    trial: _Trials | None = None
    try:
        enter_phase("load")
        try:
            task = _task_runtime.load_task(job["task"], workdir / "reference.py")
            _task_runtime.override_sizes(task, job.get("sizes") or {})
        except TaskFailure as exc:
            raise _reference_failed(exc) from None
        _extension_hooks.install()  # load_inline extensions: cached, counted
        threads_at_load = _runtime_checks.python_threads()
        t0 = time.perf_counter()
        candidate = _load_candidate(job["candidate"], workdir, cfg["backend"])
        _extension_hooks.count_triton_launches()
        result["build_seconds"] = time.perf_counter() - t0
        reference, model_new = _build_models(task, candidate, device, cfg["seed"])
        trial = _Trials(task, model_new, device, cfg, job["exchange"], check)
        trial.threads_at_load = threads_at_load
        seconds["load"] = time.perf_counter() - t0

        enter_phase("correctness")
        launches_before = launch.launch_count()
        inputs: list[Any] = []  # the last trial's, on the task's own distribution: timed
        for index, step in enumerate(plan):
            if step["stage"] == "trial":
                drawn = trial.run(index, step)
                inputs = drawn if "distribution" not in step else inputs
            elif step["stage"] == "inplace":
                trial.run(index, step, inplace=True)
        if cfg["require_custom_kernel"] and launch.launch_count() == launches_before:
            raise _Verdict(
                "rejected",
                "no custom kernel was launched: ModelNew must compute with kernels built by "
                "cpu_kernel / cuda_kernel, not with PyTorch operators",
                flags=["no_custom_kernel"],
            )
        for index, step in enumerate(plan):
            if step["stage"] == "config":
                _check_config(task, candidate, trial, index, step)

        if cfg.get("measure_time", True):
            enter_phase("timing")
            t_timing = time.perf_counter()
            result.update(_time(task, reference, model_new, inputs, device, cfg))
            seconds["timing"] = time.perf_counter() - t_timing
            # Re-check on fresh inputs: a candidate that behaves differently once it has been
            # called many times (detects warm-up, caches results) is caught here.
            enter_phase("correctness")
            speedup = result["eager_time_ms"] / max(result["candidate_time_ms"], 1e-9)
            for index, step in enumerate(plan):
                if step["stage"] == "after" or (
                    step["stage"] == "reverify" and speedup > cfg["reverify_speedup"]
                ):
                    trial.run(index, step, after_timing=True)
        result["status"] = "ok"
        result["message"] = "correct"
    except _Verdict as verdict:
        result["status"] = verdict.status
        result["message"] = verdict.message
        result.update(verdict.extra)
    if trial is not None:
        seconds.update(trial.seconds)
    extra = result.get("extra")
    result["extra"] = {**(extra if isinstance(extra, dict) else {}), "seconds": seconds}
    return result


def prepare(job: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Import the candidate only to build its extensions into the shared cache (in a compile
    worker, with no GPU). Whatever fails here is left for the real job to report."""
    _extension_hooks.install()
    t0 = time.perf_counter()
    try:
        _load_candidate(job["candidate"], workdir, "cuda")
        outcome = "built"
    except _Verdict as verdict:
        outcome = verdict.status
    except BaseException as exc:
        outcome = type(exc).__name__
    return {"outcome": outcome, "seconds": time.perf_counter() - t0}


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
        raise _Verdict("compile_error", str(exc)) from None
    except SyntaxError as exc:
        raise _Verdict(
            "compile_error", f"model_new.py:{exc.lineno}: SyntaxError: {exc.msg}"
        ) from None
    except Exception as exc:
        raise _Verdict("runtime_error", "importing model_new.py failed:\n" + _trim(exc)) from None
    finally:
        sys.path.remove(str(workdir))
    if not hasattr(module, "ModelNew"):
        raise _Verdict("compile_error", "model_new.py does not define class ModelNew")
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
        raise _Verdict(
            "compile_error",
            "kernels/*.cu files need the CUDA backend; on the CPU backend write the kernels "
            "as kernels/*.cpp",
        )
    if sources:
        try:
            _extension_hooks.build_work_directory(workdir, sources, with_cuda)
        except CompileError as exc:
            raise _Verdict("compile_error", str(exc)) from None
        except Exception as exc:
            raise _Verdict(
                "runtime_error", f"loading the built extension failed: {type(exc).__name__}: {exc}"
            ) from None
    return files["model_new.py"]


def _reference_failed(reason: object) -> _Verdict:
    """The reference itself failed (e.g. on sizes drawn by a property check): no verdict on
    the candidate is possible, and the result says so."""
    return _Verdict("runtime_error", str(reason), extra={"reference_failed": True})


def _build_models(
    task: types.ModuleType, candidate: types.ModuleType, device: torch.device, seed: int
) -> tuple[torch.nn.Module, torch.nn.Module]:
    try:
        reference, init_inputs = _task_runtime.build_reference(task, device, seed)
    except TaskFailure as exc:
        raise _reference_failed(exc) from None
    torch.manual_seed(seed)
    try:
        model_new = candidate.ModelNew(*init_inputs)
        if not isinstance(model_new, torch.nn.Module):
            raise _Verdict("runtime_error", "ModelNew(...) did not return an nn.Module")
        model_new = model_new.to(device).eval()
        # Same weights as the reference (the reference system copies the state dict).
        ref_state = reference.state_dict()
        if set(ref_state) == set(model_new.state_dict()):
            model_new.load_state_dict(ref_state)
    except _Verdict:
        raise
    except Exception as exc:
        raise _Verdict("runtime_error", "constructing ModelNew failed:\n" + _trim(exc)) from None
    return reference, model_new


# -------------------------------------------------------------------------------- correctness
@contextlib.contextmanager
def _poisoned_allocations() -> Iterator[None]:
    """Fill every tensor the candidate allocates without initialising (``torch.empty``) with
    NaN (integers: their maximum), so a kernel that leaves part of its output unwritten fails
    instead of passing on stale memory that happened to hold the right values."""
    from torch.utils import deterministic

    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    torch.use_deterministic_algorithms(True, warn_only=True)
    deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        deterministic.fill_uninitialized_memory = fill  # type: ignore[attr-defined]


_INPUTS: _task_runtime.BoundedCache | None = None


class _Trials:
    """Runs the candidate on one planned check's inputs and asks the parent for the verdict."""

    def forward(self, inputs: list[Any]) -> Any:
        """One candidate call on poisoned allocations, recording the PyTorch operators it ran."""
        recorder = _runtime_checks.OpRecorder() if self.checks else contextlib.nullcontext()
        try:
            with torch.no_grad(), _poisoned_allocations(), recorder:
                output = self.model_new(*inputs)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        except Exception as exc:
            raise _Verdict("runtime_error", "ModelNew.forward failed:\n" + _trim(exc)) from None
        if self.checks and _runtime_checks.python_threads() > self.threads_at_load:
            raise _Verdict(
                "rejected",
                "ModelNew left threads running: work in background threads escapes the timer",
                flags=["background_thread"],
            )
        if isinstance(recorder, _runtime_checks.OpRecorder):
            bad = _runtime_checks.forbidden_ops(recorder.ops, self.allowed)
            if bad:
                names = ", ".join(f"aten.{op}" for op in bad[:6])
                raise _Verdict(
                    "rejected",
                    f"ModelNew.forward ran PyTorch operators ({names}): compute them in your own "
                    "kernels (PyTorch may only allocate, view, reshape and copy tensors)",
                    flags=["torch_compute"],
                )
        return output

    def compare_runs(self, first: Any, second: Any) -> None:
        a, b = _task_runtime.as_tensors(first), _task_runtime.as_tensors(second)
        if a is None or b is None or len(a) != len(b):
            return  # reported by the normal checks
        for x, y in zip(a, b, strict=True):
            same = (
                x.shape == y.shape
                and x.dtype == y.dtype
                and bool(
                    torch.isclose(
                        x.detach().double(),
                        y.detach().double(),
                        atol=self.cfg["atol"],
                        rtol=self.cfg["rtol"],
                        equal_nan=True,
                    ).all()
                )
            )
            if not same:
                raise _Verdict(
                    "rejected",
                    "two runs on the same inputs gave different outputs: the kernel reads "
                    "memory it did not write, or races",
                    flags=["nondeterministic"],
                )

    def draw(self, step: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        """(pristine inputs, fingerprint) for a check, drawn once per worker and kept: every
        candidate for a task is checked on the same seeds. The candidate gets clones."""
        global _INPUTS
        if _INPUTS is None:
            _INPUTS = _task_runtime.BoundedCache(_task_runtime.cache_budget(self.device))
        distribution = step.get("distribution") or self.cfg.get("distribution", "normal")
        key = _INPUTS.key(
            self.cfg["task_digest"], step["sizes"], step["seed"], distribution, str(self.device)
        )
        found = _INPUTS.get(key)
        if found is None:
            try:
                drawn = _task_runtime.draw_inputs(
                    self.task, self.device, step["seed"], distribution
                )
            except TaskFailure as exc:
                raise _reference_failed(exc) from None
            found = (drawn, _compare.fingerprint(drawn))
            _INPUTS.put(key, found)
        return found

    def __init__(self, task, model_new, device, cfg, exchange: int, check: Check) -> None:
        self.task, self.model_new, self.device, self.cfg = task, model_new, device, cfg
        self.exchange, self.check = exchange, check
        self.checks = bool(cfg.get("runtime_checks", True))
        self.allowed = _runtime_checks.allowed_aten(cfg.get("allowed_torch_ops") or ())
        self.first = True
        self.last_inputs: list[Any] | None = None
        self.threads_at_load = _runtime_checks.python_threads()
        self.seconds = {"inputs": 0.0, "candidate": 0.0, "exchange": 0.0, "verdicts": 0.0}

    def _add(self, what: str, since: float) -> float:
        now = time.perf_counter()
        self.seconds[what] += now - since
        return now

    def run(
        self,
        index: int,
        step: dict[str, Any],
        after_timing: bool = False,
        inplace: bool = False,
    ) -> list[Any]:
        """Run check ``index``; raise a verdict unless it passed; return its inputs.

        ``inplace`` writes the new values into the previous check's input tensors instead of
        fresh ones (a result cached by tensor identity or address comes out stale)."""
        t = time.perf_counter()
        pristine, prints = self.draw(step)
        if inplace and self.last_inputs is not None:
            inputs = self.last_inputs
            for old, new in zip(inputs, pristine, strict=True):
                if isinstance(old, torch.Tensor):
                    old.copy_(new)
        else:
            inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in pristine]
        t = self._add("inputs", t)
        output = self.forward(inputs)
        if self.checks and self.first:
            # The same inputs again must give the same outputs: garbage memory that happened
            # to match, or races, differ from run to run.
            again = self.forward(
                [x.clone() if isinstance(x, torch.Tensor) else x for x in pristine]
            )
            self.compare_runs(output, again)
        self.first = False
        self.last_inputs = inputs
        t = self._add("candidate", t)
        for a, b in zip(inputs, pristine, strict=True):
            if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                raise _Verdict("rejected", "ModelNew modified its inputs", flags=["input_mutation"])
        got = _task_runtime.as_tensors(output)
        if got is None:
            raise _Verdict(
                "incorrect",
                f"ModelNew returned {type(output).__name__}; expected a tensor or a tuple",
            )
        problem = _runtime_checks.output_problem(got) if self.checks else ""
        if problem:
            raise _Verdict("rejected", problem, flags=["tensor_subclass"])
        try:
            meta = _exchange.write_outputs(self.exchange, got)
        except _exchange.ExchangeError as exc:
            raise _Verdict("incorrect", str(exc)) from None
        t = self._add("exchange", t)
        answer = self.check(index, meta, prints)
        self._add("verdicts", t)
        if "reference_failed" in answer:
            raise _reference_failed(answer["reference_failed"])
        if not answer.get("passed"):
            message = str(answer.get("message", ""))
            if step["stage"] == "reverify":
                raise _Verdict(
                    "rejected",
                    f"a speedup above {self.cfg['reverify_speedup']}x was re-verified on fresh "
                    "inputs, and failed: " + message,
                    flags=["failed_reverification"],
                )
            if after_timing:
                raise _Verdict(
                    "rejected",
                    "correct before timing but not after it (on fresh inputs): " + message,
                    flags=["changed_after_timing"],
                )
            raise _Verdict("incorrect", step.get("label", "") + message)
        return inputs


def _check_config(task, candidate, trial: _Trials, index: int, step: dict[str, Any]) -> None:
    """One trial on a declared extra size configuration, with the models rebuilt for it; the
    main sizes are restored afterwards (timing and the re-check use them)."""
    saved = {name: getattr(task, name) for name in step["sizes"]}
    try:
        _task_runtime.override_sizes(task, step["sizes"])
        _, model_new = _build_models(task, candidate, trial.device, trial.cfg["seed"])
        main_model, trial.model_new = trial.model_new, model_new
        try:
            trial.run(index, step)
        finally:
            trial.model_new = main_model
    except TaskFailure as exc:
        raise _reference_failed(exc) from None
    finally:
        _task_runtime.override_sizes(task, saved)


# ----------------------------------------------------------------------------------- timing
def _time(task, reference, model_new, inputs, device, cfg) -> dict[str, Any]:
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
    baseline = cfg.get("compile_baseline") if cfg["time_compile"] else None
    try:
        timings = time_interleaved(
            fns,
            device=device,
            warmup=cfg["warmup"],
            repeats=cfg["repeats"],
            budget_s=cfg["timing_budget_s"],
        )
    except Exception as exc:
        raise _Verdict("runtime_error", "failed while timing:\n" + _trim(exc)) from None
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


def _trim(exc: BaseException, limit: int = 1500) -> str:
    """The candidate's part of a traceback: frames in model_new.py, then the exception line."""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith("model_new.py")
    ]
    lines = [f"  model_new.py, line {f.lineno}, in {f.name}: {f.line}" for f in frames[-3:]]
    text = "\n".join([*lines, f"{type(exc).__name__}: {exc}"])
    return text if len(text) <= limit else text[: limit - 20] + "\n... (truncated)"
