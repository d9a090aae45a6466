"""One planned check, as the candidate worker runs it: draw (cached) inputs, call the candidate
on poisoned, guarded allocations under the runtime checks, send the outputs, receive the
verdict."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .. import launch
from .._shared import compare as _compare
from .._shared import device_exchange as _device_exchange
from .._shared import exchange as _exchange
from .._shared import task_runtime as _task_runtime
from .._shared.protocol import Check, CheckRequest, CheckVerdict, JobConfig
from .._shared.sections import Sections
from .._shared.task_runtime import TaskFailure
from . import decoys as _decoys
from . import guards as _guards
from . import runtime_checks as _runtime_checks
from .verdict import Verdict, reference_failed, trim

# A message to the parent ("check": a trial's outputs to judge; "buffer": the device buffer
# to write them to) -> the parent's answer.
Ask = Callable[[dict[str, Any]], dict[str, Any]]


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
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


def free_cached_inputs() -> None:
    """Drop the worker's cached inputs and return the allocator's reserve to the GPU."""
    if _INPUTS is not None:
        _INPUTS.clear()
    _task_runtime.release_gpu_memory()


class _OutOfMemory(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Trials:
    """Runs the candidate on one planned check's inputs and asks the parent for the verdict."""

    on_device: bool  # trial outputs go to the slot's device buffer
    buffer_asked: bool  # that buffer was asked for in this job

    def forward(self, inputs: list[Any], guards: list[_guards.Guard]) -> Any:
        """One candidate call (see ``_forward``); on a GPU out-of-memory error, once more after
        the worker's caches are freed. Only a problem that does not fit even then is the
        candidate's ``runtime_error``."""
        try:
            return self._forward(inputs, guards)
        except _OutOfMemory:
            free_cached_inputs()
        try:
            return self._forward(inputs, guards)
        except _OutOfMemory as oom:
            raise Verdict(
                "runtime_error",
                "ModelNew.forward ran out of GPU memory, also after the sandbox freed its "
                "caches (the problem with the candidate's allocations does not fit):\n"
                + trim(oom.error),
            ) from None

    @contextlib.contextmanager
    def _host_split(self, recorder: Any) -> Iterator[None]:
        """The body's CPU time on this thread, split as ``_decoys.HostSplit`` and kept in
        ``host_splits`` (when ``recorder`` records the operators: runtime checks on)."""
        launches, in_kernels = launch.launch_count(), launch.kernel_seconds()
        started = time.thread_time()
        yield
        total = time.thread_time() - started
        if isinstance(recorder, _runtime_checks.OpRecorder):
            launched = launch.launch_count() - launches
            split = _decoys.HostSplit(
                total,
                kernels=launch.kernel_seconds() - in_kernels,
                ops=recorder.seconds,
                calls=recorder.calls + launched,
                launches=launched,
            )
            self.host_splits.append(split)

    def more_host_splits(self, inputs: list[Any], forwards: int) -> None:
        """``forwards`` more calls on ``inputs``, measured for the host-time rule only (their
        outputs were judged already): a second look before a ``compute_outside_kernels``
        rejection (``evaluate._judge_decoys``)."""
        try:
            for _ in range(forwards):
                recorder = _runtime_checks.OpRecorder()
                with torch.no_grad(), recorder, self._host_split(recorder):
                    self.model_new(*inputs)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
        except Exception as exc:
            raise Verdict("runtime_error", "ModelNew.forward failed:\n" + trim(exc)) from None

    def _forward(self, inputs: list[Any], guards: list[_guards.Guard]) -> Any:
        """One candidate call on poisoned allocations, recording the PyTorch operators it ran.
        ``inputs`` lie in guard regions (``guards``), and so do the tensors the call allocates:
        a write outside any of them is ``rejected`` (``out_of_bounds_write``)."""
        recorder = _runtime_checks.OpRecorder() if self.checks else contextlib.nullcontext()
        # Allocations are guarded up to about the inputs' size (they stay alive until checked).
        allocations = _guards.AllocationGuards(self.device, sum(g.span for g in guards))
        try:
            with (
                torch.no_grad(),
                poisoned_allocations(),
                allocations,
                recorder,
                self._host_split(recorder),
            ):
                output = self.model_new(*inputs)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        except Exception as exc:
            if self.device.type == "cuda" and _task_runtime.is_out_of_memory(exc):
                raise _OutOfMemory(exc) from None
            raise Verdict("runtime_error", "ModelNew.forward failed:\n" + trim(exc)) from None
        if self.checks and _runtime_checks.python_threads() > self.threads_at_load:
            raise Verdict(
                "rejected",
                "ModelNew left threads running: work in background threads escapes the timer",
                flags=["background_thread"],
            )
        if isinstance(recorder, _runtime_checks.OpRecorder):
            bad = _runtime_checks.forbidden_ops(recorder.ops, self.allowed)
            if bad:
                names = ", ".join(f"aten.{op}" for op in bad[:6])
                raise Verdict(
                    "rejected",
                    f"ModelNew.forward ran PyTorch operators ({names}): compute them in your own "
                    "kernels (PyTorch may only allocate, view, reshape and copy tensors)",
                    flags=["torch_compute"],
                )
        outputs = _task_runtime.as_tensors(output) or []
        damage, beyond = _guards.first_damage(guards, allocations.guards, outputs)
        if damage:
            # Writes that reached a pad's far end may have gone on into the worker's own memory:
            # the worker retires after this job (``_worker``).
            extra = {"out_of_bounds_write": {"beyond_guard": beyond}}
            raise Verdict("rejected", damage, flags=["out_of_bounds_write"], extra=extra)
        return output

    def compare_runs(self, first: Any, second: Any) -> None:
        a, b = _task_runtime.as_tensors(first), _task_runtime.as_tensors(second)
        if a is None or b is None or len(a) != len(b):
            return  # reported by the normal checks
        if not _compare.compare(b, a, self.cfg.atol, self.cfg.rtol)[0]:
            raise Verdict(
                "rejected",
                "two runs on the same inputs gave different outputs: the kernel reads "
                "memory it did not write, or races",
                flags=["nondeterministic"],
            )

    def send_outputs(self, outputs: list[torch.Tensor]) -> list[dict[str, Any]]:
        """Write a trial's outputs where the reference worker reads them: the slot's device
        buffer when they are all on this GPU and fit, else the host exchange file."""
        meta, total = _exchange.describe(outputs)
        if self.on_device and total and all(o.device == self.device for o in outputs):
            if not self.buffer_asked or total > _device_exchange.capacity():
                self.buffer_asked = True
                answer = self.ask({"type": "buffer", "bytes": total})
                why = _device_exchange.attach(answer, self.device)
                if why:
                    _device_exchange.detach()
                    self.outputs_via["device_unavailable"] = why[:300]
            if total <= _device_exchange.capacity():
                self.outputs_via["device"] = int(self.outputs_via["device"]) + 1
                return _device_exchange.write(outputs, meta)
        self.outputs_via["host"] = int(self.outputs_via["host"]) + 1
        return _exchange.write_outputs(self.exchange, outputs)

    def draw(self, step: Check) -> tuple[list[Any], list[Any]]:
        """(pristine inputs, fingerprint) for a check, drawn once per worker and kept: every
        candidate for a task is checked on the same seeds. The candidate gets clones."""
        global _INPUTS
        if _INPUTS is None:
            _INPUTS = _task_runtime.BoundedCache(_task_runtime.cache_budget(self.device))
        digest = self.cfg.task_digest
        distribution = step.distribution or self.cfg.distribution
        key = _INPUTS.key(digest, step.sizes, step.seed, distribution, str(self.device))
        found = _INPUTS.get(key)
        if found is None:
            drawn = self._draw(step.seed, distribution)
            found = (drawn, _compare.fingerprint(drawn))
            _INPUTS.put(key, found, group=digest)
        return found

    def _draw(self, seed: int, distribution: str) -> list[Any]:
        for attempt in (1, 2):
            try:
                return _task_runtime.draw_inputs(self.task, self.device, seed, distribution)
            except TaskFailure as exc:
                if self.device.type != "cuda" or not _task_runtime.is_out_of_memory(exc):
                    raise reference_failed(exc) from None
                if attempt == 2:
                    raise Verdict(
                        "runtime_error",
                        "the task's inputs do not fit in GPU memory beside the candidate's "
                        f"allocations: {exc}",
                    ) from None
                free_cached_inputs()
        raise AssertionError("unreachable")

    def __init__(
        self,
        task,
        model_new,
        device,
        cfg: JobConfig,
        exchange: int,
        ask: Ask,
        threads_at_load: int,
        sections: Sections | None = None,
    ) -> None:
        self.task, self.model_new, self.device, self.cfg = task, model_new, device, cfg
        self.exchange, self.ask = exchange, ask
        self.sections = sections or Sections()  # each check is a section of the gate
        # On a GPU: ask for the slot's device buffer once per job (the reference worker may
        # have been restarted since the last one), and again when outputs outgrow it.
        self.on_device = device.type == "cuda" and cfg.device_exchange
        self.buffer_asked = False
        # Trials whose outputs went each way (and why not on the device, if it was refused).
        self.outputs_via: dict[str, int | str] = {"device": 0, "host": 0}
        self.checks = cfg.runtime_checks
        self.allowed = _runtime_checks.allowed_aten(cfg.allowed_torch_ops)
        self.first = True
        self.last_inputs: list[Any] | None = None
        self.last_guards: list[_guards.Guard] = []  # the guard regions of last_inputs
        self.threads_at_load = threads_at_load  # Python threads before the candidate loaded
        self.host_splits: list[_decoys.HostSplit] = []  # each checked forward's CPU time
        self.seconds = {"inputs": 0.0, "candidate": 0.0, "exchange": 0.0, "verdicts": 0.0}
        self.reserve_trims = 0  # checks before which the allocator's reserve went back

    def _add(self, what: str, since: float) -> float:
        now = time.perf_counter()
        self.seconds[what] += now - since
        return now

    def run(
        self,
        index: int,
        step: Check,
        after_timing: bool = False,
        inplace: bool = False,
    ) -> list[Any]:
        """Run check ``index``; raise a verdict unless it passed; return its inputs.

        ``inplace`` writes the new values into the previous check's input tensors instead of
        fresh ones (a result cached by tensor identity or address comes out stale). The check,
        the reference's verdict included, is one correctness section of the gate."""
        with self.sections.correctness("check"):
            return self._run(index, step, after_timing, inplace)

    def _run(self, index: int, step: Check, after_timing: bool, inplace: bool) -> list[Any]:
        t = time.perf_counter()
        pristine, prints = self.draw(step)
        if inplace and self.last_inputs is not None:
            inputs, guards = self.last_inputs, self.last_guards
            for old, new in zip(inputs, pristine, strict=True):
                if isinstance(old, torch.Tensor):
                    old.copy_(new)
        else:
            inputs, guards = _guards.guard_inputs(pristine, self.device)  # copies, guarded
        t = self._add("inputs", t)
        output = self.forward(inputs, guards)
        if self.checks and self.first:
            # The same inputs again must give the same outputs: garbage memory that happened
            # to match, or races, differ from run to run.
            self.compare_runs(output, self.forward(*_guards.guard_inputs(pristine, self.device)))
        self.first = False
        self.last_inputs, self.last_guards = inputs, guards
        t = self._add("candidate", t)
        for i, (a, b) in enumerate(zip(inputs, pristine, strict=True)):
            if isinstance(a, torch.Tensor) and not _compare.same_bits(a, b):
                where = _compare.bits_changed(b, a)
                raise Verdict(
                    "rejected",
                    f"ModelNew modified its inputs (input {i}" + (f": {where})" if where else ")"),
                    flags=["input_mutation"],
                )
        got = _task_runtime.as_tensors(output)
        if got is None:
            raise Verdict(
                "incorrect",
                f"ModelNew returned {type(output).__name__}; expected a tensor or a tuple",
            )
        problem = _runtime_checks.output_problem(got) if self.checks else ""
        if problem:
            raise Verdict("rejected", problem, flags=["tensor_subclass"])
        try:
            meta = self.send_outputs(got)
        except _exchange.ExchangeError as exc:
            raise Verdict("incorrect", str(exc)) from None
        t = self._add("exchange", t)
        # The reference worker now draws this check's inputs and computes its outputs on the
        # same GPU: what this check freed (the determinism rerun, copies) goes back first.
        if _task_runtime.trim_reserve(self.device):
            self.reserve_trims += 1
        asked = CheckRequest(index=index, outputs=meta, inputs=prints)
        verdict = CheckVerdict.parse(self.ask(asked.to_json()))
        self._add("verdicts", t)
        if verdict.reference_failed is not None:
            raise reference_failed(verdict.reference_failed)
        if not verdict.passed:
            message = verdict.message
            if step.stage == "reverify":
                raise Verdict(
                    "rejected",
                    f"a speedup above {self.cfg.reverify_speedup}x was re-verified on fresh "
                    "inputs, and failed: " + message,
                    flags=["failed_reverification"],
                )
            if after_timing:
                raise Verdict(
                    "rejected",
                    "correct before timing but not after it (on fresh inputs): " + message,
                    flags=["changed_after_timing"],
                )
            raise Verdict("incorrect", step.label + message)
        return inputs
