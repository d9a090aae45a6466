"""Where a benchmark's figures came from: date, machine, torch version, commit, command."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def commit() -> str:
    """``CUDA_AGENT_COMMIT`` (the device's copy of ``.git`` can be older than the working tree
    it runs), else ``git rev-parse HEAD``, else ""."""
    named = os.environ.get("CUDA_AGENT_COMMIT", "")
    if named:
        return named
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def machine(gpus: int) -> str:
    """``"2 x NVIDIA H200"`` for ``gpus`` GPUs, else the CPU's name."""
    if gpus and torch.cuda.is_available():
        return f"{gpus} x {torch.cuda.get_device_name(0)}"
    return f"CPU: {cpu_name()} ({os.cpu_count()} cores)"


def provenance(benchmark: str, command: str, gpus: int) -> dict[str, Any]:
    return {
        "benchmark": benchmark,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(gpus),
        "gpus": gpus,
        "torch": torch.__version__,
        "commit": commit(),
        "command": command,
    }
