"""One evaluation job, as run inside a worker process: load, verify, time.

Everything here may execute hostile candidate code; it runs only in worker processes
(``_worker.py``). Candidate failures become result dictionaries, never exceptions.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from . import _extension_hooks, launch
from ._timing import time_interleaved
from .errors import CompileError
from .result import TrialOutcome

Phase = Callable[[str], None]


class _Verdict(Exception):
    """Ends a job early with a final status."""

    def __init__(self, status: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


def run_job(job: dict[str, Any], workdir: Path, enter_phase: Phase) -> dict[str, Any]:
    """Evaluate ``job['candidate']`` against ``job['task']``; return EvalResult fields."""
    cfg = job["config"]
    device = torch.device(cfg["device"])
    result: dict[str, Any] = {"task": job["task_name"], "backend": cfg["backend"]}
    try:
        enter_phase("load")
        task = _load_module(job["task"], workdir / "reference.py", "cuda_agent_task")
        _check_task(task)
        _override_sizes(task, job.get("sizes") or {})
        _extension_hooks.install()  # load_inline extensions count as custom kernels
        t0 = time.perf_counter()
        candidate = _load_candidate(job["candidate"], workdir / "model_new.py")
        result["build_seconds"] = time.perf_counter() - t0
        reference, model_new = _build_models(task, candidate, device, cfg["seed"])

        enter_phase("correctness")
        launches_before = launch.launch_count()
        trials, inputs = _check_correctness(task, reference, model_new, device, cfg)
        _record_trials(result, trials)
        if cfg["require_custom_kernel"] and launch.launch_count() == launches_before:
            raise _Verdict(
                "rejected",
                "no custom kernel was launched: ModelNew must compute with kernels built by "
                "cpu_kernel / cuda_kernel, not with PyTorch operators",
                flags=["no_custom_kernel"],
            )

        configs = job.get("input_configs") or []
        trials += _check_configs(task, candidate, device, cfg, configs)
        _record_trials(result, trials)

        if cfg.get("measure_time", True):
            enter_phase("timing")
            result.update(_time(task, reference, model_new, inputs, device, cfg))
            # Re-check on fresh inputs: a candidate that behaves differently once it has been
            # called many times (detects warm-up, caches results) is caught here.
            enter_phase("correctness")
            after, _ = _run_trial(task, reference, model_new, device, cfg, cfg["seed"] + 9000)
            trials.append(after)
            result["trials"] = [asdict(t) for t in trials]
            if not after.passed:
                raise _Verdict(
                    "rejected",
                    "correct before timing but not after it (on fresh inputs): " + after.message,
                    flags=["changed_after_timing"],
                )
        result["status"] = "ok"
        result["message"] = "correct"
    except _Verdict as verdict:
        result["status"] = verdict.status
        result["message"] = verdict.message
        result.update(verdict.extra)
    return result


def _record_trials(result: dict[str, Any], trials: list[TrialOutcome]) -> None:
    """Put the trials and the worst errors into ``result``; a failed trial (always the last:
    checking stops at the first failure) ends the job as ``incorrect``."""
    result["trials"] = [asdict(t) for t in trials]
    result["max_abs_error"] = max(t.max_abs_error for t in trials)
    result["max_rel_error"] = max(t.max_rel_error for t in trials)
    if not trials[-1].passed:
        raise _Verdict("incorrect", trials[-1].message)


# ------------------------------------------------------------------------------------ loading
def _load_module(source: str, path: Path, name: str) -> types.ModuleType:
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop(name, None)
    spec.loader.exec_module(module)
    return module


def _check_task(task: types.ModuleType) -> None:
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(task, attr):
            raise _Verdict("runtime_error", f"the task module does not define {attr}")


def _load_candidate(source: str, path: Path) -> types.ModuleType:
    try:
        module = _load_module(source, path, "model_new")
    except CompileError as exc:
        raise _Verdict("compile_error", str(exc)) from None
    except SyntaxError as exc:
        raise _Verdict(
            "compile_error", f"model_new.py:{exc.lineno}: SyntaxError: {exc.msg}"
        ) from None
    except Exception as exc:
        raise _Verdict("runtime_error", "importing model_new.py failed:\n" + _trim(exc)) from None
    if not hasattr(module, "ModelNew"):
        raise _Verdict("compile_error", "model_new.py does not define class ModelNew")
    return module


def _reference_failed(what: str, exc: BaseException) -> _Verdict:
    """The reference itself failed (e.g. on sizes drawn by a property check): no verdict on
    the candidate is possible, and the result says so."""
    return _Verdict(
        "runtime_error",
        f"the reference {what} failed: {type(exc).__name__}: {exc}",
        extra={"reference_failed": True},
    )


def _build_models(
    task: types.ModuleType, candidate: types.ModuleType, device: torch.device, seed: int
) -> tuple[torch.nn.Module, torch.nn.Module]:
    try:
        init_inputs = task.get_init_inputs()
        torch.manual_seed(seed)
        reference = task.Model(*init_inputs).to(device).eval()
    except Exception as exc:
        raise _reference_failed("model construction", exc) from None
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
def _as_tensors(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, list | tuple) and all(isinstance(o, torch.Tensor) for o in output):
        return list(output)
    raise _Verdict(
        "incorrect", f"ModelNew returned {type(output).__name__}; expected a tensor or a tuple"
    )


def _override_sizes(task: types.ModuleType, sizes: dict[str, int]) -> None:
    """Set module-level problem sizes before anything reads them (property-based checks)."""
    for name, value in sizes.items():
        current = getattr(task, name, None)
        if type(current) is not int:
            raise _Verdict("runtime_error", f"the task has no integer size named {name!r}")
        setattr(task, name, int(value))


def _inputs(
    task: types.ModuleType, device: torch.device, seed: int, distribution: str = "normal"
) -> list[Any]:
    torch.manual_seed(seed)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    return [_redistribute(x, distribution) for x in inputs]


def _redistribute(x: Any, distribution: str) -> Any:
    """Floating inputs drawn from another value distribution (same shape, dtype, device).

    ``normal`` leaves get_inputs' values; ``heavy_tailed`` draws Student-t with 2 degrees of
    freedom (rare huge values); ``large`` scales by 1000; ``tiny`` by 1e-3.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or distribution == "normal":
        return x
    if distribution == "large":
        return x * 1e3
    if distribution == "tiny":
        return x * 1e-3
    if distribution == "heavy_tailed":
        # The global RNG was seeded from the trial seed in _inputs: reproducible.
        t = torch.distributions.StudentT(2.0).sample(x.shape)
        return t.to(dtype=x.dtype, device=x.device)
    raise _Verdict("runtime_error", f"unknown input distribution {distribution!r}")


def _clone(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _mismatch(got: torch.Tensor, want: torch.Tensor) -> str:
    """Why two outputs cannot be compared value by value ("" when they can)."""
    if got.shape != want.shape:
        return f"has shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if got.dtype != want.dtype:
        return f"has dtype {got.dtype}, expected {want.dtype}"
    if got.device != want.device:
        return f"is on {got.device}, expected {want.device}"
    if bool((~torch.isfinite(got) & torch.isfinite(want)).any()):
        return "has NaN or Inf where the reference is finite"
    return ""


def _tolerance(cfg: dict[str, Any], dtype: torch.dtype) -> tuple[float, float]:
    """(atol, rtol) for outputs of ``dtype``: a per-dtype override, else the defaults."""
    name = str(dtype).removeprefix("torch.")
    override = (cfg.get("dtype_tolerances") or {}).get(name)
    return (float(override[0]), float(override[1])) if override else (cfg["atol"], cfg["rtol"])


def _compare(
    got: list[torch.Tensor], want: list[torch.Tensor], cfg: dict[str, Any]
) -> tuple[bool, float, float, str]:
    """(passed, max_abs, max_rel, message) for one trial."""
    inf = float("inf")
    if len(got) != len(want):
        return False, inf, inf, f"returned {len(got)} outputs, expected {len(want)}"
    worst_abs = worst_rel = 0.0
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        problem = _mismatch(g.detach(), w.detach())
        if problem:
            return False, inf, inf, f"output {i} {problem}"
        atol, rtol = _tolerance(cfg, w.dtype)
        g64, w64 = g.detach().double(), w.detach().double()
        diff = (g64 - w64).abs().nan_to_num(0.0)
        if diff.numel():
            worst_abs = max(worst_abs, float(diff.max()))
            worst_rel = max(worst_rel, float((diff / w64.abs().clamp_min(1e-12)).max()))
        ok = torch.isclose(g64, w64, atol=atol, rtol=rtol, equal_nan=True)
        if not bool(ok.all()):
            n_bad = int((~ok).sum())
            idx = tuple(int(j) for j in (~ok).nonzero()[0])
            msg = (
                f"output {i} mismatch: {n_bad}/{ok.numel()} elements outside atol={atol}, rtol={rtol}; "
                f"first at {idx}: got {float(g64[idx]):.6g}, expected {float(w64[idx]):.6g}; "
                f"max abs error {worst_abs:.3g}"
            )
            return False, worst_abs, worst_rel, msg
    return True, worst_abs, worst_rel, ""


def _run_trial(
    task, reference, model_new, device, cfg, seed: int
) -> tuple[TrialOutcome, list[Any]]:
    """One correctness trial on fresh inputs drawn from ``seed``."""
    try:
        inputs = _inputs(task, device, seed, cfg.get("distribution", "normal"))
    except _Verdict:
        raise
    except Exception as exc:
        raise _reference_failed("get_inputs()", exc) from None
    pristine = _clone(inputs)
    try:
        with torch.no_grad():
            # The candidate runs first, so it cannot find the reference's result in memory.
            got = _as_tensors(model_new(*inputs))
            _sync(device)
    except _Verdict:
        raise
    except Exception as exc:
        raise _Verdict("runtime_error", "ModelNew.forward failed:\n" + _trim(exc)) from None
    for a, b in zip(inputs, pristine, strict=True):
        if isinstance(a, torch.Tensor) and not torch.equal(a, b):
            raise _Verdict("rejected", "ModelNew modified its inputs", flags=["input_mutation"])
    try:
        with torch.no_grad():
            want = _as_tensors(reference(*pristine))
    except _Verdict:
        raise
    except Exception as exc:
        raise _reference_failed("forward", exc) from None
    passed, max_abs, max_rel, message = _compare(got, want, cfg)
    return TrialOutcome(seed, passed, max_abs, max_rel, message), inputs


def _check_configs(task, candidate, device, cfg, configs) -> list[TrialOutcome]:
    """One trial on each declared extra size configuration, with models rebuilt for it; the
    main sizes are restored afterwards (timing and the re-check use them)."""
    trials: list[TrialOutcome] = []
    for k, config in enumerate(configs):
        saved = {name: getattr(task, name) for name in config}
        _override_sizes(task, config)
        try:
            reference, model_new = _build_models(task, candidate, device, cfg["seed"])
            trial, _ = _run_trial(task, reference, model_new, device, cfg, cfg["seed"] + 5000 + k)
        finally:
            _override_sizes(task, saved)
        if not trial.passed:
            trials.append(replace(trial, message=f"with sizes {config}: {trial.message}"))
            break
        trials.append(trial)
    return trials


def _check_correctness(
    task, reference, model_new, device, cfg
) -> tuple[list[TrialOutcome], list[Any]]:
    trials: list[TrialOutcome] = []
    inputs: list[Any] = []
    for t in range(cfg["trials"]):
        trial, inputs = _run_trial(task, reference, model_new, device, cfg, cfg["seed"] + 1000 + t)
        trials.append(trial)
        if not trial.passed:
            break
    return trials, inputs


# ----------------------------------------------------------------------------------- timing
_COMPILED: dict[str, Any] = {}


def _time(task, reference, model_new, inputs, device, cfg) -> dict[str, Any]:
    def candidate_call() -> object:
        with torch.no_grad():
            return model_new(*inputs)

    def eager_call() -> object:
        with torch.no_grad():
            return reference(*inputs)

    fns: list[Callable[[], object]] = [candidate_call, eager_call]
    if cfg["time_compile"]:
        compiled = _COMPILED.get(cfg["task_digest"])
        if compiled is None:
            compiled = _COMPILED[cfg["task_digest"]] = torch.compile(reference)

        def compile_call() -> object:
            with torch.no_grad():
                return compiled(*inputs)

        fns.append(compile_call)
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
    out = {
        "candidate_time_ms": timings[0].median_ms,
        "candidate_time_spread_ms": timings[0].spread_ms,
        "eager_time_ms": timings[1].median_ms,
        "eager_time_spread_ms": timings[1].spread_ms,
    }
    if len(timings) > 2:
        out["compile_time_ms"] = timings[2].median_ms
        out["compile_time_spread_ms"] = timings[2].spread_ms
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _trim(exc: BaseException, limit: int = 1500) -> str:
    """The candidate's part of a traceback: frames in model_new.py, then the exception line."""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith("model_new.py")
    ]
    lines = [f"  model_new.py, line {f.lineno}, in {f.name}: {f.line}" for f in frames[-3:]]
    text = "\n".join([*lines, f"{type(exc).__name__}: {exc}"])
    return text if len(text) <= limit else text[: limit - 20] + "\n... (truncated)"
