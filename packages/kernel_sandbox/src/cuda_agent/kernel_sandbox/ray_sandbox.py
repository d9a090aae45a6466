"""``RaySandbox``: the sandbox's pool on a Ray cluster, with ``Sandbox``'s API and verdicts.

    config = SandboxConfig(backend="cuda", ray_address="auto")   # an existing cluster
    with Sandbox(config) as sandbox:                             # a RaySandbox
        results = sandbox.evaluate_many(jobs)

``pip install "cuda-agent-kernel-sandbox[ray]"``. Three kinds of actor, created by the sandbox:

- **slot actors**, ``workers`` of them (0: one per GPU on CUDA, one per two CPUs on the CPU
  backend), each a local one-device ``Sandbox`` of ``lanes_per_gpu`` lanes (``auto``: from its
  node's CPUs and memory on CUDA; one on the CPU) on its node, with the same isolation. On
  CUDA each holds one GPU (``num_gpus=1``) and a CPU per lane; its timing gate lets one lane
  time at a time, so no two timings ever share a GPU.
- **compile actors** (CUDA, ``compile_workers`` of them; -1: one per slot actor, at most 8),
  CPU-only, which build a candidate's extensions and NVRTC cubins for the GPUs' architecture
  into the shared cache (``$CUDA_AGENT_CACHE``: on several machines, a path every node mounts)
  before a GPU slot is taken, as the local pool's compile workers do.
- **the scheduler**, an asyncio actor that every client of the sandbox talks to (a
  ``RaySandbox`` pickles as a handle to it). It keeps the idle lanes in one queue, so that
  every GPU is busy while jobs wait.

An actor that dies mid-job (its node lost, the process killed; candidate crashes are verdicts
already) is replaced by a fresh one, and its job runs again on another slot; a job whose slot
dies twice gets a ``runtime_error`` verdict naming both deaths. Each job is answered once.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ._parent.job_log import ENV as JOB_LOG_ENV
from ._parent.ray_actors import Scheduler, first_line, import_ray
from .candidates import Candidate, read_candidate
from .config import SandboxConfig, auto_lanes
from .result import EvalResult
from .sandbox import BaselineStatus, Sandbox
from .tasks import Task


def connect(address: str) -> Any:
    """``ray.init`` for ``address`` unless this process is connected already ("local": a new
    local cluster; "auto": the running cluster)."""
    ray = import_ray()
    if not ray.is_initialized():
        ray.init(
            address=None if address == "local" else address,
            ignore_reinit_error=True,
            log_to_driver=False,
            include_dashboard=False,
        )
    return ray


def cluster_config(
    config: SandboxConfig, resources: Mapping[str, float], nodes: int = 1
) -> SandboxConfig:
    """``config`` with ``auto`` decided for the cluster (``resources``: ``ray.cluster_resources()``,
    over ``nodes`` machines) rather than for this host: the backend, the number of slot actors
    and compile actors, and each slot's threads (a node's CPUs over the slots it holds, the
    slots spread evenly)."""
    gpus = int(resources.get("GPU", 0))
    cpus = max(1, int(resources.get("CPU", 1)))
    nodes = max(1, nodes)
    backend = config.backend
    if backend == "auto":
        backend = "cuda" if gpus else "cpu"
    if backend == "cuda" and not gpus:
        raise ValueError("backend='cuda' but the Ray cluster has no GPU; use backend='cpu'")
    workers = config.workers or (gpus if backend == "cuda" else max(1, cpus // 2))
    compilers = config.compile_workers
    if backend != "cuda":
        compilers = 0
    elif compilers < 0:
        compilers = min(8, workers)
    per_node = -(-workers // nodes)
    lanes = config.lanes_per_gpu
    if lanes == "auto":
        # CUDA: from a node's CPUs and memory per GPU slot (GPU memory is not a Ray resource:
        # an H200's is assumed); the CPU backend's slot actors are one lane each, as before.
        memory = int(resources.get("memory", 0)) // nodes
        lanes = auto_lanes(cpus // nodes, memory, 139 << 30, per_node) if gpus else 1
    threads = config.threads_per_worker or max(1, (cpus // nodes) // (per_node * lanes))
    return replace(
        config,
        backend=backend,
        workers=workers,
        lanes_per_gpu=lanes,
        compile_workers=compilers,
        threads_per_worker=threads,
    )


ROOM_WAIT_S = 10.0  # how long a new pool waits for the resources of actors being torn down


def _check_room(
    config: SandboxConfig,
    available: Callable[[], Mapping[str, float]],
    wait_s: float = ROOM_WAIT_S,
) -> None:
    """Refuse a pool the cluster cannot place (an actor Ray cannot place waits for ever, and so
    do its jobs): each slot actor takes a CPU, and on CUDA a GPU; each compile actor a CPU.
    Actors killed just before (a sandbox closed a moment ago) give their resources back
    asynchronously, so ``available`` (Ray's ``available_resources``) is asked again for up to
    ``wait_s`` seconds before refusing."""
    compilers = max(0, config.compile_workers) if config.backend == "cuda" else 0
    lanes = config.lanes_per_gpu if isinstance(config.lanes_per_gpu, int) else 1
    needs = {"CPU": config.workers * lanes + compilers}
    if config.backend == "cuda":
        needs["GPU"] = config.workers
    deadline = time.monotonic() + wait_s
    while True:
        have = available()
        short = [(u, float(have.get(u, 0.0))) for u, n in needs.items() if have.get(u, 0.0) < n]
        if not short:
            return
        if time.monotonic() >= deadline:
            unit, free = short[-1]  # the GPUs first
            holders = f"{config.workers} slot actors" + (f" of {lanes} lanes" if lanes > 1 else "")
            if unit == "CPU" and compilers:
                holders += f" and {compilers} compile actors"
            raise ValueError(
                f"the Ray cluster has {free:g} free {unit}s; the sandbox's {holders} need one "
                "each: set SandboxConfig.workers (or compile_workers), or close the sandboxes "
                "or actors that hold them"
            )
        time.sleep(0.1)


# ----------------------------------------------------------------------------------- client
class RaySandbox(Sandbox, on_cluster=True):
    """``Sandbox``'s API over a Ray cluster (``SandboxConfig.ray_address``: "auto" for the
    running cluster, "local" for a new one on this machine, or an address). ``Sandbox(config)``
    returns one when the config names an address (``on_cluster``). Picklable: a copy sent to
    another Ray process (a rollout actor) shares the same scheduler and slots."""

    def __init__(self, config: SandboxConfig | None = None, job_log: str | None = None) -> None:
        config = config or SandboxConfig(ray_address="local")
        if not config.ray_address:
            raise ValueError("RaySandbox needs SandboxConfig.ray_address ('auto', 'local', ...)")
        ray = connect(config.ray_address)
        alive = sum(1 for node in ray.nodes() if node.get("Alive"))
        self.config = cluster_config(config, ray.cluster_resources(), alive).resolved()
        _check_room(self.config, ray.available_resources)
        env = {k: v for k, v in os.environ.items() if k in ("CUDA_AGENT_CACHE", JOB_LOG_ENV)}
        if job_log:  # the slot actors' pools write it (on this machine's cluster: one file)
            env[JOB_LOG_ENV] = str(job_log)
        scheduler = ray.remote(Scheduler).options(num_cpus=0, max_concurrency=10_000)
        self._scheduler = scheduler.remote(self.config, env)
        self._owner = True
        self._closed = False

    def __reduce__(self) -> Any:
        return (_attach, (self.config, self._scheduler))

    def _submit(
        self,
        task: Task,
        candidate: Candidate,
        sizes: Mapping[str, int] | None = None,
        distribution: str = "normal",
        measure_time: bool = True,
    ) -> Any:
        self._admit(distribution)
        options = {"sizes": sizes, "distribution": distribution, "measure_time": measure_time}
        return self._scheduler.evaluate.remote(task, read_candidate(candidate), options)

    def evaluate(
        self,
        task: Task,
        candidate: Candidate,
        *,
        sizes: Mapping[str, int] | None = None,
        distribution: str = "normal",
        measure_time: bool = True,
    ) -> EvalResult:
        """As ``Sandbox.evaluate``; the job runs on a slot actor of the cluster."""
        ref = self._submit(task, candidate, sizes, distribution, measure_time)
        return self._get(ref)

    def _get(self, refs: Any) -> Any:
        ray = import_ray()
        try:
            return ray.get(refs)
        except ray.exceptions.RayActorError as death:
            raise RuntimeError(
                f"the sandbox's scheduler actor is gone ({first_line(death)}); its jobs have no "
                "verdict: close this RaySandbox and open a new one"
            ) from death

    def evaluate_many(self, jobs: Iterable[tuple[Task, Candidate]]) -> list[EvalResult]:
        """Every job submitted at once (the scheduler keeps every slot busy); input order."""
        refs = [self._submit(task, candidate) for task, candidate in jobs]
        return list(self._get(refs))

    async def evaluate_async(self, task: Task, candidate: Candidate) -> EvalResult:
        return await self._submit(task, candidate)

    def measure_baselines(
        self, tasks: Sequence[Task], progress: Callable[[BaselineStatus], None] | None = None
    ) -> list[BaselineStatus]:
        """As ``Sandbox.measure_baselines``, over the cluster's slot actors (every one at once);
        ``progress`` is called in this process as each task's status arrives."""
        self._admit("normal")
        refs = [self._scheduler.measure_baseline.remote(task) for task in tasks]
        if progress is not None:
            ray, waiting = import_ray(), list(refs)
            while waiting:
                done, waiting = ray.wait(waiting, num_returns=1)
                progress(self._get(done[0]))
        return list(self._get(refs))

    @contextlib.contextmanager
    def device_work(self, device: str) -> Iterator[None]:
        """Nothing is held: the timing gates live in the slot actors' processes, which the
        caller's device work does not reach (a caller sampling on a GPU that a slot actor
        times on shares it with those timings)."""
        yield

    def alias_device(self, caller: str, device: int) -> None:
        """Nothing to alias (``device_work`` holds nothing here)."""

    def warm_up(self) -> None:
        import_ray().get(self._scheduler.warm_up.remote())

    def actors(self) -> list[Any]:
        """The slot actors' handles (for tests and monitoring)."""
        return list(import_ray().get(self._scheduler.actors.remote()))

    def stats(self) -> dict[str, Any]:
        return dict(import_ray().get(self._scheduler.stats.remote()))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owner:
            ray = import_ray()
            try:
                ray.get(self._scheduler.shutdown.remote())
                ray.kill(self._scheduler, no_restart=True)
            except Exception:  # the cluster may be gone already
                pass

    def __del__(self) -> None:
        if not getattr(self, "_closed", True) and getattr(self, "_owner", False):
            self.close()


def _attach(config: SandboxConfig, scheduler: Any) -> RaySandbox:
    """A ``RaySandbox`` in another process: the same scheduler, not its owner (closing it
    leaves the actors to the process that made them)."""
    sandbox = object.__new__(RaySandbox)
    sandbox.config = config
    sandbox._scheduler = scheduler
    sandbox._owner = False
    sandbox._closed = False
    return sandbox
