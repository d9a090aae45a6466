"""Where a benchmark's figures came from: date, machine, torch version, commit, command."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path
from typing import Any

import torch

from cuda_agent.runner.machine import cpu_name

ROOT = Path(__file__).resolve().parents[2]


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
    """``"2 x NVIDIA H200"`` for ``gpus`` GPUs, else the CPU's name, cores and the vector
    instructions torch's CPU kernels use (``"AVX2"``...)."""
    if gpus and torch.cuda.is_available():
        return f"{gpus} x {torch.cuda.get_device_name(0)}"
    cores, vectors = os.cpu_count(), torch.backends.cpu.get_cpu_capability()
    return f"CPU: {cpu_name()} ({cores} cores, {vectors})"


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
