"""The Ray actors behind ``RaySandbox`` (``ray_sandbox.py``): a slot actor per GPU (a local
one-device ``Sandbox`` of ``lanes_per_gpu`` lanes), CPU-only compile actors, and the scheduler
every client talks to, which hands each job to an idle lane, replaces actors that die and
answers every job once."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from dataclasses import replace
from typing import Any

from ..config import SandboxConfig
from ..result import EvalResult, with_extra
from ..sandbox import BaselineStatus, Sandbox
from ..static_checks import static_findings
from ..tasks import Task
from .compilers import cuda_arch, needs_build, prepare_extensions
from .pool import Worker

MAX_ATTEMPTS = 2  # slots a job may lose before its verdict is runtime_error


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "SandboxConfig.ray_address needs Ray: pip install 'cuda-agent-kernel-sandbox[ray]'"
        ) from exc
    return ray


class SlotActor:
    """One slot of the pool: a one-slot local ``Sandbox`` on this actor's node, whose candidate
    worker builds for the architecture the compile actors build for (``Sandbox.build_for``)."""

    def __init__(self, config: SandboxConfig) -> None:
        self.sandbox = Sandbox(config)
        self.arch = cuda_arch() if self.sandbox.backend == "cuda" else ""
        self.sandbox.build_for(self.arch)

    def evaluate(self, task: Task, source: Any, options: dict[str, Any]) -> EvalResult:
        return self.sandbox.evaluate(task, source, **options)

    def warm_up(self) -> int:
        self.sandbox.warm_up()
        return os.getpid()

    def measure_baseline(self, task: Task) -> BaselineStatus:
        return self.sandbox.measure_baselines([task])[0]

    def cuda_arch(self) -> str:
        return self.arch

    def pid(self) -> int:
        return os.getpid()


class CompileActor:
    """Builds candidates' extensions for ``cuda_arch`` into the shared cache, with no GPU."""

    def __init__(self, config: SandboxConfig, index: int, cuda_arch: str) -> None:
        self.worker = Worker(config, index, "compile", cuda_arch=cuda_arch)
        self.backend = config.backend

    def prepare(self, source: Any, task_name: str) -> tuple[bool, EvalResult | None]:
        return prepare_extensions(self.worker, source, task_name, self.backend)


class Scheduler:
    """Hands each job to an idle slot actor (after a compile actor built it, on CUDA), replaces
    actors that die, and answers every job once."""

    def __init__(self, config: SandboxConfig, env: dict[str, str]) -> None:
        ray = import_ray()
        self.ray = ray
        self.config = config
        lanes = config.lanes_per_gpu if isinstance(config.lanes_per_gpu, int) else 1
        self.inner = replace(
            config, ray_address=None, workers=1, compile_workers=0, lanes_per_gpu=lanes
        )
        self.options: dict[str, Any] = {"runtime_env": {"env_vars": env}} if env else {}
        # A slot actor runs its lanes' jobs at once (a thread each), a CPU per lane.
        self.options.update(num_cpus=lanes, max_concurrency=lanes)
        if config.backend == "cuda":
            self.options.update(num_gpus=1)
        self.slots = [self._new_slot() for _ in range(config.workers)]
        self.idle: asyncio.Queue[int] = asyncio.Queue()
        for _ in range(lanes):
            for i in range(len(self.slots)):
                self.idle.put_nowait(i)
        self.deaths: list[str] = []
        self.compilers: list[Any] = []
        self.compile_idle: asyncio.Queue[int] = asyncio.Queue()
        self.prepared: set[str] = set()
        self._compile_started = config.compile_workers == 0
        self.arch = ""

    def _new_slot(self) -> Any:
        remote = self.ray.remote(SlotActor)
        return remote.options(**self.options).remote(self.inner)

    async def _start_compilers(self) -> None:
        """Compile actors, for the architecture slot actor 0 reads on its node."""
        self._compile_started = True
        self.arch = await self.slots[0].cuda_arch.remote()
        if not self.arch:
            return
        for i in range(self.config.compile_workers):
            self.compilers.append(self._new_compiler(i))
            self.compile_idle.put_nowait(i)

    def _new_compiler(self, index: int) -> Any:
        env = self.options.get("runtime_env")
        remote = self.ray.remote(CompileActor).options(
            num_cpus=1, num_gpus=0, **({"runtime_env": env} if env else {})
        )
        return remote.remote(self.inner, index, self.arch)

    async def _prepare(self, source: Any, task_name: str) -> EvalResult | None:
        key = hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()
        if key in self.prepared:
            return None
        i = await self.compile_idle.get()
        try:
            built, failure = await self.compilers[i].prepare.remote(source, task_name)
        except self.ray.exceptions.RayActorError as death:
            self.compilers[i] = self._new_compiler(i)  # a fresh one takes its place
            self.deaths.append(f"compile actor {i}: {first_line(death)}")
            return None  # the GPU job builds it then, and reports any failure in full
        finally:
            self.compile_idle.put_nowait(i)
        if built:
            self.prepared.add(key)
        return failure

    async def evaluate(self, task: Task, source: Any, options: dict[str, Any]) -> EvalResult:
        if not self._compile_started and self.config.backend == "cuda":
            await self._start_compilers()
        if self.compilers and needs_build(source) and not self._refused(source):
            failed = await self._prepare(source, task.name)
            if failed is not None:
                return failed
        losses: list[str] = []
        while True:
            i = await self.idle.get()
            actor = self.slots[i]
            try:
                result = await actor.evaluate.remote(task, source, options)
            except self.ray.exceptions.RayActorError as death:
                reason = f"slot actor {i} died mid-job: {first_line(death)}"
                losses.append(reason)
                self.deaths.append(reason)
                self.slots[i] = self._new_slot()  # a fresh actor takes its place
                if len(losses) >= MAX_ATTEMPTS:
                    return EvalResult(
                        status="runtime_error",
                        message="the sandbox lost the job's slot twice: " + "; ".join(losses),
                        task=task.name,
                        backend=self.config.backend,
                        extra={"ray": {"actor_deaths": losses}},
                    )
                continue
            finally:
                self.idle.put_nowait(i)
            return with_extra(result, ray={"actor_deaths": losses}) if losses else result

    async def measure_baseline(self, task: Task) -> BaselineStatus:
        """``task``'s baseline, measured (or found kept) by an idle lane of a slot actor; the
        cache is shared, so any slot's later evaluations find it."""
        i = await self.idle.get()
        try:
            return await self.slots[i].measure_baseline.remote(task)
        except self.ray.exceptions.RayActorError as death:
            reason = f"slot actor {i} died measuring a baseline: {first_line(death)}"
            self.deaths.append(reason)
            self.slots[i] = self._new_slot()
            return BaselineStatus(task.name, "failed", message=reason)
        finally:
            self.idle.put_nowait(i)

    def _refused(self, source: Any) -> bool:
        """The static checks refuse it anyway: no build for it (the slot answers at once)."""
        if not self.config.static_checks:
            return False
        return bool(static_findings(source, allowed_torch_ops=self.config.allowed_torch_ops))

    async def warm_up(self) -> list[int]:
        return list(await asyncio.gather(*(s.warm_up.remote() for s in self.slots)))

    def actors(self) -> list[Any]:
        """The slot actors now (tests kill one mid-job)."""
        return list(self.slots)

    def stats(self) -> dict[str, Any]:
        return {"slots": len(self.slots), "compilers": len(self.compilers), "deaths": self.deaths}

    def shutdown(self) -> None:
        for actor in [*self.slots, *self.compilers]:
            self.ray.kill(actor, no_restart=True)
        self.slots, self.compilers = [], []


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
