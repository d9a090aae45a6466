"""Worker process main loop: ``python -m cuda_agent.kernel_sandbox._worker``.

Protocol: one JSON object per line. The parent writes jobs to our stdin; we answer on the
original stdout, which we keep on a private descriptor before pointing descriptors 1 and 2
at a per-job log file, so anything the candidate prints cannot corrupt the protocol.
Messages we send: ``{"type": "ready"}``, ``{"type": "phase", "phase": ...}`` when a phase
with its own deadline starts, and ``{"type": "result", "result": {...}}``.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO


def _limit_resources(max_output_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_output_bytes, max_output_bytes))


def _send(channel: TextIO, message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def _redirect_output(path: Path) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _poisons_context(message: str) -> bool:
    """A CUDA error leaves the context unusable: this worker must not take another job."""
    return "CUDA error" in message or "illegal memory access" in message or "cudaError" in message


def main() -> None:
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    home = Path(tempfile.mkdtemp(prefix="cuda-agent-worker-"))
    _redirect_output(home / "startup.log")
    threads = int(os.environ.get("CUDA_AGENT_THREADS", "1"))
    _limit_resources(int(os.environ.get("CUDA_AGENT_MAX_OUTPUT", str(64 << 20))))

    import torch

    torch.set_num_threads(threads)
    from ._evaluate import run_job

    _send(channel, {"type": "ready", "pid": os.getpid()})
    try:
        for line in sys.stdin:
            job = json.loads(line)
            workdir = Path(tempfile.mkdtemp(prefix="job-", dir=home))
            os.chdir(workdir)
            _redirect_output(workdir / "output.log")
            try:
                result = run_job(
                    job, workdir, lambda p: _send(channel, {"type": "phase", "phase": p})
                )
            except BaseException as exc:  # a harness bug or SystemExit from the candidate
                result = {"status": "runtime_error", "message": f"{type(exc).__name__}: {exc}"}
            _send(channel, {"type": "result", "result": result})
            os.chdir(home)
            shutil.rmtree(workdir, ignore_errors=True)
            if _poisons_context(str(result.get("message", ""))):
                break
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
