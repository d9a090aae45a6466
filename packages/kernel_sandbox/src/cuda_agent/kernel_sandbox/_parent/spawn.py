"""How a worker process is made (``SandboxConfig.worker_start``).

- ``exec``: a fresh interpreter, ``python -m cuda_agent.kernel_sandbox._worker`` (2.2 s on a
  2-core machine before it is ready, most of it importing torch and ``torch._dynamo``).
- ``fork``: a fork of this process's zygote (``_zygote``: an interpreter that has imported what
  a worker imports and forks workers from that state; 0.02 s there). The worker then
  confines itself as a fresh one does. A zygote starts with a worker's environment and serves
  every worker of this process whose environment agrees on what libraries read as they load
  (OpenMP's and BLAS's thread counts, ``PYTHONPATH``, the visible GPUs: ``_key``); it is started
  at the first such fork and again if it dies, and closed ``LINGER_S`` seconds after the last
  forked worker ends (``hold()`` keeps it); a process forked from this one makes its own.
- ``auto``: ``$CUDA_AGENT_WORKER_START`` where set ("fork" or "exec"), else ``fork`` (on an
  H100 a restart after a fault took 0.66 s forked against 11.6 s fresh).

Either way the parent gets a handle with ``subprocess.Popen``'s ``pid``, ``stdin``,
``stdout``, ``poll()`` and ``wait(timeout)`` (the exit code, minus the signal that killed it).
Where the zygote cannot serve (it failed to start, or found the CUDA driver loaded), workers
are started as ``exec`` and the reason is kept in ``fork_unavailable``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import IO, Any, Protocol

LOST = 1000  # the exit code of a worker whose zygote died first: not known
_STARTUP_S = 120.0  # the zygote's imports; a guard, not an expectation (2.4 s on 2 idle cores)


class WorkerProcess(Protocol):
    pid: int
    stdin: IO[bytes] | None
    stdout: IO[bytes] | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def start_process(
    env: Mapping[str, str], pass_fds: Sequence[int], fork: bool
) -> tuple[WorkerProcess, str]:
    """A worker process with ``env`` and the descriptors ``pass_fds``, forked from the zygote
    when ``fork`` (and it can), else a fresh interpreter; and how it was made."""
    for _attempt in range(2 if fork else 0):  # (a zygote lost as we asked: a new one)
        zygote = _reserve(env)
        if zygote is None:
            break
        try:
            return zygote.spawn(env, pass_fds), "fork"
        except ZygoteRefused:
            break  # it could not fork (out of processes?): so would a fresh start, likely
        except ZygoteError:
            _drop(zygote)
        finally:
            _release()
    started = _on_spawner_thread(
        lambda: subprocess.Popen(
            [sys.executable, "-m", "cuda_agent.kernel_sandbox._worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**env, "CUDA_AGENT_PARENT_PID": str(os.getpid())},
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    )
    return started, "exec"


_spawner: tuple[int, queue.SimpleQueue[Any]] | None = None
_spawner_lock = threading.Lock()


def _on_spawner_thread(start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """``start()`` on this process's spawner thread, which lives as long as the process: a fresh
    worker asks for SIGKILL when its parent ends (``limits.die_with_parent``), and the kernel
    means the *thread* that started it (a pool's thread that ends would kill it)."""
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner[0] != os.getpid():
            requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
            threading.Thread(target=_spawn_forever, args=(requests,), daemon=True,
                             name="cuda-agent-spawner").start()  # fmt: skip
            _spawner = (os.getpid(), requests)
        requests = _spawner[1]
    done: Future[subprocess.Popen[bytes]] = Future()
    requests.put((start, done))
    return done.result()


def _spawn_forever(requests: queue.SimpleQueue[Any]) -> None:
    while True:
        start, done = requests.get()
        try:
            done.set_result(start())
        except BaseException as exc:  # the caller raises it
            done.set_exception(exc)


class ZygoteError(Exception):
    """The zygote could not start or did not answer: it is not used again."""


class ZygoteRefused(Exception):
    """The zygote answered that it could not fork this worker (it serves on)."""


class ForkedProcess:
    """A worker forked by the zygote: not this process's child, so its exit code comes from the
    zygote (which reaps it) on ``status``, a socket of its own."""

    def __init__(self, pid: int, stdin: IO[bytes], stdout: IO[bytes], status: socket.socket):
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._status = status
        self.zygote: Zygote | None = None  # the one that forked it

    def _collect(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        with selectors.DefaultSelector() as sel:
            sel.register(self._status, selectors.EVENT_READ)
            if not sel.select(timeout):
                return None
        data = b""
        with contextlib.suppress(OSError):
            data = self._status.recv(4096)
        try:
            self.returncode = int(json.loads(data)["exit"])
        except (ValueError, KeyError, TypeError):
            # The zygote died before it could tell: the worker is taken for gone (the caller
            # kills its group all the same), its exit unknown.
            self.returncode = LOST
        self._status.close()
        _ended()
        return self.returncode

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._status.close()

    def poll(self) -> int | None:
        return self._collect(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
        return code


class Zygote:
    """This process's zygote: a ``_zygote`` process and the socket only this process holds."""

    def __init__(self, env: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.owner = os.getpid()
        self.lock = threading.Lock()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cuda_agent.kernel_sandbox._zygote", str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                # a worker's environment: what libraries read as they load (OpenMP's and the
                # BLAS libraries' thread counts) is then the workers' (``_key``)
                env=dict(env),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        try:
            answer = self._receive(_STARTUP_S)
        except BaseException:
            self.close()
            raise
        if not answer.get("ready"):
            self.close()
            raise ZygoteError(str(answer.get("reason") or "the zygote did not start"))

    def _receive(self, timeout: float) -> dict[str, Any]:
        with selectors.DefaultSelector() as sel:
            sel.register(self.sock, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise ZygoteError(f"the zygote did not answer within {timeout:.0f} s")
        try:
            data = self.sock.recv(1 << 16)
            message = json.loads(data) if data else {}
        except (OSError, ValueError) as exc:
            raise ZygoteError(f"the zygote broke the protocol: {exc}") from exc
        if not data:
            raise ZygoteError("the zygote exited")
        return message if isinstance(message, dict) else {}

    def spawn(self, env: Mapping[str, str], pass_fds: Sequence[int]) -> ForkedProcess:
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        status, status_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            cwd = os.getcwd()
        except OSError:  # removed under us: the worker starts in "/" (it works in its home)
            cwd = "/"
        request = json.dumps({"env": dict(env), "cwd": cwd, "pass_fds": list(pass_fds)}).encode()
        fds = [stdin_read, stdout_write, status_theirs.fileno(), *pass_fds]
        try:
            with self.lock:
                try:
                    socket.send_fds(self.sock, [request], fds)
                    answer = self._receive(30.0)
                except BaseException as exc:
                    # An answer may still come, to be read as the next request's: this zygote
                    # is not asked again.
                    with contextlib.suppress(OSError):
                        self.sock.close()
                    if isinstance(exc, (OSError, ValueError)):
                        raise ZygoteError(f"the zygote is gone: {exc}") from exc
                    raise
        except BaseException:
            for fd in (stdin_write, stdout_read):
                os.close(fd)
            status.close()
            raise
        finally:
            for fd in (stdin_read, stdout_write):
                os.close(fd)
            status_theirs.close()
        if "pid" not in answer:
            for fd in (stdin_write, stdout_read):
                os.close(fd)
            status.close()
            if "error" in answer:
                raise ZygoteRefused(str(answer["error"]))
            raise ZygoteError("the zygote sent no pid")
        _started()
        forked = ForkedProcess(
            int(answer["pid"]), os.fdopen(stdin_write, "wb"), os.fdopen(stdout_read, "rb"), status
        )
        forked.zygote = self
        return forked

    def close(self) -> None:
        """Close our end (the zygote then exits) and reap it."""
        with self.lock, contextlib.suppress(OSError):  # (not while a request is in flight)
            self.sock.close()
        if os.getpid() == self.owner:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


_lock = threading.Lock()
# This process's zygotes, by the environment its libraries read as they load (``_key``): the
# workers of one pool share one.
_zygotes: dict[tuple[str, ...], Zygote] = {}
fork_unavailable = ""  # why workers are not forked in this process ("": they can be)
# Zygotes live while forked workers do (``_live``), a worker is being forked (``_pending``) or
# something holds them (``hold``), and LINGER_S seconds more, so that pools opened one after
# another share them and a closed pool leaves no process behind for long.
LINGER_S = 5.0
_live = 0
_pending = 0
_holds = 0
_timer: threading.Timer | None = None
_LOAD_TIME_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                  "GOTO_NUM_THREADS", "PYTHONPATH", "CUDA_VISIBLE_DEVICES")  # fmt: skip


def _key(env: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(env.get(name, "") for name in _LOAD_TIME_ENV)


def zygotes() -> list[Zygote]:
    """This process's zygotes now."""
    with _lock:
        return list(_zygotes.values())


def _started() -> None:
    global _live
    with _lock:
        _live += 1


def _ended() -> None:
    global _live
    with _lock:
        _live = max(0, _live - 1)
        _linger()


def _cancel_timer() -> None:
    global _timer
    if _timer is not None:
        _timer.cancel()
        _timer = None


def _idle() -> bool:
    return not (_live or _pending or _holds)


def _linger() -> None:
    """(Under ``_lock``.) Close the zygotes in LINGER_S seconds if all is still idle then."""
    global _timer
    _cancel_timer()
    if _zygotes and _idle():
        _timer = threading.Timer(LINGER_S, _close_if_idle)
        _timer.daemon = True
        _timer.start()


def _close_if_idle() -> None:
    with _lock:
        if not _idle():
            return
        closing = list(_zygotes.values())
        _zygotes.clear()
    for zygote in closing:
        zygote.close()


@contextlib.contextmanager
def hold() -> Iterator[None]:
    """Keep this process's zygotes (once started) while inside, whether or not workers live:
    for a process that opens pools now and then (a test session)."""
    global _holds
    with _lock:
        _holds += 1
        _cancel_timer()
    try:
        yield
    finally:
        with _lock:
            _holds -= 1
            _linger()


def _reserve(env: Mapping[str, str]) -> Zygote | None:
    """The zygote for ``env``'s workers, started on first use (None where none can serve),
    reserved until ``_release``: it is not closed for idleness meanwhile."""
    global fork_unavailable, _pending
    with _lock:
        if fork_unavailable:
            return None
        _cancel_timer()
        _pending += 1
        key = _key(env)
        zygote = _zygotes.get(key)
        if zygote is None or zygote.proc.poll() is not None:
            started = time.monotonic()
            try:
                _zygotes[key] = zygote = Zygote(env)
            except (ZygoteError, OSError) as exc:
                fork_unavailable = f"{exc} ({time.monotonic() - started:.1f} s)"
                _zygotes.pop(key, None)
                zygote = None
        return zygote


def _release() -> None:
    global _pending
    with _lock:
        _pending -= 1
        _linger()


def _drop(zygote: Zygote) -> None:
    """A zygote that failed a request is closed; the next fork starts a new one."""
    with _lock:
        for key, known in list(_zygotes.items()):
            if known is zygote:
                del _zygotes[key]
    zygote.close()


def _forget_in_child() -> None:
    """In a process forked from this one: the zygotes and their sockets are the parent's (and
    the lock may have been held by a thread the fork did not copy)."""
    global fork_unavailable, _lock, _live, _pending, _holds, _timer
    for zygote in _zygotes.values():
        with contextlib.suppress(OSError):
            zygote.sock.close()
    _zygotes.clear()
    fork_unavailable, _lock = "", threading.Lock()
    _live, _pending, _holds, _timer = 0, 0, 0, None


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def _close_at_exit() -> None:
    with _lock:
        closing = list(_zygotes.values())
        _zygotes.clear()
    for zygote in closing:
        if zygote.owner == os.getpid():
            zygote.close()
