"""Building candidates ahead of the GPU job (the parent): compile workers, which need no GPU,
build a candidate's extensions and NVRTC cubins into the shared cache for the GPUs'
architecture; the GPU lane then only loads them."""

from __future__ import annotations

import os
import subprocess

from .._shared.protocol import PrepareReport, PrepareRequest
from ..candidates import kernel_sources
from ..result import EvalResult
from .pool import Worker, WorkerDied


def prepare_extensions(
    worker: Worker, candidate: str | dict[str, str], task_name: str, backend: str
) -> tuple[bool, EvalResult | None]:
    """Build ``candidate``'s extensions on compile ``worker``: (built, the verdict when the
    build hung past the load deadline). Any other failure is left for the GPU job to report."""
    try:
        answer = PrepareReport.parse(worker.run(PrepareRequest(candidate).to_json()))
    except WorkerDied as death:
        if death.timed_out:
            return False, EvalResult(
                status="timeout",
                message=f"{death.reason} (while building the candidate's extensions)",
                task=task_name,
                backend=backend,
            )
        return False, None
    return answer.outcome == "built", None


def needs_build(candidate: str | dict[str, str]) -> bool:
    """Whether importing the candidate may compile: a C++/CUDA extension build, or NVRTC (a
    compile worker fills the cubin cache while the GPU worker runs other jobs)."""
    if isinstance(candidate, dict):
        return bool(kernel_sources(candidate)) or "cuda_kernel" in candidate.get("model_new.py", "")
    return any(word in candidate for word in ("cpp_extension", "load_inline", "cuda_kernel"))


def cuda_arch() -> str:
    """The compute capability of the visible GPUs (``"9.0"``), from ``nvidia-smi``; "" when it
    cannot be read or the GPUs differ (then every worker builds for its own device)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    caps = [line.strip() for line in out.splitlines() if line.strip()]
    if visible:
        try:
            caps = [caps[int(i)] for i in visible.split(",") if i.strip()]
        except (ValueError, IndexError):
            return ""
    return caps[0] if caps and len(set(caps)) == 1 else ""
