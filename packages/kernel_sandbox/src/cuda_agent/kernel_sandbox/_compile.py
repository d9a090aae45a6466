"""Content-addressed compilation of C/C++ kernels with the system compiler.

The cache key is a hash of (compiler identity, flags, source); a built library is written to a
temporary name and moved into place with ``os.replace``, so concurrent workers compiling the
same source never see a half-written file and never block each other.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .errors import CompileError

DEFAULT_C_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared")
_MAX_LOG_LINES = 25


def cache_root() -> Path:
    """``$CUDA_AGENT_CACHE``, default ``~/.cache/cuda-agent``: shared by every worker and run."""
    root = os.environ.get("CUDA_AGENT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "cuda-agent"
    )
    return Path(root)


def cache_dir(kind: str = "kernels") -> Path:
    """Where compiled artefacts of ``kind`` live, under ``cache_root()``."""
    path = cache_root() / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache
def _compiler_identity(compiler: str) -> str:
    exe = shutil.which(compiler)
    if exe is None:
        raise CompileError(f"the C compiler {compiler!r} is not installed on this host")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    return exe + "\n" + out.stdout.splitlines()[0] if out.stdout else exe


def compile_shared_library(
    source: str,
    *,
    lang: str = "c",
    flags: tuple[str, ...] = DEFAULT_C_FLAGS,
    timeout_s: float = 60.0,
) -> Path:
    """Compile ``source`` into a shared library and return its path (cached by content)."""
    if lang not in ("c", "c++"):
        raise CompileError(f"unknown language {lang!r}; use 'c' or 'c++'")
    compiler = os.environ.get("CC", "cc") if lang == "c" else os.environ.get("CXX", "c++")
    std = "-std=gnu11" if lang == "c" else "-std=gnu++17"
    all_flags = (std, *flags)
    key = hashlib.sha256(
        "\0".join((_compiler_identity(compiler), *all_flags, source)).encode()
    ).hexdigest()[:32]
    out = cache_dir() / f"{key}.so"
    if out.exists():
        return out
    suffix = ".c" if lang == "c" else ".cpp"
    with tempfile.TemporaryDirectory(prefix="cuda-agent-cc-") as tmp:
        src = Path(tmp) / f"kernel{suffix}"
        src.write_text(source)
        partial = Path(tmp) / "kernel.so"
        try:
            proc = subprocess.run(
                [compiler, *all_flags, str(src), "-o", str(partial), "-lm"],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                cwd=tmp,
            )
        except subprocess.TimeoutExpired as exc:
            raise CompileError(f"compilation took longer than {timeout_s:.0f} s") from exc
        if proc.returncode != 0:
            log = trim_compiler_log(proc.stderr, tmp)
            raise CompileError("compilation failed:\n" + log, log)
        # Move into the shared cache atomically; a concurrent identical build wins harmlessly.
        staged = out.with_name(f".{key}.{os.getpid()}.tmp")
        shutil.copyfile(partial, staged)
        os.replace(staged, out)
    return out


def trim_compiler_log(stderr: str, workdir: str) -> str:
    """Keep what an LLM can act on: ``file:line:col: error: message`` lines and their context.

    Paths of the harness's temporary directory are replaced by the bare file name.
    """
    text = stderr.replace(workdir + os.sep, "")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    keep = [ln for ln in lines if re.search(r"\b(error|warning|note)\b", ln)] or lines
    if len(keep) > _MAX_LOG_LINES:
        keep = [*keep[:_MAX_LOG_LINES], f"... ({len(keep) - _MAX_LOG_LINES} more lines)"]
    return "\n".join(keep)
