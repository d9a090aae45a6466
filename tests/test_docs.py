"""The documents cite only what is there: every repository path that the README,
ARCHITECTURE.md and the packages' READMEs name in backticks exists.

A README that cites a file the repository does not have (it once cited a ``DESIGN.md`` that was
never added) sends a newcomer nowhere. Only spans that read as repository paths are checked;
commands, templates (``runs/<timestamp>/``), globs and code are left alone. A span is a path when
it holds no blank and none of ``<>*{}[]()$|=,;'"`` and it

- starts with ``./`` or ``../``: it lies there, from the document's folder;
- starts with a folder at the top of the repository (``packages/``, ``src/``, ``tests/``,
  ``benchmarks/``, ``scripts/``, ``.ci/``): it lies under the document's folder or the root;
- starts with a folder of a package's source (``runner/trainer/loss.py``, ``_parent/gate.py``): it lies
  there (in a package's README, its own package's source; in the root's documents, any);
- is a bare ``.py`` file name (``compose.py``): some Python file of the repository has it;
- is an upper-case Markdown name (``ARCHITECTURE.md``): it lies beside the document or at the
  root.

Results' READMEs under ``benchmarks/results/`` are records of runs elsewhere and are not checked.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_FOLDERS = ("packages", "src", "tests", "benchmarks", "scripts", ".ci")
NOT_SOURCE = {".venv", ".git", "runs", "__pycache__", ".mypy_cache", ".ruff_cache", ".hypothesis"}
DOCS = [
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    *sorted((ROOT / "packages").glob("*/README.md")),
]
_FENCED = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+)`")
_NOT_A_PATH = set("<>*{}[]()$|=,;'\"\\")


def _spans(text: str) -> list[str]:
    """The backticked spans of ``text`` outside fenced code blocks that can be paths."""
    spans = _SPAN.findall(_FENCED.sub("", text))
    return [
        s.split("::")[0].rstrip("/")
        for s in spans
        if not any(c.isspace() or c in _NOT_A_PATH for c in s) and "..." not in s
    ]


def _source_folders(doc: Path) -> list[Path]:
    """Where a package-relative path of ``doc`` may lie: its package's source, or for the
    root's documents every package's source and the runner's parent."""
    if doc.parent.parent == ROOT / "packages":
        return [doc.parent / "src" / "cuda_agent" / doc.parent.name]
    packages = sorted((ROOT / "packages").glob("*/src/cuda_agent"))
    return [ROOT / "src" / "cuda_agent", *packages, *(p / p.parent.parent.name for p in packages)]


def _python_file_names() -> set[str]:
    """The names of the repository's Python files (the virtualenv and caches not walked)."""
    names: set[str] = set()
    for _, subfolders, files in os.walk(ROOT):
        subfolders[:] = [s for s in subfolders if s not in NOT_SOURCE]
        names |= {f for f in files if f.endswith(".py")}
    return names


def _missing(doc: Path, python_names: set[str]) -> list[str]:
    missing = []
    for path in _spans(doc.read_text()):
        first = path.split("/")[0]
        if first in (".", ".."):
            found = (doc.parent / path).exists()
        elif "/" in path and first in TOP_FOLDERS:
            found = (doc.parent / path).exists() or (ROOT / path).exists()
        elif "/" in path and any((f / first).is_dir() for f in _source_folders(doc)):
            found = any((f / path).exists() for f in _source_folders(doc))
        elif re.fullmatch(r"\w[\w.-]*\.py", path):
            found = path in python_names
        elif re.fullmatch(r"[A-Z][A-Z0-9_]*\.md", path):
            found = (doc.parent / path).exists() or (ROOT / path).exists()
        else:
            continue  # not a repository path: a command, a name, an output file
        if not found:
            missing.append(path)
    return missing


def test_the_path_finder_reads_paths_and_leaves_the_rest():
    text = (
        "See `ARCHITECTURE.md`, `tests/test_docs.py::test_x`, `runner/trainer/loss.py`, `compose.py`,\n"
        "not `runs/<timestamp>/`, `curves/*.png`, `bash scripts/test.sh` or `Policy.shard()`.\n"
        "```bash\n`scripts/not_checked.sh`\n```\n"
    )
    assert _spans(text) == [
        "ARCHITECTURE.md",
        "tests/test_docs.py",
        "runner/trainer/loss.py",
        "compose.py",
    ]


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.relative_to(ROOT).as_posix())
def test_every_path_a_document_cites_exists(doc: Path) -> None:
    assert doc.exists()
    assert _missing(doc, _python_file_names()) == []
