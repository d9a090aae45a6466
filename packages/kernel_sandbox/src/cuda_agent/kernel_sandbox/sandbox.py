"""``Sandbox``: a pool of isolated workers that evaluates candidates against tasks.

    with Sandbox(SandboxConfig(backend="cpu")) as sandbox:
        result = sandbox.evaluate(task, candidate_source)
        results = sandbox.evaluate_many([(task, source), ...])   # all workers busy

Candidate code never runs in this process. Each slot of the pool pairs a *candidate worker*
(runs the candidate, times it) with a *reference worker* (runs only the task, computes the
expected outputs and judges each trial), so expected outputs never live where candidate code
runs. A worker that crashes, hangs past a phase deadline or hits a CUDA error is killed with its
process tree and replaced; the caller gets a verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import queue
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from types import TracebackType

from ._parent.baselines import BaselineCache
from ._parent.broker import Broker, compose
from ._parent.plan import plan_job
from ._parent.pool import Worker, WorkerDied
from ._shared import exchange as _exchange
from ._shared.protocol import Job, PrepareReport, PrepareRequest
from .candidates import Candidate, kernel_sources, read_candidate
from .config import INPUT_DISTRIBUTIONS, SandboxConfig
from .result import EvalResult, Status
from .static_checks import Finding, static_findings
from .tasks import Task


@dataclass
class _Slot:
    """A candidate worker, its reference worker and the file their trial outputs go through."""

    candidate: Worker
    reference: Worker
    exchange: int  # descriptor of the in-memory exchange file both workers inherit

    def __post_init__(self) -> None:
        self.candidate.pass_fds = self.reference.pass_fds = (self.exchange,)

    def kill(self) -> None:
        self.candidate.kill()
        self.reference.kill()
        with contextlib.suppress(OSError):
            os.close(self.exchange)


class Sandbox:
    """Owns the worker pool; use as a context manager (or call ``close``). With
    ``config.ray_address`` set it is a ``RaySandbox``: the same API on a Ray cluster."""

    def __new__(cls, config: SandboxConfig | None = None) -> Sandbox:
        if cls is Sandbox and config is not None and config.ray_address:
            from .ray_sandbox import RaySandbox

            return super().__new__(RaySandbox)
        return super().__new__(cls)

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = (config or SandboxConfig()).resolved()
        self._idle: queue.Queue[_Slot] = queue.Queue()
        self._slots = [
            _Slot(
                Worker(self.config, i, "candidate"),
                Worker(self.config, i, "reference"),
                _exchange.create(self.config.max_output_tensor_bytes),
            )
            for i in range(self.config.workers)
        ]
        for slot in self._slots:
            self._idle.put(slot)  # workers start lazily, on first use
        # Compile workers build extensions ahead of the GPU job, with no GPU, for the GPU's
        # architecture (read without creating a CUDA context here).
        self._compilers: queue.Queue[Worker] = queue.Queue()
        arch = _cuda_arch() if self.config.compile_workers else ""
        if arch:
            self._build_for(arch)
            for i in range(self.config.compile_workers):
                self._compilers.put(Worker(self.config, i, "compile", cuda_arch=arch))
        self._n_compilers = self._compilers.qsize()
        self._prepared: set[str] = set()  # candidates whose extensions a compile worker built
        # Enough threads that jobs can build on compile workers while others hold the GPUs.
        self._executor = ThreadPoolExecutor(
            max_workers=self.config.workers + self._n_compilers, thread_name_prefix="sandbox"
        )
        self._closed = False
        self._lock = threading.Lock()
        self._baselines = BaselineCache()

    def _build_for(self, arch: str) -> None:
        """The candidate workers build extensions for ``arch`` (``TORCH_CUDA_ARCH_LIST``), as the
        compile workers do, so both build the same thing and a built extension is loaded, not
        built again (left unset, torch derives other nvcc flags from the device: "9.0+PTX"
        against "9.0")."""
        for slot in self._slots:
            slot.candidate.cuda_arch = arch

    @property
    def backend(self) -> str:
        return self.config.backend

    # ---------------------------------------------------------------------------- evaluate
    def evaluate(
        self,
        task: Task,
        candidate: Candidate,
        *,
        sizes: Mapping[str, int] | None = None,
        distribution: str = "normal",
        measure_time: bool = True,
    ) -> EvalResult:
        """Build, verify and time ``candidate`` on ``task``: a ``ModelNew`` module's source, or a
        path (a module file or a work directory), or a mapping of work-directory files.

        ``sizes`` overrides the task's module-level integer sizes, ``distribution`` redraws
        floating inputs (``normal``, ``heavy_tailed``, ``large``, ``tiny``), and
        ``measure_time=False`` skips timing (correctness only): the property checks use them.
        """
        self._admit(distribution)
        source = read_candidate(candidate)
        started = time.perf_counter()
        if self.config.static_checks:
            findings = static_findings(source, allowed_torch_ops=self.config.allowed_torch_ops)
            if findings:
                return _with_wall_time(
                    _rejected(task, self.config.backend, findings), time.perf_counter() - started
                )
        job = plan_job(task, source, self.config, sizes, distribution, measure_time)
        if self._n_compilers and _needs_build(source):
            failed = self._prepare(job)
            if failed is not None:
                return _with_wall_time(failed, time.perf_counter() - started)
        slot = self._idle.get()
        try:
            cfg = self.config
            baseline = None
            if measure_time and cfg.time_compile:
                # Timed by the trusted reference worker (None if it could not be: then no
                # compile time is reported).
                baseline = self._baselines.get(job, slot.reference, use_cache=cfg.cache_baselines)
            job = replace(
                job,
                exchange=slot.exchange,
                config=replace(
                    job.config, compile_baseline=baseline.to_json() if baseline else None
                ),
            )
            broker = Broker(job, slot.reference)
            raw = slot.candidate.run(job.to_json(), on_check=broker)
            extra = raw.get("extra")
            raw["extra"] = {
                **(extra if isinstance(extra, dict) else {}),
                "network_isolated": slot.candidate.network_isolated,
                "filesystem_confined": slot.candidate.filesystem_confined,
                "signals_confined": slot.candidate.signals_confined,
                "pinned_exchange_bytes": slot.candidate.pinned_exchange_bytes,
            }
            result = compose(raw, broker, task, self.config.backend)
            if "unverified_result" in result.flags:
                # Its protocol channel was forged into; nothing it says later can be trusted.
                slot.candidate.kill()
        except WorkerDied as death:
            status: Status = "timeout" if death.timed_out else "runtime_error"
            result = EvalResult(
                status=status, message=death.reason, task=task.name, backend=self.config.backend
            )
        finally:
            self._idle.put(slot)
        return _with_wall_time(result, time.perf_counter() - started)

    def _admit(self, distribution: str) -> None:
        """Refuse a job before it is built: the sandbox is closed, or the distribution unknown."""
        if self._closed:
            raise RuntimeError("this Sandbox is closed")
        if distribution not in INPUT_DISTRIBUTIONS:
            raise ValueError(
                f"distribution must be one of {INPUT_DISTRIBUTIONS}, not {distribution!r}"
            )

    def _prepare(self, job: Job) -> EvalResult | None:
        """Build the candidate's extensions on a compile worker (the GPU job then finds them in
        the cache). A build that hangs past the load deadline ends the evaluation here, without
        taking a GPU; any other failure is left for the GPU job to report in full."""
        key = hashlib.sha256(json.dumps(job.candidate, sort_keys=True).encode()).hexdigest()
        if key in self._prepared:
            return None  # built before: its extensions are in the cache
        worker = self._compilers.get()
        try:
            built, failure = prepare_extensions(
                worker, job.candidate, job.task_name, self.config.backend
            )
        finally:
            self._compilers.put(worker)
        if built:
            self._prepared.add(key)
        return failure

    def evaluate_many(self, jobs: Iterable[tuple[Task, Candidate]]) -> list[EvalResult]:
        """Evaluate many (task, candidate) pairs concurrently; results in input order."""
        futures = [self._executor.submit(self.evaluate, task, cand) for task, cand in jobs]
        return [f.result() for f in futures]

    async def evaluate_async(self, task: Task, candidate: Candidate) -> EvalResult:
        """``evaluate`` for asyncio code (runs on the pool's threads)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.evaluate, task, candidate)

    def warm_up(self) -> None:
        """Start every worker now, compile workers included (otherwise each starts on its
        first job, which then waits seconds for torch to import). Call it before submitting jobs."""
        workers = [w for slot in self._slots for w in (slot.candidate, slot.reference)]
        workers += list(self._compilers.queue)
        with ThreadPoolExecutor(max_workers=len(workers)) as pool:
            list(pool.map(lambda w: w.alive() or w.start(), workers))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._executor.shutdown(wait=True)
        for slot in self._slots:
            slot.kill()
        while not self._compilers.empty():
            self._compilers.get().kill()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


def _rejected(task: Task, backend: str, findings: list[Finding]) -> EvalResult:
    """The verdict on a candidate the static checks refused: every finding, one per line."""
    lines = [str(f) for f in findings[:10]]
    if len(findings) > 10:
        lines.append(f"... and {len(findings) - 10} more")
    return EvalResult(
        status="rejected",
        message="refused before running:\n" + "\n".join(lines),
        task=task.name,
        backend=backend,
        flags=tuple(sorted({f.code for f in findings})),
        extra={
            "findings": [{"code": f.code, "line": f.line, "reason": f.reason} for f in findings]
        },
    )


def prepare_extensions(
    worker: Worker, candidate: str | dict[str, str], task_name: str, backend: str
) -> tuple[bool, EvalResult | None]:
    """Build ``candidate``'s extensions on compile ``worker``: (built, the verdict when the
    build hung past the load deadline). Any other failure is left for the GPU job to report."""
    try:
        answer = PrepareReport.parse(worker.run(PrepareRequest(candidate).to_json()))
    except WorkerDied as death:
        if death.timed_out:
            return False, EvalResult(
                status="timeout",
                message=f"{death.reason} (while building the candidate's extensions)",
                task=task_name,
                backend=backend,
            )
        return False, None
    return answer.outcome == "built", None


def _needs_build(candidate: str | dict[str, str]) -> bool:
    """Whether importing the candidate may compile: a C++/CUDA extension build, or NVRTC (a
    compile worker fills the cubin cache while the GPU worker runs other jobs)."""
    if isinstance(candidate, dict):
        return bool(kernel_sources(candidate)) or "cuda_kernel" in candidate.get("model_new.py", "")
    return any(word in candidate for word in ("cpp_extension", "load_inline", "cuda_kernel"))


def _cuda_arch() -> str:
    """The compute capability of the visible GPUs (``"9.0"``), from ``nvidia-smi``; "" when it
    cannot be read or the GPUs differ (then every worker builds for its own device)."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    caps = [line.strip() for line in out.splitlines() if line.strip()]
    if visible:
        try:
            caps = [caps[int(i)] for i in visible.split(",") if i.strip()]
        except (ValueError, IndexError):
            return ""
    return caps[0] if caps and len(set(caps)) == 1 else ""


def _with_wall_time(result: EvalResult, seconds: float) -> EvalResult:
    data = asdict(result)
    data["wall_seconds"] = seconds
    return EvalResult.from_dict(data)


def evaluate_solutions(sandbox: Sandbox, tasks: Sequence[Task]) -> list[EvalResult]:
    """Evaluate each task's own reference solution for the sandbox's backend."""
    jobs = []
    for task in tasks:
        if sandbox.backend not in task.solutions:
            raise ValueError(f"task {task.name!r} has no {sandbox.backend} solution")
        jobs.append((task, task.solutions[sandbox.backend]))
    return sandbox.evaluate_many(jobs)
