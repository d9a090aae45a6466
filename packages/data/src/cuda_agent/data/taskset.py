"""Task sets: ordered, immutable collections of tasks with metadata and operator families.

A family is the operator combination a task exercises. Splitting by family keeps every task of a
combination on one side, so a held-out task's combination is never trained on.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from cuda_agent.kernel_sandbox import Task, TaskError, load_tasks

from .model_code import torch_call_names

MANIFEST = "manifest.jsonl"


def _bare_operator(name: str) -> str:
    """``torch.nn.functional.GELU`` -> ``gelu``: the last dotted component, lower-case."""
    return name.strip().rsplit(".", 1)[-1].lower()


def parse_ops(value: object) -> tuple[str, ...]:
    """Operator names from an ``ops`` value: a list of strings, or a string holding a JSON or
    Python list, or comma-separated names. ``None`` gives ``()``; anything else ``ValueError``."""
    if value is None:
        return ()
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                try:
                    parsed = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    parsed = None
            if isinstance(parsed, list):
                return parse_ops(parsed)
            raise ValueError(f"ops {value!r} looks like a list but does not parse as one")
        return tuple(op.strip() for op in text.split(",") if op.strip())
    if isinstance(value, list | tuple) and all(isinstance(op, str) for op in value):
        return tuple(op.strip() for op in value if op.strip())
    raise ValueError(f"ops must be a list of strings or a string, got {value!r}")


def family_of(task: Task, metadata: Mapping[str, Any] | None = None) -> str:
    """The operator-combination key of a task.

    ``metadata["family"]`` when the metadata records one (a synthesized task's manifest row:
    ``Composition.family``, where an axis op counts as its operator, ``sum_dim`` as ``sum``).
    Else from ``metadata["ops"]`` when it lists operators (anything ``parse_ops`` reads): their bare
    lower-case names (``torch.nn.functional.gelu`` -> ``gelu``, as for source-derived
    families), sorted, de-duplicated, joined with ``+``. Otherwise from the
    source: the torch calls its model code makes (``model_code.torch_call_names``). A task with
    neither gets a family of its own, ``task:<name>``.
    """
    recorded = (metadata or {}).get("family")
    if isinstance(recorded, str) and recorded:
        return recorded
    try:
        names = {_bare_operator(op) for op in parse_ops((metadata or {}).get("ops"))}
    except ValueError:
        names = set()
    names.discard("")
    if not names:
        try:
            names = set(torch_call_names(task.source))
        except ValueError:
            names = set()
    return "+".join(sorted(names)) if names else f"task:{task.name}"


@dataclass(frozen=True)
class TaskEntry:
    """A task with its metadata (read-only) and family. Build with ``TaskEntry.of``."""

    task: Task
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    family: str = ""

    @classmethod
    def of(
        cls, task: Task, metadata: Mapping[str, Any] | None = None, family: str | None = None
    ) -> TaskEntry:
        """An entry whose family is ``family`` if given, else ``family_of(task, metadata)``."""
        meta = MappingProxyType(dict(metadata or {}))
        return cls(task=task, metadata=meta, family=family or family_of(task, meta))

    @property
    def name(self) -> str:
        return self.task.name


@dataclass(frozen=True)
class Skipped:
    """An input a loader could not turn into a task (``skip_broken=True``), and why."""

    source: str
    reason: str


def _key_hash(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}\x00{key}".encode()).hexdigest()


class TaskSet:
    """An ordered, immutable set of tasks with unique names.

    Iterating yields ``Task`` values (so a set goes wherever a list of tasks goes);
    ``entries`` and ``entry(name)`` give the metadata and family as well. ``skipped`` lists the
    inputs a loader skipped (``skip_broken=True``); derived sets (``filter``, ``split``) carry
    none, ``concat`` joins them.
    """

    __slots__ = ("_by_name", "_entries", "_skipped")

    def __init__(self, entries: Iterable[TaskEntry], skipped: Iterable[Skipped] = ()) -> None:
        self._entries = tuple(entries)
        self._skipped = tuple(skipped)
        by_name: dict[str, TaskEntry] = {}
        duplicates: list[str] = []
        for entry in self._entries:
            if entry.name in by_name:
                duplicates.append(entry.name)
            by_name[entry.name] = entry
        if duplicates:
            raise ValueError(
                f"task names must be unique; repeated: {sorted(set(duplicates))[:10]} "
                "(rename the tasks or filter one of each out before building the set)"
            )
        self._by_name = by_name

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_tasks(
        cls,
        tasks: Iterable[Task],
        metadata: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> TaskSet:
        """A set of ``tasks`` in the given order; ``metadata`` maps a task name to its metadata.

        A metadata name with no task is an error (a typo would otherwise go unnoticed).
        """
        tasks = list(tasks)
        metadata = metadata or {}
        unknown = sorted(set(metadata) - {t.name for t in tasks})
        if unknown:
            raise ValueError(f"metadata given for tasks not in the set: {unknown[:10]}")
        return cls(TaskEntry.of(t, metadata.get(t.name)) for t in tasks)

    @classmethod
    def from_dir(cls, path: str | Path) -> TaskSet:
        """Tasks under a directory (``kernel_sandbox.load_tasks``: ``*.py`` files and task
        directories, sorted by name), with metadata from ``manifest.jsonl`` there if present:
        one JSON object per line, ``{"name": <task name>, ...}``; the other keys become the
        task's metadata."""
        path = Path(path)
        tasks = load_tasks(path)
        manifest = path / MANIFEST
        metadata = _read_manifest(manifest) if manifest.is_file() else {}
        unknown = sorted(set(metadata) - {t.name for t in tasks})
        if unknown:
            raise TaskError(f"{manifest} names tasks that are not in {path}: {unknown[:10]}")
        return cls.from_tasks(tasks, metadata)

    @classmethod
    def concat(cls, *sets: TaskSet) -> TaskSet:
        """The sets one after another (names must stay unique across them)."""
        return cls(
            (e for s in sets for e in s._entries),
            skipped=(k for s in sets for k in s._skipped),
        )

    # ------------------------------------------------------------------ access

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Task]:
        return (e.task for e in self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> Task:
        return self.entry(name).task

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskSet) and self._entries == other._entries

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(self.names[:5]) + (", ..." if len(self) > 5 else "")
        return f"TaskSet({len(self)} tasks: {shown})"

    def entry(self, name: str) -> TaskEntry:
        """The entry of the task called ``name`` (``KeyError`` naming close names if absent)."""
        try:
            return self._by_name[name]
        except KeyError:
            close = [n for n in self.names if name.lower() in n.lower()][:5]
            hint = f"; similar names: {close}" if close else ""
            raise KeyError(f"no task {name!r} in this set of {len(self)}{hint}") from None

    @property
    def entries(self) -> tuple[TaskEntry, ...]:
        return self._entries

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self._entries)

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        return self._skipped

    def tasks(self) -> list[Task]:
        return [e.task for e in self._entries]

    def families(self) -> dict[str, list[str]]:
        """Family -> names of its tasks, families in order of first appearance."""
        groups: dict[str, list[str]] = {}
        for entry in self._entries:
            groups.setdefault(entry.family, []).append(entry.name)
        return groups

    # ------------------------------------------------------------------ derived sets

    def filter(self, predicate: Callable[[TaskEntry], bool]) -> TaskSet:
        """The entries for which ``predicate(entry)`` is true, in order."""
        return TaskSet(e for e in self._entries if predicate(e))

    def split(
        self,
        heldout: float = 0.2,
        seed: int = 0,
        by: Literal["family", "task"] = "family",
    ) -> tuple[TaskSet, TaskSet]:
        """``(train, heldout)``: a deterministic split that ignores the set's order.

        Groups (families with ``by="family"``, single tasks with ``by="task"``) are ranked by
        a hash of ``(seed, group key)``; in that order a group joins the held-out side when it
        still fits within ``round(heldout * len(self))`` tasks. If no group fits but some
        share was asked for, the smallest group is held out (so a set of big families still
        gets a held-out side). Each side keeps this set's order.
        """
        if not 0.0 <= heldout <= 1.0:
            raise ValueError(f"heldout must be a fraction in [0, 1], got {heldout}")
        if by not in ("family", "task"):
            raise ValueError(f"by must be 'family' or 'task', got {by!r}")
        groups: dict[str, list[str]] = {}
        for entry in self._entries:
            groups.setdefault(entry.family if by == "family" else entry.name, []).append(entry.name)
        target = round(heldout * len(self))
        ranked = sorted(groups, key=lambda key: _key_hash(seed, key))
        held: set[str] = set()
        for key in ranked:
            if len(held) + len(groups[key]) <= target:
                held.update(groups[key])
        if not held and target > 0 and len(groups) > 1:
            smallest = min(ranked, key=lambda key: len(groups[key]))
            held.update(groups[smallest])
        train = TaskSet(e for e in self._entries if e.name not in held)
        return train, TaskSet(e for e in self._entries if e.name in held)

    def stream(self, seed: int = 0) -> Iterator[Task]:
        """An endless stream of the tasks: each pass a fresh permutation, fixed by ``seed``.

        The permutations are drawn over the tasks sorted by name, so the stream does not
        depend on the set's order.
        """
        if not self._entries:
            raise ValueError("cannot stream an empty task set")
        rng = random.Random(seed)
        ordered: Sequence[Task] = [self._by_name[n].task for n in sorted(self._by_name)]
        return _endless(ordered, rng)


def _endless(tasks: Sequence[Task], rng: random.Random) -> Iterator[Task]:
    while True:
        order = list(tasks)
        rng.shuffle(order)
        yield from order


def _read_manifest(path: Path) -> dict[str, dict[str, Any]]:
    """Name -> metadata from a JSON-lines manifest (blank lines skipped; rows with
    ``"kept": false``, candidates ``cuda-agent synth`` judged and dropped, are not tasks)."""
    metadata: dict[str, dict[str, Any]] = {}
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            raise TaskError(f'{path}:{lineno}: each row must be an object with a "name" string')
        if row.get("kept") is False:
            continue
        name = row.pop("name")
        if name in metadata:
            raise TaskError(f"{path}:{lineno}: task {name!r} appears twice")
        metadata[name] = row
    return metadata
