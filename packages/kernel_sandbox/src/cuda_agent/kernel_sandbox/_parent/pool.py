"""Worker processes seen from the parent: start, send a job, enforce deadlines, kill, restart.

Each worker is a session leader (``start_new_session``), so killing its process group takes
down anything the candidate spawned. The parent only ever parses JSON from a worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, Literal

from .._shared.compile import cache_root
from ..config import SandboxConfig
from .gate import HOLDS, LaneHold
from .spawn import LOST, ForkedProcess, WorkerProcess, start_process


class WorkerDied(Exception):
    """The worker exited or broke the protocol; ``reason`` says how."""

    def __init__(self, reason: str, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


_PHASES = ("load", "correctness", "timing")
Role = Literal["candidate", "reference", "compile"]
# A candidate worker's mid-job request (a "check" or "buffer" message) -> the answer to send.
OnCheck = Callable[[dict[str, Any]], dict[str, Any]]


class Worker:
    """One long-lived worker process, (re)started on demand.

    A ``candidate`` worker runs candidate code under the configured limits; a ``reference``
    worker runs only task code (it computes expected outputs) and gets no memory cap; a
    ``compile`` worker imports candidates with no GPU visible, only to build their extensions
    into the shared cache (``cuda_arch`` names the GPU architecture to build for).
    """

    def __init__(
        self, config: SandboxConfig, index: int, role: Role = "candidate", cuda_arch: str = ""
    ) -> None:
        self.config = config
        self.cuda_arch = cuda_arch
        self.index = index
        self.role = role
        self.proc: WorkerProcess | None = None
        self.started_by = ""  # "fork" (from the zygote) or "exec" (a fresh interpreter)
        self.jobs_done = 0.0
        self._buffer = b""
        self.network_isolated = False
        self.filesystem_confined = False
        self.signals_confined = False
        self.pinned_exchange_bytes = 0
        # Where its last start went (seconds): "spawn" (the fork or exec), "ready" (from then to
        # its ready message), and the worker's own stages (``_worker``'s ``start_seconds``).
        self.start_seconds: dict[str, float] = {}
        self.identity: dict[str, str] = {}
        self.pass_fds: tuple[int, ...] = ()  # descriptors the worker inherits (the exchange)
        # Its lane's hold on the device's timing gate (None: every request granted at once),
        # and the lane's name ("device.number") for traces.
        self.gate: LaneHold | None = None
        self.lane = ""
        self.home = ""  # the running worker's home directory (``start``)

    # ------------------------------------------------------------------------- lifecycle
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        threads = str(self.config.threads_per_worker)
        env.update(
            CUDA_AGENT_THREADS=threads,
            CUDA_AGENT_BACKEND=self.config.backend,
            CUDA_AGENT_ROLE=self.role,
            OMP_NUM_THREADS=threads,
            CUDA_AGENT_MAX_OUTPUT=str(self.config.max_output_bytes),
            CUDA_AGENT_MAX_MEMORY=str(
                (self.config.max_memory_bytes or 0) if self.role == "candidate" else 0
            ),
            CUDA_AGENT_ISOLATE_NETWORK="1" if self.config.isolate_network else "0",
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
            # Tools installed beside this interpreter (ninja for load_inline) even when the
            # environment was never activated.
            PATH=os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]),
        )
        # Every tool's cache under ours: the only place besides its home where a candidate
        # worker may write (see _landlock).
        root = cache_root()
        env.update(
            CUPY_CACHE_DIR=str(root / "cupy"),
            TRITON_CACHE_DIR=str(root / "triton"),
            TORCHINDUCTOR_CACHE_DIR=str(root / "inductor"),
            CUDA_CACHE_PATH=str(root / "nv"),
        )
        if self.cuda_arch:
            # Extensions are built for the one architecture of the pool's GPUs, by every worker,
            # so their cache keys agree.
            env["TORCH_CUDA_ARCH_LIST"] = self.cuda_arch
        if self.pass_fds:
            env["CUDA_AGENT_EXCHANGE_FD"] = str(self.pass_fds[0])
        # Lanes share the device: each worker keeps a lane's share of caches (and, running
        # candidates, may allocate a bounded share of the GPU: ``_worker``).
        lanes = self.config.lanes_per_gpu
        env["CUDA_AGENT_LANES"] = str(lanes if isinstance(lanes, int) else 1)
        env["CUDA_AGENT_LANE"] = self.lane or str(self.index)
        if self.role == "compile":
            env["CUDA_VISIBLE_DEVICES"] = ""
        elif self.config.backend == "cuda":
            # One GPU per worker; it sees it as device 0.
            visible = env.get("CUDA_VISIBLE_DEVICES")
            gpus = visible.split(",") if visible else None
            env["CUDA_VISIBLE_DEVICES"] = gpus[self.index % len(gpus)] if gpus else str(self.index)
        return env

    def _forks(self) -> bool:
        """Whether this worker is forked from the zygote (``SandboxConfig.forks_workers``)."""
        return self.config.forks_workers()

    def start(self) -> None:
        # The worker's home (its working and temporary files) is made and removed here: a
        # worker is killed, never asked to exit, so it cannot remove its own.
        self.home = tempfile.mkdtemp(prefix="cuda-agent-worker-")
        env = {**self._env(), "CUDA_AGENT_HOME": self.home}
        began = time.monotonic()
        self.proc, self.started_by = start_process(env, self.pass_fds, fork=self._forks())
        spawned = time.monotonic()
        self._buffer = b""
        self.jobs_done = 0.0
        message = self._read(time.monotonic() + self.config.deadlines.startup, "startup")
        stages = message.get("start_seconds")
        self.start_seconds = {
            "spawn": spawned - began,
            "ready": time.monotonic() - spawned,
            **{
                str(k): float(v)
                for k, v in (stages.items() if isinstance(stages, dict) else ())
                if isinstance(v, (int, float))
            },
        }
        if message.get("type") != "ready":
            self.kill()
            raise WorkerDied(f"worker sent {message!r} instead of ready")
        self.network_isolated = bool(message.get("network_isolated"))
        self.filesystem_confined = bool(message.get("filesystem_confined"))
        self.signals_confined = bool(message.get("signals_confined"))
        self.pinned_exchange_bytes = int(message.get("pinned_exchange_bytes") or 0)
        # What baselines measured by this worker depend on (see _baselines.BaselineCache.key).
        self.identity = {"torch": str(message.get("torch")), "device": str(message.get("device"))}

    def kill(self) -> None:
        """Kill the worker's whole process group, reap it and remove its home."""
        if self.proc is not None:
            # (a forked worker known to be gone was reaped, its group killed, by the zygote:
            # its pid may be another's now)
            if not (isinstance(self.proc, ForkedProcess) and self.proc.poll() is not None):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            self.proc = None
        if self.home:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # ------------------------------------------------------------------------------ a job
    def run(self, job: dict[str, Any], on_check: OnCheck | None = None) -> dict[str, Any]:
        """Send one job and wait for its result, enforcing each phase's deadline.

        A ``check`` message from the worker is answered with ``on_check(message)``, a
        ``gate`` message by holding what it asks of the lane's gate (``_gate``); the time either
        takes does not count against the worker's deadline. Raises ``WorkerDied`` (after
        killing the worker) on a timeout, a crash or garbage.
        """
        start_s = 0.0  # seconds this job waited for its worker to start (a restart after a fault)
        if not self.alive() or self.jobs_done >= self.config.max_jobs_per_worker:
            t0 = time.monotonic()
            self.kill()
            kill_s = time.monotonic() - t0
            self.start()
            start_s = time.monotonic() - t0
            self.start_seconds["kill"] = kill_s
        self._send(job)
        deadlines = self.config.deadlines
        phase, deadline = "load", time.monotonic() + deadlines.load
        while True:
            message = self._read(deadline, phase)
            if message.get("type") == "phase":
                phase = str(message.get("phase"))
                if phase not in _PHASES:
                    self.kill()
                    raise WorkerDied(f"worker announced an unknown phase {phase[:40]!r}")
                deadline = time.monotonic() + getattr(deadlines, phase)
            elif message.get("type") == "gate":
                deadline += self._gate(message.get("hold"))
            elif message.get("type") in ("check", "buffer") and on_check is not None:
                started = time.monotonic()
                answer = on_check(message)
                deadline += time.monotonic() - started
                self._send({"type": "checked", **answer})
            elif message.get("type") == "result":
                # Reference and compile jobs are many small ones per evaluation: only candidate
                # jobs count towards recycling.
                self.jobs_done += 1 if self.role == "candidate" else 0.02
                result = message.get("result")
                if not isinstance(result, dict):
                    self.kill()
                    raise WorkerDied("worker sent a malformed result")
                if start_s and self.role == "candidate":  # the job's own time, not a check's
                    stages = {f"worker_start_{k}": v for k, v in self.start_seconds.items()}
                    add_seconds(result, worker_start=start_s, **stages)
                if message.get("retire") or self._buffer:
                    # A broken CUDA context, or messages past the result (someone else wrote
                    # on the channel): the next job gets a fresh worker.
                    self.kill()
                return result
            else:
                self.kill()
                raise WorkerDied(f"worker sent an unexpected {message.get('type')!r} message")

    def _gate(self, mode: Any) -> float:
        """A worker's request to hold ``mode`` ("read", "write" or "none") of its device's gate:
        granted (answered) once held; "none" is not answered. Returns the seconds waited."""
        if mode not in HOLDS:
            self.kill()
            raise WorkerDied(f"worker asked the timing gate for {str(mode)[:40]!r}")
        waited = self.gate.hold(mode) if self.gate is not None else 0.0
        if mode != "none":
            self._send({"type": "gate", "granted": mode})
        return waited

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self.kill()
            raise WorkerDied(f"worker not accepting messages: {exc}") from exc

    def _read(self, deadline: float, phase: str) -> dict[str, Any]:
        """Next JSON message from the worker, or ``WorkerDied`` at the deadline or on EOF."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not sel.select(timeout=remaining):
                    self.kill()
                    raise WorkerDied(f"the {phase} phase exceeded its deadline", timed_out=True)
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    try:
                        code: int | None = self.proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:  # its output closed, itself still there
                        code = None
                    self.kill()  # what it left running, and its home
                    raise WorkerDied(
                        _describe_exit(code) if code is not None else "the worker closed its output"
                    )
                self._buffer += chunk
                if len(self._buffer) > 16 << 20:
                    self.kill()
                    raise WorkerDied("worker sent an oversized message")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError as exc:
            self.kill()
            raise WorkerDied("worker broke the protocol") from exc
        if not isinstance(message, dict):
            self.kill()
            raise WorkerDied("worker broke the protocol")
        return message


def _describe_exit(code: int) -> str:
    if code == LOST:
        return "the worker's zygote died first: how the worker ended is not known"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = {
            "SIGSEGV": " (segmentation fault: an out-of-bounds access in a kernel?)",
            "SIGKILL": " (killed: out of memory?)",
            "SIGXFSZ": " (wrote more output than allowed)",
            "SIGBUS": " (bus error: misaligned or out-of-bounds access?)",
        }.get(name, "")
        return f"the worker process died of {name}{hint}"
    return f"the worker process exited with code {code}"


def add_seconds(result: dict[str, Any], **seconds: float) -> None:
    """Put ``seconds`` into a job result's ``extra["seconds"]`` (where the job's time went)."""
    extra = result["extra"] if isinstance(result.get("extra"), dict) else {}
    spent = extra["seconds"] if isinstance(extra.get("seconds"), dict) else {}
    result["extra"] = {**extra, "seconds": {**spent, **seconds}}
