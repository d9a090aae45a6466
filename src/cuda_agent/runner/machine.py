"""What machine an invocation of a run ran on, for its record in ``state.json``'s ``sessions``.

Figures of one run measured on two hosts differ for reasons the code does not hold: two
2-core hosts of one class ran the same commit's warm-start step in 42.5 s and 75.7 s
(``benchmarks/results/2026-12-06-cpu-commit-compare/``), the slower one offering AVX2 only.
So each invocation records its CPU, its cores, the vector instructions torch's CPU kernels
use there, and its GPUs.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import torch


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe() -> dict[str, Any]:
    """``{"cpu", "cpu_cores", "cpu_capability", "gpus"}``: ``cpu_capability`` is torch's
    (``"AVX2"``, ``"AVX512"``, ``"DEFAULT"``...), ``gpus`` the visible GPUs' names (none where
    CUDA is not available)."""
    gpus: list[str] = []
    if torch.cuda.is_available():
        gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "cpu": cpu_name(),
        "cpu_cores": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "gpus": gpus,
    }
