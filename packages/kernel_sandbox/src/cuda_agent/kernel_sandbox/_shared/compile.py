"""Content-addressed compilation: C/C++ kernels with the system compiler, CUDA C with NVRTC.

The cache key is a hash of (compiler identity, flags, source); a built library or cubin is
written to a temporary name and moved into place with ``os.replace``, so no process ever sees
a half-written file. A build holds the key's lock (``exclusive``), so processes that ask for
the same source at once (lanes, a compile worker and a GPU worker, two runs sharing the cache)
build it once: the others wait for that build and load it. NVRTC needs no GPU, only the target
architecture: compile workers with no GPU build cubins that the GPU worker then only loads.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import CompileError

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


@contextlib.contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Hold the ``fcntl`` lock on the file ``lock`` (created if missing) while inside; another
    process asking for it waits. The lock vanishes with its process, so a build killed at a
    deadline never leaves a key locked."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


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
    return _built_once(
        cache_dir() / f"{key}.so",
        lambda: _shared_library(compiler, all_flags, source, lang, timeout_s),
    )


def _shared_library(
    compiler: str, all_flags: tuple[str, ...], source: str, lang: str, timeout_s: float
) -> bytes:
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
        return partial.read_bytes()


def _built_once(out: Path, build: Callable[[], bytes]) -> Path:
    """``out``, made by ``build`` unless it is in the cache: under ``out``'s lock (a process
    that waited loads what the holder built), then moved in atomically (a temporary name, then
    ``os.replace``)."""
    if out.exists():
        return out
    with exclusive(out.with_name(f".{out.stem}.lock")):
        if not out.exists():  # else built while this process waited for the lock
            staged = out.with_name(f".{out.stem}.{os.getpid()}.tmp")
            staged.write_bytes(build())
            os.replace(staged, out)
    return out


def trim_compiler_log(stderr: str, workdir: str) -> str:
    """Keep what an LLM can act on: ``file:line:col: error: message`` lines and their context.

    Paths of the harness's temporary directory are replaced by the bare file name.
    """
    text = stderr.replace(workdir + os.sep, "") if workdir else stderr
    lines = [ln for ln in text.splitlines() if ln.strip()]
    keep = [ln for ln in lines if re.search(r"\b(error|warning|note)\b", ln)] or lines
    if len(keep) > _MAX_LOG_LINES:
        keep = [*keep[:_MAX_LOG_LINES], f"... ({len(keep) - _MAX_LOG_LINES} more lines)"]
    return "\n".join(keep)


def cuda_arch() -> str:
    """The architecture NVRTC compiles for, as ``sm_XY``: this process's GPU, or on a compile
    worker with no GPU the pool's (``TORCH_CUDA_ARCH_LIST``, e.g. ``9.0``)."""
    import torch

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    listed = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace("+PTX", "").split(";")[0].strip()
    if not re.fullmatch(r"\d+\.\d+", listed):
        raise CompileError("no GPU is visible and TORCH_CUDA_ARCH_LIST names no architecture")
    return "sm_" + listed.replace(".", "")


@functools.cache
def _nvrtc() -> tuple[Any, str]:
    """CuPy's NVRTC binding and the NVRTC version (part of every cache key)."""
    try:
        from cupy_backends.cuda.libs import nvrtc
    except ImportError as exc:  # a host problem, not the candidate's
        raise RuntimeError(
            "the CUDA fast path needs CuPy: pip install cupy-cuda12x (or cupy-cuda13x)"
        ) from exc
    major, minor = nvrtc.getVersion()
    return nvrtc, f"nvrtc {major}.{minor}"


# NVRTC has no math.h or float.h, so code written for nvcc (where the CUDA headers bring them
# in) fails on their constants: ``-INFINITY`` as a max's start, ``M_PI`` in a GELU. They are
# defined ahead of every source, with the values glibc and nvcc give them; a source's own
# ``#define`` of one still wins (NVRTC warns, #47-D, unless it is the same text). ``#line``
# keeps the source's line numbers in the compiler's messages.
NVRTC_CONSTANTS = (
    ("INFINITY", "__int_as_float(0x7f800000)"),
    ("NAN", "__int_as_float(0x7fc00000)"),
    ("HUGE_VALF", "__int_as_float(0x7f800000)"),
    ("HUGE_VAL", "__longlong_as_double(0x7ff0000000000000LL)"),
    ("FLT_MAX", "3.40282346638528859812e+38F"),
    ("FLT_MIN", "1.17549435082228750797e-38F"),
    ("FLT_EPSILON", "1.1920928955078125e-07F"),
    ("DBL_MAX", "1.79769313486231570815e+308"),
    ("DBL_MIN", "2.22507385850720138309e-308"),
    ("DBL_EPSILON", "2.22044604925031308085e-16"),
    ("M_E", "2.7182818284590452354"),
    ("M_LOG2E", "1.4426950408889634074"),
    ("M_LOG10E", "0.43429448190325182765"),
    ("M_LN2", "0.69314718055994530942"),
    ("M_LN10", "2.30258509299404568402"),
    ("M_PI", "3.14159265358979323846"),
    ("M_PI_2", "1.57079632679489661923"),
    ("M_PI_4", "0.78539816339744830962"),
    ("M_1_PI", "0.31830988618379067154"),
    ("M_2_PI", "0.63661977236758134308"),
    ("M_2_SQRTPI", "1.12837916709551257390"),
    ("M_SQRT2", "1.41421356237309504880"),
    ("M_SQRT1_2", "0.70710678118654752440"),
)
NVRTC_PRELUDE = "\n".join(f"#define {name} {value}" for name, value in NVRTC_CONSTANTS)


def nvrtc_source(source: str) -> str:
    """``source`` as NVRTC compiles it: ``NVRTC_PRELUDE``, then the source from its line 1."""
    return f'{NVRTC_PRELUDE}\n#line 1 "kernel.cu"\n{source}'


def compile_cubin(source: str, options: tuple[str, ...], arch: str) -> Path:
    """Compile CUDA C ``source`` with NVRTC into a cubin for ``arch``; its path (cached). The
    source may use the constants of ``NVRTC_PRELUDE`` as under nvcc."""
    nvrtc, version = _nvrtc()
    all_options = (*options, f"--gpu-architecture={arch}")
    source = nvrtc_source(source)
    key = hashlib.sha256("\0".join((version, *all_options, source)).encode()).hexdigest()[:32]
    return _built_once(
        cache_dir("nvrtc") / f"{key}.cubin", lambda: _nvrtc_cubin(nvrtc, source, all_options)
    )


def _nvrtc_cubin(nvrtc: Any, source: str, all_options: tuple[str, ...]) -> bytes:
    program = nvrtc.createProgram(source, "kernel.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(program, all_options)
        except nvrtc.NVRTCError:
            log = trim_compiler_log(nvrtc.getProgramLog(program), "")
            raise CompileError("NVRTC compilation failed:\n" + log, log) from None
        return bytes(nvrtc.getCUBIN(program))
    finally:
        nvrtc.destroyProgram(program)
