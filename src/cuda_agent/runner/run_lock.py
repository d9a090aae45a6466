"""One invocation of ``cuda-agent train`` per run directory at a time, and no process of a
killed launcher left writing one.

Two invocations writing one run directory would interleave their records and checkpoints (the
same step twice in ``metrics.jsonl``, a checkpoint from one and a state from the other) with
no error. It happens without anyone meaning it: ``torchrun`` and ``accelerate launch`` start
their workers in sessions of their own, so killing the launcher (``kill -9`` of its process
group, a terminal closed) leaves the workers running the old job, and the ``--resume`` that
follows runs beside them.

- ``RunLock``: the invocation's writer (rank 0) holds a POSIX record lock (``lockf``) on
  ``RUN/.lock`` while it runs. The kernel drops it when the process ends, however it ends, so
  a killed run never leaves a stale lock; the lock is the process's own, not inherited by
  anything it forks. A second invocation waits ``wait_s`` (``WAIT_S``) for it (the processes of a run just
  killed are still exiting), then stops with ``RunInUseError``, naming the holder.
- ``stop_with_launcher``: a process of a multi-process run ends itself once its launcher (its
  parent when it started) is gone.
"""

from __future__ import annotations

import fcntl
import os
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

LOCK_FILE = ".lock"
WAIT_S = 10.0  # how long a second invocation waits for the lock (a killed run's exit)


class RunInUseError(RuntimeError):
    """Another invocation holds the run directory."""


class RunLock:
    """The exclusive right to write ``run_dir`` (``acquire``, ``release``)."""

    def __init__(self, run_dir: Path, wait_s: float | None = None) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self.wait_s = WAIT_S if wait_s is None else wait_s
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, waiting up to ``wait_s``; ``RunInUseError`` if it stays held."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        give_up = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= give_up:
                    holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
                    os.close(fd)
                    raise RunInUseError(
                        f"{self.path.parent} is in use by another `cuda-agent train` "
                        f"({holder or 'holder unknown'}); two invocations writing one run "
                        "directory would mix their steps: wait for it to end or stop it "
                        "(every process of it), then --resume"
                    ) from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # (closing drops the process's lock)
            self._fd = None


_watchers: dict[int, threading.Thread] = {}  # pid -> its watcher (one per process)


def stop_with_launcher(period_s: float = 0.5) -> threading.Thread:
    """Watch this process's parent (the launcher) from a daemon thread; when it is gone (the
    parent changed: the process was re-parented), say so on stderr and end the process at
    once (``os._exit``: the run resumes from its last commit). An uncaught error raised once
    the launcher is gone (a collective whose peer stopped first) ends the same way. Once per
    process."""
    if os.getpid() in _watchers:
        return _watchers[os.getpid()]
    launcher = os.getppid()

    def stop() -> None:
        # to the file descriptor, not sys.stderr: torch's process group wraps the excepthook
        # in one that points sys.stderr at a buffer while the inner hook runs
        os.write(
            2,
            f"cuda-agent: the launcher (pid {launcher}) is gone; this process of its run "
            "stops (resume the run with --resume)\n".encode(),
        )
        os._exit(1)

    def watch() -> None:
        while os.getppid() == launcher:
            time.sleep(period_s)
        stop()

    # A peer that noticed first has left its collective, so this process may fail in one
    # before its watcher wakes: with the launcher gone, that failure is the launcher's end,
    # said as such (not a "connection closed by peer" traceback).
    previous_hook = sys.excepthook

    def hook(
        kind: type[BaseException], value: BaseException, traceback: TracebackType | None
    ) -> None:
        if os.getppid() != launcher:
            stop()
        previous_hook(kind, value, traceback)

    sys.excepthook = hook

    thread = threading.Thread(target=watch, name="stop-with-launcher", daemon=True)
    thread.start()
    _watchers[os.getpid()] = thread
    return thread
