"""``Sandbox``: a pool of isolated workers that evaluates candidates against tasks.

    with Sandbox(SandboxConfig(backend="cpu")) as sandbox:
        result = sandbox.evaluate(task, candidate_source)
        results = sandbox.evaluate_many([(task, source), ...])   # all workers busy

Candidate code never runs in this process. Each lane of the pool pairs a *candidate worker*
(runs the candidate, times it) with a *reference worker* (runs only the task, computes the
expected outputs and judges each trial), so expected outputs never live where candidate code
runs. A device (a GPU; on the CPU backend, the host) has ``lanes_per_gpu`` lanes, which build
and check candidates at once, and one timing gate, which lets one lane time at a time with no
other lane's device work beside it (``_parent.gate``). A worker that crashes, hangs past a
phase deadline or hits a CUDA error is killed with its process tree and replaced; the caller
gets a verdict, and the other lanes' jobs go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from types import TracebackType
from typing import Any, ClassVar

from ._parent.baselines import BaselineCache, BaselineStatus, measure_ahead
from ._parent.broker import Broker, compose
from ._parent.compilers import cuda_arch, needs_build, prepare_extensions
from ._parent.gate import LaneHold, TimingGate, guest_gate
from ._parent.job_log import JobLog
from ._parent.lanes import Lane, LanePool, baseline_extra
from ._parent.plan import plan_job
from ._parent.pool import Worker, WorkerDied
from ._parent.trivial import TrivialCache, annotate, output_tolerances, refusal
from ._parent.unjudged import judge_again
from ._shared import exchange as _exchange
from ._shared.protocol import BaselineReport, Job
from .candidates import Candidate, read_candidate
from .config import INPUT_DISTRIBUTIONS, SandboxConfig
from .result import EvalResult, Status, alone_rerun, with_extra, with_wall_time
from .static_checks import rejection, static_findings
from .tasks import Task


class Sandbox:
    """Owns the worker pool; use as a context manager (or call ``close``). With
    ``config.ray_address`` set it is a ``RaySandbox``: the same API on a Ray cluster."""

    # What ``Sandbox(config)`` makes when ``config.ray_address`` is set: the subclass declared
    # with ``on_cluster=True`` (``class RaySandbox(Sandbox, on_cluster=True)``). The package's
    # ``__init__`` imports ``ray_sandbox``, so it is known before any sandbox is made, and this
    # module does not import the module that subclasses it.
    _on_cluster: ClassVar[type[Sandbox] | None] = None

    def __init_subclass__(cls, *, on_cluster: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if on_cluster:
            Sandbox._on_cluster = cls

    def __new__(cls, config: SandboxConfig | None = None, job_log: str | None = None) -> Sandbox:
        if cls is Sandbox and config is not None and config.ray_address:
            if Sandbox._on_cluster is None:  # only where the package's __init__ did not run
                raise RuntimeError("ray_address is set: import cuda_agent.kernel_sandbox first")
            return super().__new__(Sandbox._on_cluster)
        return super().__new__(cls)

    def __init__(self, config: SandboxConfig | None = None, job_log: str | None = None) -> None:
        """``job_log``: where the job log goes (``_parent/job_log.py``); None: where
        ``$CUDA_AGENT_JOB_LOG`` says, else nowhere."""
        self.config = cfg = (config or SandboxConfig()).resolved()
        assert isinstance(cfg.lanes_per_gpu, int)
        gates = [TimingGate(cfg.timing_gate, cfg.timing_gather_s) for _ in range(cfg.workers)]
        lanes = [
            Lane(
                device,
                number,
                Worker(cfg, device, "candidate"),
                Worker(cfg, device, "reference"),
                _exchange.create(cfg.max_output_tensor_bytes),
                LaneHold(gates[device]),
            )
            for number in range(cfg.lanes_per_gpu)
            for device in range(cfg.workers)
        ]
        self._lanes = LanePool(lanes, gates)  # workers start lazily, on first use
        # Compile workers build extensions ahead of the GPU job, with no GPU, for the GPU's
        # architecture (read without creating a CUDA context here).
        self._compilers: queue.Queue[Worker] = queue.Queue()
        arch = cuda_arch() if self.config.compile_workers else ""
        if arch:
            self.build_for(arch)
            for i in range(self.config.compile_workers):
                self._compilers.put(Worker(self.config, i, "compile", cuda_arch=arch))
        self._n_compilers = self._compilers.qsize()
        self._prepared: set[str] = set()  # candidates whose extensions a compile worker built
        # Enough threads that jobs can build on compile workers while others hold the lanes.
        self._executor = ThreadPoolExecutor(
            max_workers=len(lanes) + self._n_compilers, thread_name_prefix="sandbox"
        )
        self._closed = False
        self._lock = threading.Lock()
        self._baselines = BaselineCache()
        self._trivial = TrivialCache()  # each task's trivial-answer rule (``_parent.trivial``)
        self._aliases: dict[str, int] = {}  # caller's device -> the sandbox's (alias_device)
        self._job_log = JobLog(job_log) if job_log else JobLog.from_env()

    def build_for(self, arch: str) -> None:
        """The candidate workers build extensions for ``arch`` (``TORCH_CUDA_ARCH_LIST``), as the
        compile workers do, so both build the same thing and a built extension is loaded, not
        built again (left unset, torch derives other nvcc flags from the device: "9.0+PTX"
        against "9.0"). The pool calls it when it has compile workers; a Ray slot actor, whose
        compile workers are other actors, calls it with their architecture."""
        for lane in self._lanes.lanes:
            lane.candidate.cuda_arch = arch

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
        job_id = self._job_log.arrive(task.name)
        return self._logged(job_id, task, candidate, sizes, distribution, measure_time)

    def _logged(
        self,
        job_id: int,
        task: Task,
        candidate: Candidate,
        sizes: Mapping[str, int] | None = None,
        distribution: str = "normal",
        measure_time: bool = True,
    ) -> EvalResult:
        """``evaluate``'s job ``job_id`` (its arrival in the job log), its end logged."""
        try:
            result = self._evaluate(task, candidate, job_id, sizes, distribution, measure_time)
        except BaseException as exc:
            self._job_log.end(job_id, task.name, f"raised {type(exc).__name__}")
            raise
        self._job_log.end(job_id, task.name, result.status, result.wall_seconds, result.extra)
        return result

    def _evaluate(
        self,
        task: Task,
        candidate: Candidate,
        job_id: int,
        sizes: Mapping[str, int] | None,
        distribution: str,
        measure_time: bool,
    ) -> EvalResult:
        """``evaluate``'s work (``job_id``: its number in the job log)."""
        source = read_candidate(candidate)
        started = time.perf_counter()
        if self.config.static_checks:
            findings = static_findings(source, allowed_torch_ops=self.config.allowed_torch_ops)
            if findings:
                return with_wall_time(
                    rejection(task.name, self.config.backend, findings),
                    time.perf_counter() - started,
                )
        job = plan_job(task, source, self.config, sizes, distribution, measure_time)
        if self._n_compilers and needs_build(source):
            failed = self._prepare(job)
            if failed is not None:
                return with_wall_time(failed, time.perf_counter() - started)
        lane = self._lanes.take(task.digest)
        self._job_log.start(job_id, task.name, lane.name)
        # its candidate worker may use the room admission found for it (_parent/lanes.py)
        room = self._lanes.room_share(lane, task.digest)
        job = replace(job, config=replace(job.config, memory_share=room))
        try:
            result = self._run(task, job, lane, measure_time, caller_sizes=bool(sizes))
            why, why_not = alone_rerun(result) if self.config.lanes_per_gpu != 1 else ("", "")
            if why_not:
                result = with_extra(result, no_rerun_alone=why_not)
            elif why:
                # Once more with the device alone: the other lanes' jobs finished (their memory
                # given back, LanePool.exclusive) and the gate held throughout; the candidate
                # worker's cap (its share of the GPU) is lifted (``result.alone_rerun``).
                alone = replace(job, config=replace(job.config, device_alone=True))
                with self._lanes.exclusive(lane), lane.hold.alone():
                    self._job_log.alone(job_id, task.name, lane.name)
                    again = self._run(task, alone, lane, measure_time, caller_sizes=bool(sizes))
                result = with_extra(again, rerun_alone=why)
            if (
                result.status == "unjudged"
                and "reference_failed_check" in result.extra
                and not sizes
            ):
                # (at sizes the caller chose, as property checks do, the reference failing is
                # that draw's limit: the checks pass over it, ``properties.py``)
                rerun = partial(self._run, task, lane=lane, measure_time=measure_time)
                result = judge_again(rerun, job, lane, self._lanes, result)
            self._lanes.observe(task.digest, lane.device, result.extra)  # its memory footprint
        finally:
            self._lanes.put(lane)  # releases whatever the lane still held of the gate
        return with_wall_time(result, time.perf_counter() - started)

    def _run(
        self, task: Task, job: Job, lane: Lane, measure_time: bool, caller_sizes: bool = False
    ) -> EvalResult:
        """The planned ``job`` on ``lane``: the task's trivial-answer rule (a task an answer that
        computes nothing passes is refused, at sizes the caller did not choose), its baseline,
        then the candidate worker's run with each check brokered to the lane's reference worker."""
        try:
            cfg = self.config
            rule = self._trivial.get(job, lane.reference)
            if rule.rule == "refused" and not caller_sizes:
                return refusal(rule, task.name, cfg.backend)
            baseline = None
            if measure_time and cfg.time_compile:
                # Timed by the trusted reference worker (None if it could not be: then no
                # compile time is reported).
                baseline = self._baselines.get(job, lane.reference, use_cache=cfg.cache_baselines)
                self._learn(task, lane, baseline)
            job = replace(
                job,
                exchange=lane.exchange,
                config=replace(
                    job.config, compile_baseline=baseline.to_json() if baseline else None
                ),
            )
            broker = Broker(job, lane.reference, output_tolerances=output_tolerances(rule))
            raw = lane.candidate.run(job.to_json(), on_check=broker)
            extra = raw.get("extra")
            raw["extra"] = {
                **(extra if isinstance(extra, dict) else {}),
                "network_isolated": lane.candidate.network_isolated,
                "filesystem_confined": lane.candidate.filesystem_confined,
                "signals_confined": lane.candidate.signals_confined,
                "pinned_exchange_bytes": lane.candidate.pinned_exchange_bytes,
                "lane": lane.name,
            }
            result = annotate(compose(raw, broker, task, cfg.backend), rule, not caller_sizes)
            if "unverified_result" in result.flags:
                # Its protocol channel was forged into; nothing it says later can be trusted.
                lane.candidate.kill()
        except WorkerDied as death:
            status: Status = "timeout" if death.timed_out else "runtime_error"
            result = EvalResult(
                status=status, message=death.reason, task=task.name, backend=self.config.backend
            )
        return result

    def _learn(self, task: Task, lane: Lane, baseline: BaselineReport | None) -> None:
        """What ``task``'s baseline measurement needed on the GPU, for the lanes' admission by
        memory before any of its jobs has run (``_parent/lanes.py``)."""
        if baseline is not None:
            extra = baseline_extra(baseline.peak_gpu_bytes, baseline.gpu_total_bytes)
            self._lanes.observe(task.digest, lane.device, extra)

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
        """Evaluate many (task, candidate) pairs concurrently; results in input order. (Each
        job arrives in the job log now, though it may wait for a thread of the pool.)"""
        self._admit("normal")
        log = self._job_log
        futures = [self._executor.submit(self._logged, log.arrive(task.name), task, cand)
                   for task, cand in jobs]  # fmt: skip
        return [f.result() for f in futures]

    def measure_baselines(
        self, tasks: Sequence[Task], progress: Callable[[BaselineStatus], None] | None = None
    ) -> list[BaselineStatus]:
        """Measure ahead the ``torch.compile`` baselines of ``tasks`` that are not kept yet, in
        parallel lanes (each timing still alone on its device), and keep them on disk per task,
        sizes, GPU model and torch version, as an evaluation would: evaluations of these tasks
        then wait for none. A task measured before is ``kept`` at once, so a run killed midway
        resumes where it stopped. With ``time_compile`` off there is nothing to measure
        (``off``). Results in task order; ``progress`` is called with each as it is known."""
        cfg = self.config

        def one(task: Task) -> BaselineStatus:
            if not (cfg.time_compile and cfg.cache_baselines):
                status = BaselineStatus(task.name, "off")
            else:
                job = plan_job(task, "", cfg, None, "normal", True)
                lane = self._lanes.take(task.digest)
                try:
                    status, found = measure_ahead(self._baselines, job, lane, self._lanes)
                    self._learn(task, lane, found)
                finally:
                    self._lanes.put(lane)
            if progress is not None:
                progress(status)
            return status

        self._admit("normal")
        return list(self._executor.map(one, tasks))

    def gate_stats(self) -> list[dict[str, float]]:
        """Per device: timings let through, their batches, readers let in past a stalled
        drain, and the seconds lanes waited to read and to time, and guests (``device_work``)
        to enter (``TimingGate.stats``)."""
        return [g.stats() for g in self._lanes.gates]

    @contextlib.contextmanager
    def device_work(self, device: str) -> Iterator[None]:
        """Keep the sandbox's timings off the body's own work on ``device`` (the caller's torch
        device: ``"cpu"``, ``"cuda"``, ``"cuda:K"``; the trainer's policy sampling): no timing
        runs beside it, the lanes' correctness work goes on (a guest of the device's gate,
        ``_parent/gate.py``). Where the sandbox does not time on ``device``, nothing is held."""
        known = self._aliases.get(device)
        gates = self._lanes.gates
        gate = gates[known] if known is not None else guest_gate(gates, self.backend, device)
        with gate.guest() if gate is not None else contextlib.nullcontext():
            yield

    def alias_device(self, caller: str, device: int) -> None:
        """Say that the caller's torch device ``caller`` (``"cuda:1"``) is the sandbox's device
        ``device`` where their orders differ (``device_work`` otherwise takes the caller's
        ``cuda:K`` for the sandbox's device K): a data-parallel process whose sandbox has only
        its own GPU, which is its ``cuda:LOCAL_RANK``. ValueError for a device it lacks."""
        if not 0 <= device < len(self._lanes.gates):
            raise ValueError(f"the sandbox has {len(self._lanes.gates)} device(s), not {device}")
        self._aliases[caller] = device

    async def evaluate_async(self, task: Task, candidate: Candidate) -> EvalResult:
        """``evaluate`` for asyncio code (runs on the pool's threads)."""
        self._admit("normal")
        job_id, loop = self._job_log.arrive(task.name), asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._logged, job_id, task, candidate)

    def warm_up(self) -> None:
        """Start every worker now, compile workers included (otherwise each starts on its
        first job, which then waits seconds for torch to import). Call it before submitting jobs."""
        workers = [w for lane in self._lanes.lanes for w in (lane.candidate, lane.reference)]
        workers += list(self._compilers.queue)
        with ThreadPoolExecutor(max_workers=len(workers)) as pool:
            list(pool.map(lambda w: w.alive() or w.start(), workers))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._executor.shutdown(wait=True)
        self._lanes.kill()
        self._job_log.close()
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


def evaluate_solutions(sandbox: Sandbox, tasks: Sequence[Task]) -> list[EvalResult]:
    """Evaluate each task's own reference solution for the sandbox's backend."""
    jobs = []
    for task in tasks:
        if sandbox.backend not in task.solutions:
            raise ValueError(f"task {task.name!r} has no {sandbox.backend} solution")
        jobs.append((task, task.solutions[sandbox.backend]))
    return sandbox.evaluate_many(jobs)
