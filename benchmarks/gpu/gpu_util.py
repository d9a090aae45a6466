"""The GPU's utilisation over time, for figures that ask how busy the GPU was while something ran
(issue 28's ``rl_step_gpu_busy_share``: the share of the sandbox's wall time the GPU is busy).

``UtilisationLog(path)`` runs ``nvidia-smi --query-gpu=utilization.gpu -lms 100`` beside the
work and writes one line per reading to ``path``: ``monotonic_seconds,share`` (the share of the
last sample period in which a kernel ran on the first visible GPU, ``first_gpu``, 0 to 1;
NVML's figure), each stamped
with ``time.monotonic()`` when it arrived. That clock is the machine's, the same in every
process, and the one the agent stamps the sandbox's busy windows with (``RolloutBatch``'s
``sandbox_windows``), so the two can be matched. Where ``nvidia-smi`` is missing (the CPU) the
log is not started and nothing is written.

``read_log(path)`` reads such a file back; ``mean_within(samples, windows)`` is the mean
reading inside the union of ``windows`` (None when none falls inside).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType

QUERY = ["--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100"]


def first_gpu() -> str:
    """The GPU ``nvidia-smi -i`` is to read: this process's first visible one (its
    ``cuda:0``, where the trainer and the sandbox's first device are), else GPU 0. Without
    ``-i`` it prints a line per GPU of the host each period, which would be averaged."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return visible or "0"


class UtilisationLog:
    """Readings of ``nvidia-smi`` (``QUERY``) appended to ``path`` while the ``with`` block runs;
    ``samples`` holds them too. ``command`` replaces ``nvidia-smi`` (tests)."""

    def __init__(self, path: Path | None = None, command: str = "nvidia-smi") -> None:
        self.path = path
        self.samples: list[tuple[float, float]] = []
        self.proc: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None
        self._command = shutil.which(command)

    def __enter__(self) -> UtilisationLog:
        return self.start()

    def start(self) -> UtilisationLog:
        """Start reading (``close`` ends it); nothing where ``nvidia-smi`` is missing."""
        if self._command is None:
            return self
        self.proc = subprocess.Popen(
            [self._command, *QUERY, "-i", first_gpu()],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.path.open("a") if self.path is not None else None
        try:
            for line in self.proc.stdout:
                try:
                    share = float(line.split(",")[0]) / 100
                except ValueError:
                    continue  # "[N/A]", a header: not a reading
                stamp = time.monotonic()
                self.samples.append((stamp, share))
                if out is not None:
                    out.write(f"{stamp:.3f},{share:.2f}\n")
                    out.flush()
        finally:
            if out is not None:
                out.close()

    def mean(self, start: float, end: float) -> float | None:
        """The mean reading between ``start`` and ``end`` (``time.monotonic()``)."""
        return mean_within(self.samples, [(start, end)])

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def read_log(path: Path) -> list[tuple[float, float]]:
    """The readings a ``UtilisationLog`` wrote to ``path`` (a line cut short by a kill is
    skipped)."""
    samples = []
    for line in path.read_text().splitlines():
        stamp, _, share = line.partition(",")
        try:
            samples.append((float(stamp), float(share)))
        except ValueError:
            continue
    return samples


def mean_within(
    samples: Iterable[tuple[float, float]], windows: Sequence[Sequence[float]]
) -> float | None:
    """The mean of the readings whose time falls inside any of ``windows`` (``(start, end)``;
    overlapping windows count a reading once); None when none does."""
    spans = sorted((float(w[0]), float(w[1])) for w in windows)
    inside = [u for t, u in samples if any(a <= t <= b for a, b in spans)]
    return sum(inside) / len(inside) if inside else None
