"""Loaders: KernelBench problem directories and CUDA-Agent-Ops-6K parquet rows as task sets.

Both read local files only (no network). A broken input raises ``TaskError`` naming it; with
``skip_broken=True`` it is left out, logged, and listed in the result's ``skipped``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from cuda_agent.kernel_sandbox import TaskError, task_from_source

from .taskset import Skipped, TaskEntry, TaskSet, parse_ops

log = logging.getLogger(__name__)

_LEVEL_DIR = re.compile(r"^level(\d+)$")
_PROBLEM_FILE = re.compile(r"^(\d+)_(.+)\.py$")


def _level_dirs(root: Path, levels: Iterable[int]) -> list[tuple[int, Path]]:
    """``(level, directory)`` for the requested levels found at ``root`` (any of the 3 layouts)."""
    wanted = set(levels)
    own = _LEVEL_DIR.match(root.name)
    if own:
        candidates = [(int(own.group(1)), root)]
    else:
        base = root / "KernelBench" if (root / "KernelBench").is_dir() else root
        candidates = [
            (int(m.group(1)), child)
            for child in base.iterdir()
            if child.is_dir() and (m := _LEVEL_DIR.match(child.name))
        ]
    return sorted((level, path) for level, path in candidates if level in wanted)


def load_kernelbench(
    root: str | Path,
    levels: Iterable[int] = (1, 2, 3, 4),
    *,
    skip_broken: bool = False,
) -> TaskSet:
    """KernelBench problems as they are: ``level{N}/{P}_{Name}.py`` -> task ``L{N}_{P}_{Name}``.

    ``root`` is a KernelBench checkout (holding ``KernelBench/level{N}/``), a directory holding
    ``level{N}/`` directories, or one ``level{N}`` directory. Tasks are ordered by level, then
    problem number; metadata is ``{"source": "kernelbench", "level", "problem", "file"}``.
    Requested levels that are absent are left out; finding none is a ``TaskError``. Files
    starting with ``_`` are ignored; any other ``.py`` file must be a valid problem.
    """
    root = Path(root)
    levels = tuple(levels)
    if not root.is_dir():
        raise TaskError(f"KernelBench root {root} is not a directory")
    found = _level_dirs(root, levels)
    if not found:
        raise TaskError(
            f"no KernelBench level directories for levels {list(levels)} under {root}; "
            "pass a KernelBench checkout, its KernelBench/ directory or one level<N>/ directory"
        )
    entries: list[tuple[tuple[int, int, str], TaskEntry]] = []
    skipped: list[Skipped] = []
    for level, directory in found:
        for path in directory.glob("*.py"):
            if path.name.startswith("_"):
                continue
            try:
                problem, entry = _kernelbench_entry(level, path)
            except TaskError as exc:
                if not skip_broken:
                    raise
                skipped.append(Skipped(source=str(path), reason=str(exc)))
                continue
            entries.append(((level, problem, path.name), entry))
    entries.sort(key=lambda pair: pair[0])
    _report(skipped, "KernelBench files")
    return TaskSet((entry for _, entry in entries), skipped=skipped)


def _kernelbench_entry(level: int, path: Path) -> tuple[int, TaskEntry]:
    match = _PROBLEM_FILE.match(path.name)
    if not match:
        raise TaskError(f"{path}: not a KernelBench problem file name (<number>_<Name>.py)")
    problem = int(match.group(1))
    try:
        source = path.read_text(encoding="utf-8")
        task = task_from_source(source, name=f"L{level}_{path.stem}")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: cannot be read ({exc})") from exc
    except TaskError as exc:
        raise TaskError(f"{path}: {exc}") from exc
    metadata = {"source": "kernelbench", "level": level, "problem": problem, "file": path.name}
    return problem, TaskEntry.of(task, metadata)


def load_ops6k(path: str | Path, *, skip_broken: bool = False) -> TaskSet:
    """CUDA-Agent-Ops-6K rows from a local parquet file, one task per row, in file order.

    Columns: ``code`` (the module source, required), ``ops`` (operator names: a list of
    strings, or a string holding a JSON list or comma-separated names; stored as a tuple),
    ``data_source``; every column but ``code`` is kept in the metadata, with ``"source":
    "ops6k"`` and ``"row"`` (the row index) added. The task is named by a non-empty ``name``
    or ``id`` column, else ``ops6k_{row:05d}``. Needs pyarrow (``cuda-agent-data[parquet]``).
    """
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError(
            "load_ops6k reads parquet with pyarrow: pip install cuda-agent-data[parquet]"
        ) from exc
    path = Path(path)
    if not path.is_file():
        raise TaskError(f"Ops-6K parquet file {path} does not exist")
    try:
        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises its own error types for unreadable files
        raise TaskError(f"{path}: cannot be read as parquet ({exc})") from exc
    if rows and "code" not in rows[0]:
        raise TaskError(
            f"{path}: no 'code' column (columns: {sorted(rows[0])}); "
            "CUDA-Agent-Ops-6K keeps each task's module source in 'code'"
        )
    entries: list[TaskEntry] = []
    skipped: list[Skipped] = []
    for index, row in enumerate(rows):
        try:
            entries.append(_ops6k_entry(path, index, row))
        except TaskError as exc:
            if not skip_broken:
                raise
            skipped.append(Skipped(source=f"{path}#row{index}", reason=str(exc)))
    _report(skipped, "Ops-6K rows")
    return TaskSet(entries, skipped=skipped)


def _ops6k_entry(path: Path, index: int, row: Mapping[str, Any]) -> TaskEntry:
    where = f"{path} row {index}"
    code = row.get("code")
    if not isinstance(code, str) or not code.strip():
        raise TaskError(f"{where}: 'code' is empty or not a string")
    try:
        ops = parse_ops(row.get("ops"))
    except ValueError as exc:
        raise TaskError(f"{where}: {exc}") from exc
    name = _row_name(row) or f"ops6k_{index:05d}"
    try:
        task = task_from_source(code, name=name)
    except TaskError as exc:
        raise TaskError(f"{where}: {exc}") from exc
    metadata = {k: v for k, v in row.items() if k != "code"}
    metadata.update({"source": "ops6k", "row": index, "ops": ops})
    return TaskEntry.of(task, metadata)


def _row_name(row: Mapping[str, Any]) -> str | None:
    for column in ("name", "id"):
        value = row.get(column)
        if value is not None and str(value).strip():
            return str(value).strip()
    return None


def _report(skipped: list[Skipped], what: str) -> None:
    if skipped:
        shown = "; ".join(s.reason for s in skipped[:3])
        log.warning(
            "skipped %d broken %s: %s%s",
            len(skipped),
            what,
            shown,
            " ..." if len(skipped) > 3 else "",
        )


EMBEDDED = (
    "cpu_compositions",
    "heldout_compositions",
    "axis_compositions",
    "heldout_axis_compositions",
)


def load_embedded(name: str = "cpu_compositions") -> TaskSet:
    """A task set shipped with this package (its ``manifest.jsonl`` and ``synth_report.json``
    beside the tasks; each task has a C solution the CPU sandbox judged correct and a compact
    CUDA solution written by ``solutions.cuda_solution``):

    - ``cpu_compositions``: 200 compositions of up to three elementwise or row-reduction
      operators, the training compositions, made by ``cuda-agent synth --count 200 --backend
      cpu --seed 1 --teachable --max-ops 3 --kernelbench KernelBench``. None has the operator
      combination of, or is 0.9 similar to, the trainer's built-in held-out tasks or a
      KernelBench problem.
    - ``heldout_compositions``: compositions from the same generator and distribution (seed 2),
      for evaluation only, never trained on: none has the operator combination (family) of a
      task of any training set (the runner's ``starter``, ``compact``, ``builtin``, ``synth``)
      or of a built-in held-out task, and none is 0.9 similar to one of those or to a
      KernelBench problem (``scripts/make_heldout_compositions.py`` in the repository made
      them). Their CUDA solutions have not been judged on a GPU yet.
    - ``axis_compositions``: training compositions that reduce or normalise along the axis
      an integer constructor argument names, as KernelBench's level-1 reductions and softmax
      (``compose(axes=True)``, seed 3: ``scripts/make_axis_compositions.py`` in the
      repository made them), each composed with another operator; the same rules against
      the held-out sets and KernelBench. A last-axis reduction (not argmax or argmin) ships a
      warp-per-row variant.
      Their CUDA solutions have not been judged on a GPU yet.
    - ``heldout_axis_compositions``: their held-out counterpart, for evaluation only (seed 4,
      ``make_axis_compositions.py --heldout``): no operator combination of, and nothing 0.9
      similar to, a task of any training set.
    """
    if name not in EMBEDDED:
        raise TaskError(f"no embedded task set {name!r}; there are: {', '.join(EMBEDDED)}")
    root = resources.files("cuda_agent.data") / "embedded" / name
    return TaskSet.from_dir(Path(str(root)))
