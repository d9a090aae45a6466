"""Candidate inputs: a ``ModelNew`` module's source, or a CUDA-Agent-style work directory.

A work directory holds kernels, a binding and ``model_new.py``::

    model_new.py          defines ModelNew; does ``import cuda_extension``
    kernels/*.cu          CUDA kernels and their host launchers (CUDA backend)
    kernels/*.cpp         C++ sources, including the pybind11 binding
                          (``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)``); on the CPU backend
                          the kernels themselves are C++ too
    kernels/*.h, *.cuh    headers they include

The worker builds every ``kernels/*.cu`` and ``kernels/*.cpp`` into one extension module named
``cuda_extension`` (through the cached ``torch.utils.cpp_extension.load``, with ``-O3
--use_fast_math`` for device code), makes it importable, then imports ``model_new.py``.

``read_candidate`` turns what a user has (a string, a file, a directory, or a mapping of
relative paths to text) into the one form a job carries.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

# Complete candidates for the built-in relu task, one per format (tested; prompts show them).
EXAMPLES = Path(__file__).parent / "examples"

# What one candidate may carry: a few hundred KB of text is already a very large kernel.
MAX_FILES = 64
MAX_TOTAL_BYTES = 4 << 20
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp", ".c", ".txt", ".md")

Candidate = str | Mapping[str, str] | os.PathLike[str]


class CandidateFormatError(ValueError):
    """The candidate is not a module source, a file or a valid work directory."""


def read_candidate(candidate: Candidate) -> str | dict[str, str]:
    """Module source text, or ``{relative posix path: text}`` for a work directory.

    A ``str`` is module source; a path is read (a file as module source, a directory as a
    work directory); a mapping is taken as a work directory's files.
    """
    if isinstance(candidate, str):
        return candidate
    if isinstance(candidate, os.PathLike):
        path = Path(candidate)
        if path.is_file():
            return path.read_text()
        if path.is_dir():
            return _checked(_read_directory(path))
        raise CandidateFormatError(f"{path} is neither a file nor a directory")
    if isinstance(candidate, Mapping):
        return _checked(dict(candidate))
    raise TypeError(
        "candidate must be module source text, a path, or a mapping of work-directory files, "
        f"not {type(candidate).__name__}"
    )


def _read_directory(root: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            continue
        if path.is_file() and path.suffix in SOURCE_SUFFIXES:
            if len(files) >= MAX_FILES:
                raise CandidateFormatError(f"a work directory may hold at most {MAX_FILES} files")
            files[rel.as_posix()] = path.read_text()
    return files


def _checked(files: dict[str, str]) -> dict[str, str]:
    if "model_new.py" not in files:
        raise CandidateFormatError("a work directory must contain model_new.py")
    if len(files) > MAX_FILES:
        raise CandidateFormatError(f"a work directory may hold at most {MAX_FILES} files")
    total = 0
    for name, text in files.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise CandidateFormatError("work-directory files map relative paths to text")
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts or "\\" in name:
            raise CandidateFormatError(f"{name!r} is not a relative path inside the directory")
        total += len(text.encode())
    if total > MAX_TOTAL_BYTES:
        raise CandidateFormatError(f"a work directory may hold at most {MAX_TOTAL_BYTES} bytes")
    return files


def kernel_sources(files: Mapping[str, str]) -> list[str]:
    """The sources the work directory's extension is built from, in a stable order."""
    return sorted(
        name
        for name in files
        if name.startswith("kernels/") and name.endswith((".cu", ".cpp", ".cc"))
    )
