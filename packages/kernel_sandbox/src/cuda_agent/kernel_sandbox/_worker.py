"""Worker process main loop: ``python -m cuda_agent.kernel_sandbox._worker``.

Protocol: one JSON object per line, on private descriptors: we move the original stdin and
stdout aside before pointing descriptor 0 at /dev/null and 1 and 2 at a per-job log file, so
anything the candidate prints (or reads) cannot corrupt the protocol.

The same program serves both kinds of worker. A *candidate* job (``kind`` absent) loads and
runs candidate code (``_candidate.evaluate.run_job``); a *reference* job (``kind: "reference"``) runs
only task code and judges one trial's outputs (``_reference.jobs.check``), a *baseline* job
times the eager and ``torch.compile`` reference (``_reference.jobs.baseline``), a *validate* job
looks for answers that compute nothing yet pass (``_reference.trivial_answers``), and a
*trivial_rule* job decides how a task's candidates are judged so that none passes
(``_reference.trivial_rule``). A *prepare* job
(``kind: "prepare"``, in a compile worker with no GPU) imports a candidate only to build its
extensions into the shared cache (``_candidate.evaluate.prepare``).

Messages we send: ``{"type": "ready"}``; ``{"type": "phase", "phase": ...}`` when a phase
with its own deadline starts; ``{"type": "check", "index": i, "outputs": [...], "inputs":
[...]}`` after a trial, and ``{"type": "buffer", "bytes": n}`` before outputs are written to
the slot's device buffer (``_shared.device_exchange``); the parent answers each with one
``{"type": "checked", ...}`` line; ``{"type": "gate", "hold": "read" | "write"}`` before
a section of device work, answered once the device's timing gate lets it through, and
``{"type": "gate", "hold": "none"}`` after it, not answered (``_shared.sections``); and
``{"type": "result", "result": {...}}``. A *device_buffer* job (reference workers) provides
that buffer.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from ._confinement import limits


def _send(channel: TextIO, message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def _redirect_output(path: Path) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _context_is_poisoned(result: dict[str, Any]) -> bool:
    """After a CUDA error the context is unusable: this worker must not take another job."""
    if result.get("status") == "ok":
        return False
    message = str(result.get("message", ""))
    if any(
        s in message for s in ("CUDA error", "CUDA_ERROR", "illegal memory access", "cudaError")
    ):
        return True
    import torch

    if not torch.cuda.is_initialized():
        return False
    try:  # a sticky error surfaces on the next synchronisation
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
    except Exception:
        return True
    return False


def _memory_is_suspect(result: dict[str, Any]) -> bool:
    """A candidate wrote out of a tensor's bounds, up to the far end of its guard region
    (``_candidate.guards``): it may have written on, into this worker's own memory."""
    extra = result.get("extra")
    found = extra.get("out_of_bounds_write") if isinstance(extra, dict) else None
    return isinstance(found, dict) and bool(found.get("beyond_guard"))


def _release_gpu_memory() -> None:
    """After a candidate job: what the job allocated goes back to the GPU (its reserve would
    otherwise be held for the worker's life, and the next task's reference could not get it)."""
    import torch

    if torch.cuda.is_initialized():
        from ._shared.task_runtime import release_gpu_memory

        release_gpu_memory()


_WARM_KERNEL = r"""
extern "C" __global__ void cuda_agent_warm_up(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + 1.0f;
}
"""


class _StartClock:
    """Where a worker's start goes, in seconds per stage since ``main`` began (its ``ready``
    message's ``start_seconds``: the pool adds them to the first job's verdict)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.monotonic()

    def lap(self, stage: str) -> None:
        now = time.monotonic()
        self.laps[stage] = round(self.laps.get(stage, 0.0) + now - self._last, 4)
        self._last = now


def _warm_cuda(runs_candidates: bool, clock: _StartClock) -> int:
    """Pay the first-use costs of a GPU worker now rather than in its first job (seconds on the
    H200): the CUDA context, the page-locked exchange window, and for a worker that runs
    candidates CuPy, NVRTC and the driver's launch path. Returns the bytes of the exchange
    pinned (0: it works unpinned). A failure here only leaves the costs to the first job."""
    import torch

    from ._shared import exchange as _exchange

    pinned = 0
    try:
        torch.empty(1, device="cuda")  # the CUDA context
        clock.lap("cuda_context")
        fd = os.environ.get("CUDA_AGENT_EXCHANGE_FD")
        pinned = _exchange.pin(int(fd)) if fd else 0
        clock.lap("pin_exchange")
        x = torch.randn(4096, device="cuda")
        out = torch.empty_like(x)
        if runs_candidates:
            from .launch import cuda_kernel

            cuda_kernel(_WARM_KERNEL, "cuda_agent_warm_up")(
                grid=(16,), block=(256,), args=(out, x, x.numel())
            )
        else:
            out.copy_(x).add_(1.0)
        torch.testing.assert_close(out, x + 1.0)
        torch.cuda.synchronize()
    except Exception:  # warm-up is an optimisation
        pass
    clock.lap("warm_kernel")
    return pinned


def _gpu_share(role: str, lanes: int) -> float:
    """The fraction of the GPU's memory a worker may allocate: with several lanes on the GPU a
    candidate worker's allocations are capped at its share (a quarter of the GPU, or half with
    two lanes), so a candidate that takes all the memory it can runs out of its own and its
    neighbours' jobs still fit; 1.0 (no cap) otherwise."""
    if role != "candidate" or lanes <= 1:
        return 1.0
    return max(1.0 / lanes, 0.25 if lanes > 2 else 0.5)


def _set_gpu_share(fraction: float) -> None:
    import torch

    with contextlib.suppress(Exception):
        torch.cuda.set_per_process_memory_fraction(fraction)


def _job_share(share: float, alone: bool, room: float) -> float:
    """The share of the GPU's memory a job may allocate in a worker whose own share is
    ``share``: all of it for a job that runs with the device to itself (``JobConfig.device_alone``:
    the rerun of a job that ran out of memory beside other lanes), else the room the pool
    admitted it into (``JobConfig.memory_share``) where that is more than the worker's share."""
    if alone:
        return 1.0
    return max(share, min(room, 1.0))


@contextlib.contextmanager
def _share_for_job(share: float, alone: bool, room: float) -> Iterator[None]:
    """Run a job at ``_job_share``; the worker's own share is set back after it."""
    wanted = _job_share(share, alone, room)
    if wanted == share:
        yield
        return
    _set_gpu_share(wanted)
    try:
        yield
    finally:
        _set_gpu_share(share)


def _trim_reserve(threshold: int = 1 << 30) -> None:
    """After a reference request with several lanes on the GPU: the blocks PyTorch's allocator
    keeps in reserve go back to the GPU once they pass ``threshold`` bytes. A reference worker
    serves every check of its lane's jobs; the temporaries of a task with GB-sized inputs would
    otherwise stay reserved for the worker's life, and eight lanes' reserves filled the H200's
    139 GiB (the candidate workers, which release after every job, then ran out of memory,
    also when rerun alone).

    Between requests a reference worker should hold only its caches (``cache_budget``) and the
    last task's model. When it holds more than those and ``threshold`` besides, the garbage
    collector runs first: tensors a failed request left in reference cycles (an exception's
    traceback keeps its frames' locals) are freed only by it. On the H200 (2026-12-04) a
    reference worker held 36 GiB of allocated tensors when its task's ``get_inputs()`` ran out
    of memory, also in the rerun alone; checks now report what their worker held when they
    began (``extra["reference_held_gpu_bytes"]``)."""
    import gc

    import torch

    from ._shared.task_runtime import cache_budget, trim_reserve

    if not torch.cuda.is_initialized():
        return
    device = torch.device("cuda", torch.cuda.current_device())
    if torch.cuda.memory_allocated(device) > cache_budget(device) + threshold:
        gc.collect()
    trim_reserve(device, threshold)


def _warm_checks(device: str) -> None:
    """The first use of the runtime checks' dispatch mode and of poisoned allocations imports
    ``torch._dynamo`` (about 1 s here, several on some hosts): pay it at start, not in a job."""
    import torch

    from ._candidate.runtime_checks import OpRecorder
    from ._candidate.trials import poisoned_allocations

    try:
        x = torch.ones(8, device=device)
        with torch.no_grad(), poisoned_allocations(), OpRecorder():
            torch.empty_like(x).copy_(x)
    except Exception:  # warm-up is an optimisation
        pass


def main() -> None:
    clock = _StartClock()
    parent = os.environ.pop("CUDA_AGENT_PARENT_PID", "")  # a fresh interpreter's (``exec``)
    if parent:
        limits.die_with_parent(int(parent))
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    inbox = os.fdopen(os.dup(0), "r")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    given = os.environ.get("CUDA_AGENT_HOME")  # made (and removed) by the parent's Worker
    home = Path(given) if given else Path(tempfile.mkdtemp(prefix="cuda-agent-worker-"))
    _redirect_output(home / "startup.log")
    threads = int(os.environ.get("CUDA_AGENT_THREADS", "1"))
    # torch.compile's inductor builds in a pool of one process per CPU by default: with one
    # worker per pair of CPUs that is CPUs^2 / 2 compilers at once. Give it the worker's share.
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(threads))
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:  # read before this environment was ours (a forked worker)
        inductor.compile_threads = int(os.environ["TORCHINDUCTOR_COMPILE_THREADS"])  # type: ignore[attr-defined]
    isolated = os.environ.get("CUDA_AGENT_ISOLATE_NETWORK") == "1" and limits.isolate_network()
    # Candidate and compile workers run candidate code; the reference worker runs only trusted
    # task code (and torch.compile, whose precompiled headers exceed the output cap), so none
    # of the confinement below applies there.
    role = os.environ.get("CUDA_AGENT_ROLE", "candidate")
    runs_candidates = role != "reference"
    from ._shared import trace as _trace

    _trace.open_from_env(role)  # before the confinement below: the file stays writable
    if runs_candidates:
        limits.limit_resources(int(os.environ.get("CUDA_AGENT_MAX_OUTPUT", str(64 << 20))))

    import torch

    from ._confinement import seccomp as _seccomp

    # No signals to other processes, no tracing or reading of their memory.
    signals_confined = False
    if runs_candidates:
        signals_confined = _seccomp.install()
    torch.set_num_threads(threads)
    from ._candidate.evaluate import prepare, run_job
    from ._reference.jobs import baseline as reference_baseline
    from ._reference.jobs import check as reference_check
    from ._reference.jobs import expected as reference_expected
    from ._reference.trivial_answers import trivial_answers
    from ._reference.trivial_rule import trivial_rule
    from ._shared.device_exchange import provide as device_buffer
    from ._shared.protocol import (
        BaselineRequest,
        DeviceBufferRequest,
        ExpectedRequest,
        Job,
        PrepareRequest,
        ReferenceCheck,
        TrivialAnswersRequest,
    )
    from ._shared.sections import Sections
    from ._shared.trivial_rule import TrivialRuleRequest

    # Jobs that run only task code (served by reference workers): (message, handler).
    task_jobs: dict[str, tuple[Any, Callable[[Any, Path, Sections], dict[str, Any]]]] = {
        "reference": (ReferenceCheck, reference_check),
        "expected": (ExpectedRequest, reference_expected),
        "baseline": (BaselineRequest, reference_baseline),
        "validate": (TrivialAnswersRequest, trivial_answers),
        "trivial_rule": (TrivialRuleRequest, trivial_rule),
        "device_buffer": (DeviceBufferRequest, device_buffer),
    }

    limits.limit_memory(int(os.environ.get("CUDA_AGENT_MAX_MEMORY", "0")))
    clock.lap("imports")

    identity = {"torch": torch.__version__, "device": "cpu"}
    pinned = 0
    lanes = int(os.environ.get("CUDA_AGENT_LANES", "1"))
    share = 1.0
    if os.environ.get("CUDA_AGENT_BACKEND") == "cuda" and torch.cuda.is_available():
        identity["device"] = torch.cuda.get_device_name(0)
        clock.lap("cuda_init")
        pinned = _warm_cuda(runs_candidates, clock)
        share = _gpu_share(role, lanes)
        if share < 1.0:
            _set_gpu_share(share)
    if runs_candidates:
        _warm_checks("cuda" if identity["device"] != "cpu" else "cpu")
        clock.lap("warm_checks")
    # Files: candidate code may write only in this worker's home and the shared caches.
    confined = False
    if runs_candidates:
        from ._confinement import landlock as _landlock
        from ._shared.compile import cache_root

        os.environ["TMPDIR"] = str(home)
        tempfile.tempdir = str(home)
        cache_root().mkdir(parents=True, exist_ok=True)
        confined = _landlock.restrict_writes([str(home), str(cache_root()), "/dev"])
        clock.lap("confine")
    ready = {
        "type": "ready",
        "pid": os.getpid(),
        "network_isolated": isolated,
        "filesystem_confined": confined,
        "signals_confined": signals_confined,
        "pinned_exchange_bytes": pinned,
        "start_seconds": clock.laps,
        **identity,
    }
    _send(channel, ready)

    def ask(message: dict[str, Any]) -> dict[str, Any]:
        _send(channel, message)
        answer = json.loads(inbox.readline() or "{}")
        return answer if isinstance(answer, dict) else {}

    def tell(message: dict[str, Any]) -> None:
        _send(channel, message)

    try:
        for line in inbox:
            job = json.loads(line)
            if job.get("kind") in task_jobs:
                message, handler = task_jobs[job["kind"]]
                # A check runs inside the section of the candidate worker that asked for it.
                gated = job["kind"] in ("baseline", "validate", "trivial_rule", "expected")
                sections = Sections(ask, tell) if gated else Sections()
                try:
                    answer = handler(message.from_json(job), home, sections)
                except Exception as exc:  # a harness bug: report it, keep serving
                    answer = {"reference_failed": f"{type(exc).__name__}: {exc}"}
                if lanes > 1:
                    _trim_reserve()
                _send(channel, {"type": "result", "result": answer, "retire": False})
                continue
            workdir = Path(tempfile.mkdtemp(prefix="job-", dir=home))
            os.chdir(workdir)
            _redirect_output(workdir / "output.log")
            if job.get("kind") == "prepare":
                report = prepare(PrepareRequest.from_json(job), workdir).to_json()
                _send(channel, {"type": "result", "result": report, "retire": False})
                os.chdir(home)
                shutil.rmtree(workdir, ignore_errors=True)
                continue

            sections = Sections(ask, tell)
            try:
                parsed = Job.from_json(job)
                cfg = parsed.config
                with _share_for_job(share, cfg.device_alone, cfg.memory_share):
                    result = run_job(
                        parsed,
                        workdir,
                        lambda p: _send(channel, {"type": "phase", "phase": p}),
                        ask,
                        sections,
                    )
            except BaseException as exc:  # a harness bug or SystemExit from the candidate
                result = {"status": "runtime_error", "message": f"{type(exc).__name__}: {exc}"}
            with sections.correctness("cleanup"):
                retire = _context_is_poisoned(result) or _memory_is_suspect(result)
                if not retire:
                    _release_gpu_memory()
            _send(channel, {"type": "result", "result": result, "retire": retire})
            os.chdir(home)
            shutil.rmtree(workdir, ignore_errors=True)
            if retire:
                break
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
