"""The zygote: ``python -m cuda_agent.kernel_sandbox._zygote FD``, a process that has imported
what a worker imports (torch, the worker's modules, ``torch._dynamo``) and forks workers from
that state, so a worker is ready in a fraction of a second instead of the seconds a fresh
interpreter spends importing torch (``_parent.spawn``).

It runs no candidate and no task code: a child becomes a worker (``_worker.main``) only after
the fork, and confines itself there exactly as a worker started from a fresh interpreter does
(limits, seccomp, Landlock, its network namespace). It never touches CUDA, so a child starts
CUDA as a fresh process would; it refuses to serve (and the parent falls back to fresh
interpreters) if a library it imported has initialised the CUDA driver (loading it is harmless:
torch's CUDA builds do as they import).

Protocol, over the one socket (``SOCK_SEQPACKET``) the parent gave it as ``FD``, nothing else
reaching it: it sends ``{"ready": true}`` (or ``{"ready": false, "reason": ...}``) once
imported; each request is a JSON object (``env``, ``cwd``) with descriptors attached (the
worker's stdin and stdout, a status socket, then the descriptors the worker inherits), and is
answered ``{"pid": N}`` once forked. When a child exits, its exit code (``subprocess``'s
convention: minus the signal that killed it) is written on its status socket as a JSON line,
which is then closed (what is left in the child's process group is killed first). When the
parent's end closes (the parent closed the zygote, or died, even of SIGKILL), the zygote kills
every child it forked that is still alive, with its process group, and exits: a worker busy
with a candidate that never returns would not see its stdin close, and would spin on alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import select
import signal
import socket
import sys
from typing import Any

_MAX_REQUEST = 1 << 20
_MAX_FDS = 16


def _preload() -> str:
    """Import what every worker imports; returns why this zygote cannot serve ("" if it can)."""
    import torch
    import torch._dynamo  # noqa: F401  (the runtime checks' first use imports it: ``_worker``)

    from . import _worker  # noqa: F401
    from ._candidate import evaluate, runtime_checks, trials  # noqa: F401
    from ._reference import jobs, trivial_answers, trivial_rule  # noqa: F401
    from ._shared import device_exchange, sections  # noqa: F401

    if _cuda_driver_initialised():
        return "the CUDA driver was initialised before the fork"
    return ""


_CUDA_ERROR_NOT_INITIALIZED = 3


def _cuda_driver_initialised() -> bool:
    """Whether this process has initialised the CUDA driver (``cuInit``), after which a
    forked child cannot use CUDA. The driver library merely being loaded is harmless, and
    torch's CUDA builds load it as they import (torch 2.11+cu130 does): every driver call but
    ``cuInit`` and ``cuDriverGetVersion`` answers ``CUDA_ERROR_NOT_INITIALIZED`` before
    ``cuInit``, and ``cuDeviceGetCount`` initialises nothing itself. Where the library is
    mapped but cannot be asked, this says it is initialised (the zygote then refuses)."""
    with open("/proc/self/maps") as maps:
        if not any("libcuda.so" in line for line in maps):
            return False
    try:  # the copy already loaded, never a new one
        driver = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD)
        count = ctypes.c_int(0)
        answer = int(driver.cuDeviceGetCount(ctypes.byref(count)))
    except (OSError, AttributeError):
        return True
    return answer != _CUDA_ERROR_NOT_INITIALIZED


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def _become_worker(request: dict[str, Any], stdin: int, stdout: int, passed: list[int]) -> None:
    """In the child: the descriptors, session, environment and directory a fresh worker
    process would have, then the worker's own main loop."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()  # its own process group: the parent kills the group
    # Its descriptors: stdin, stdout, /dev/null as stderr, the passed ones at the numbers they
    # have in the parent (jobs name the exchange by its number), and nothing else of ours.
    numbers = [int(n) for n in request.get("pass_fds", [])]
    if len(numbers) != len(passed) or min(numbers, default=3) < 3:
        raise ValueError("the passed descriptors' numbers do not match them")
    targets = [0, 1, *numbers]
    above = max([*targets, stdin, stdout, *passed]) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, above) for fd in (stdin, stdout, *passed)]
    for fd, target in zip(moved, targets, strict=True):
        os.dup2(fd, target)  # inheritable, as subprocess leaves them
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    kept = sorted({0, 1, 2, *numbers})
    for low, high in zip(kept, [*kept[1:], os.sysconf("SC_OPEN_MAX")], strict=True):
        if high > low + 1:
            os.closerange(low + 1, high)
    env = dict(request["env"])
    os.environ.clear()
    os.environ.update(env)
    sys.dont_write_bytecode = env.get("PYTHONDONTWRITEBYTECODE", "") != ""
    with contextlib.suppress(OSError):
        os.chdir(request.get("cwd") or "/")
    from ._worker import main

    main()


def _fork(request: dict[str, Any], fds: list[int], sock: socket.socket) -> int:
    stdin, stdout, _status, *passed = fds
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            sock.close()
            _become_worker(request, stdin, stdout, passed)
            code = 0
        finally:
            os._exit(code)
    return pid


def _reap(status: dict[int, int]) -> None:
    """Collect every exited child and tell its status socket how it ended. Before a child is
    reaped (while its pid cannot be anyone else's), whatever is left in its process group
    (what the candidate started) is killed: the parent, told the worker is gone, does not."""
    while True:
        try:
            seen = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if seen is None or not seen.si_pid:
            return
        pid = seen.si_pid
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        _, how = os.waitpid(pid, 0)
        fd = status.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, (json.dumps({"exit": os.waitstatus_to_exitcode(how)}) + "\n").encode())
            os.close(fd)


def _kill_all(status: dict[int, int]) -> None:
    """Kill every child still alive, and what is left in its process group, then reap them."""
    for pid in list(status):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    while status:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        fd = status.pop(pid, None)
        if fd is not None:
            os.close(fd)


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    reason = _preload()
    _send(sock, {"ready": not reason, "reason": reason})
    if reason:
        return
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    status: dict[int, int] = {}  # child pid -> its status socket
    while True:
        readable, _, _ = select.select([sock.fileno(), wake_read], [], [], 1.0)
        if wake_read in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_read, 4096):
                    pass
        _reap(status)
        if sock.fileno() not in readable:
            continue
        try:
            message, fds, _flags, _address = socket.recv_fds(sock, _MAX_REQUEST, _MAX_FDS)
        except OSError:
            message, fds = b"", []
        if not message:  # the parent is gone
            _kill_all(status)
            return
        try:
            if len(fds) < 3:
                raise ValueError(f"a request needs at least 3 descriptors, got {len(fds)}")
            pid = _fork(json.loads(message), fds, sock)
        except Exception as exc:  # a malformed request: say so, keep serving
            for fd in fds:
                os.close(fd)
            _send(sock, {"error": f"{type(exc).__name__}: {exc}"})
            continue
        for fd in fds[:2] + fds[3:]:
            os.close(fd)
        status[pid] = fds[2]
        _send(sock, {"pid": pid})
        _reap(status)  # a child that died at once


if __name__ == "__main__":
    main()
