"""The files a ``load(sources=[...])`` build can see, read once and built from a copy.

Every job runs in a fresh ``job-XXXX`` folder, so a work directory's ``kernels/`` (or any file a
``load`` candidate writes beside itself) has a new absolute path each time. Keyed and compiled
from there, the same files were a new cache entry every job, and even under an equal key torch's
``build.ninja`` would name new source and include paths and rebuild. Instead the hooks read,
once, into memory: the sources, and the C / C++ / CUDA files of the folders they sit in and of
the include folders. Each file gets a relative name: ``job/...`` for what lies under the job's
folder (the worker's current directory), ``outside-N/...`` for the N-th other folder. The key
hashes those names and bytes, and the build compiles copies of those very bytes under the build
directory's ``tree/``: a second job with the same files runs the same command on the same
paths, and ninja finds nothing to do. A folder too large to copy (a library's include tree)
stays on the include path where it is, under its absolute path, in the key too.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".ipp", ".tpp"})
CODE_SUFFIXES = HEADER_SUFFIXES | {".c", ".cc", ".cpp", ".cxx", ".cu"}
_MAX_ENTRIES = 2000  # a folder with more entries than this (all depths) is left in place
_MAX_FILES = 256
_MAX_BYTES = 16 << 20


@dataclass
class SourceTree:
    """What one ``load`` build sees: ``files`` (relative name -> bytes), the ``sources`` among
    them in the caller's order, and the include folders (relative names of copied folders, or
    absolute paths of folders left in place)."""

    files: dict[str, bytes] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    include_paths: list[str] = field(default_factory=list)

    def identity(self) -> dict[str, object]:
        """The part of the build key that stands for the files: names and contents, no paths
        of the job."""
        digests = sorted([n, hashlib.sha256(b).hexdigest()] for n, b in self.files.items())
        return {"files": digests, "sources": self.sources, "include_paths": self.include_paths}

    def texts(self) -> list[str]:
        """The sources and the headers the build can see, as text (for the kernels' names)."""
        names = [*self.sources]
        names += [n for n in sorted(self.files) if Path(n).suffix in HEADER_SUFFIXES]
        return [self.files[n].decode(errors="replace") for n in dict.fromkeys(names)]

    def write(self, root: Path, rewrite: Callable[[str], str]) -> tuple[list[str], list[str]]:
        """Copy the files under ``root`` (each passed through ``rewrite``); the sources and
        include paths to build with. A file that already holds those bytes is left untouched
        (a new modification time would make ninja rebuild); one that does not (a copy cut
        short) is replaced atomically. The caller holds the build directory's lock."""
        for name, data in self.files.items():
            text = data.decode("utf-8", "surrogateescape")
            fixed = rewrite(text)
            if fixed != text:
                data = fixed.encode("utf-8", "surrogateescape")
            _write_if_changed(root / name, data)
        includes = []
        for path in self.include_paths:
            if os.path.isabs(path):
                includes.append(path)
            else:
                (root / path).mkdir(parents=True, exist_ok=True)
                includes.append(str(root / path))
        return [str(root / s) for s in self.sources], includes


def _write_if_changed(target: Path, data: bytes) -> None:
    try:
        if target.read_bytes() == data:
            return
    except OSError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    staged.write_bytes(data)
    os.replace(staged, target)


def plan(sources: list[str], include_paths: list[str], base: Path) -> SourceTree:
    """The tree of a ``load`` call whose job's folder is ``base`` (reads every file it names;
    ``OSError`` if a source cannot be read)."""
    base = Path(os.path.abspath(base))
    tree = SourceTree()
    units: dict[Path, str | None] = {}  # a folder copied whole -> its label (None: left in place)

    def locate(folder: Path) -> str | None:
        """``folder``'s relative name in the tree, copying the folder it belongs to on first
        sight; None if that folder is left in place."""
        unit = base if folder.is_relative_to(base) else folder
        if unit not in units:
            label = "job" if unit == base else f"outside-{sum(u != base for u in units)}"
            found = _read_folder(unit)
            units[unit] = label if found is not None else None
            for name, data in (found or {}).items():
                tree.files[f"{label}/{name}"] = data
        prefix = units[unit]
        if prefix is None:
            return None
        relative = folder.relative_to(unit).as_posix()
        return prefix if relative == "." else f"{prefix}/{relative}"

    left_in_place: list[str] = []
    for i, given in enumerate(sources):
        path = Path(os.path.abspath(given))
        folder = locate(path.parent)
        if folder is None:  # compiled from a copy; its folder stays on the include path
            name = f"copied-{i}/{path.name}"
            if str(path.parent) not in left_in_place:
                left_in_place.append(str(path.parent))
        else:
            name = f"{folder}/{path.name}"
        tree.files[name] = path.read_bytes()  # a source of any suffix
        tree.sources.append(name)
    for given in include_paths:
        folder_path = Path(os.path.abspath(given))
        label = locate(folder_path)
        tree.include_paths.append(label if label is not None else str(folder_path))
    tree.include_paths += [p for p in left_in_place if p not in tree.include_paths]
    return tree


def _read_folder(folder: Path) -> dict[str, bytes] | None:
    """The C / C++ / CUDA files under ``folder`` (all depths), by relative name; None if it
    is too large to copy."""
    found: dict[str, bytes] = {}
    entries = total = 0
    if not folder.is_dir():
        return found  # a missing include folder: nothing to see there
    for top, dirs, names in os.walk(folder, followlinks=False):
        dirs.sort()
        entries += len(dirs) + len(names)
        if entries > _MAX_ENTRIES:
            return None
        for name in sorted(names):
            path = Path(top) / name
            if path.suffix not in CODE_SUFFIXES or not path.is_file():
                continue
            data = path.read_bytes()
            total += len(data)
            if len(found) >= _MAX_FILES or total > _MAX_BYTES:
                return None
            found[path.relative_to(folder).as_posix()] = data
    return found
