"""``synthesize``: composed tasks through every filter into a directory, resumable.

    report = synthesize("tasks/", count=1000, backend="cpu", seed=0, kernelbench=kb_sources)

Candidates are drawn one index at a time (``compose`` under ``Random(f"{seed}:{index}")``, so
candidate ``i`` is the same whatever ran before it) and judged in rounds: first in this
process, on their text only (``heldout_family``: an excluded operator combination; then, by
normalised-AST similarity, ``duplicate`` of a task already kept and the ``against`` corpora,
e.g. ``kernelbench``: any at or above ``threshold``, 0.9 as the reference system), then in the
sandbox (``filters.run_filters``). Each kept task is written as ``DIR/<name>/task.py`` (and
``solution_cpu.py`` when ``solutions`` and the chain has a C form); every candidate, kept or
not, is one line of ``DIR/manifest.jsonl`` (ops, sizes, times, the filter that dropped it, the
nearest KernelBench problem and its similarity), appended after its files are written. A killed
run resumes from the manifest: finished candidates are neither lost nor judged again.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .compose import Composition, compose
from .filters import SANDBOX_FILTERS, Filters, FilterVerdict
from .similarity import Fingerprint, SimilarityIndex, fingerprint
from .sizing import WINDOWS
from .solutions import can_write, cpu_solution

TEXT_FILTERS = ("heldout_family", "duplicate")
MANIFEST = "manifest.jsonl"


class Corpus:
    """Named sources to compare a candidate with (``similarity.SimilarityIndex``), growable."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self._prints: dict[str, Fingerprint] = {n: fingerprint(s) for n, s in sources.items()}

    def add(self, name: str, source: str) -> None:
        self._prints[name] = fingerprint(source)

    def remove(self, name: str) -> None:
        self._prints.pop(name, None)

    def nearest(self, source: str) -> tuple[str | None, float]:
        return SimilarityIndex(self._prints.items()).nearest(source)


@dataclass
class SynthReport:
    """What a run made: candidates judged, kept, dropped per filter (in filter order), the
    kept tasks' operator counts, and the seconds spent (this process's runs, summed)."""

    candidates: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    op_counts: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    filters: tuple[str, ...] = ()

    def yields(self) -> dict[str, dict[str, float | int]]:
        """Per filter: how many candidates reached it, how many it dropped, and the share
        that passed it."""
        out, reaching = {}, self.candidates
        for name in self.filters:
            dropped = self.dropped.get(name, 0)
            out[name] = {
                "in": reaching,
                "dropped": dropped,
                "passed": (reaching - dropped) / reaching if reaching else 0.0,
            }
            reaching -= dropped
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidates": self.candidates,
            "kept": self.kept,
            "yield": self.kept / self.candidates if self.candidates else 0.0,
            "filters": self.yields(),
            "op_counts": {str(k): v for k, v in sorted(self.op_counts.items())},
            "seconds": self.seconds,
            "seconds_per_candidate": self.seconds / self.candidates if self.candidates else 0.0,
            "seconds_per_kept_task": self.seconds / self.kept if self.kept else 0.0,
        }


def synthesize(
    out: str | Path,
    count: int,
    backend: Literal["cpu", "cuda"] = "cpu",
    max_ops: int = 5,
    seed: int = 0,
    workers: int = 2,
    teachable: bool = False,
    axes: bool = False,
    solutions: bool = True,
    against: Mapping[str, Mapping[str, str]] | None = None,
    exclude_families: Collection[str] = (),
    threshold: float = 0.9,
    max_candidates: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> SynthReport:
    """Synthesize until ``count`` tasks are kept in ``out`` (or ``max_candidates`` are judged:
    0 means 50 per task asked). ``against`` maps a filter name to a corpus (task name ->
    source) no kept task may resemble; ``exclude_families`` lists operator combinations
    (``Composition.family``) never kept. ``teachable`` and ``axes`` are ``compose``'s.
    ``progress(kept, candidates)`` after each round."""
    if backend not in WINDOWS:
        raise ValueError(f"backend must be one of {sorted(WINDOWS)}, got {backend!r}")
    if count < 1:
        raise ValueError("count must be >= 1")
    if axes and not teachable:
        raise ValueError("axes draws teachable chains only: pass teachable=True (--teachable)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    against = dict(against or {})
    filters = (TEXT_FILTERS[0], *against, TEXT_FILTERS[1], *SANDBOX_FILTERS, "surplus")
    report = SynthReport(filters=filters)
    done = _read_manifest(out / MANIFEST)
    corpora = {name: Corpus(sources) for name, sources in against.items()}
    kept_corpus = Corpus({})
    for row in done:
        _count(report, row)
        if row["kept"]:
            kept_corpus.add(row["name"], (out / row["name"] / "task.py").read_text())
    index = 1 + max((row["index"] for row in done), default=-1)
    limit = max_candidates or 50 * count
    started = time.perf_counter()
    with (
        (out / MANIFEST).open("a") as manifest,
        Filters(backend, WINDOWS[backend], workers) as lanes,
    ):
        while report.kept < count and index < limit:
            size = min(max(2 * workers, round(1.3 * (count - report.kept))), 64, limit - index)
            batch = [
                compose(random.Random(f"{seed}:{i}"), i, max_ops, teachable=teachable, axes=axes)
                for i in range(index, index + size)
            ]
            index += size
            rows = _judge(
                batch, out, backend, lanes, solutions, corpora, kept_corpus,
                exclude_families, threshold, count - report.kept,
            )  # fmt: skip
            for row in rows:
                manifest.write(json.dumps(row) + "\n")
                _count(report, row)
            manifest.flush()
            os.fsync(manifest.fileno())
            if progress is not None:
                progress(report.kept, report.candidates)
    report.seconds += time.perf_counter() - started
    (out / "synth_report.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    return report


def _judge(
    batch: list[Composition],
    out: Path,
    backend: Literal["cpu", "cuda"],
    lanes: Filters,
    solutions: bool,
    corpora: Mapping[str, Corpus],
    kept_corpus: Corpus,
    exclude_families: Collection[str],
    threshold: float,
    wanted: int,
) -> list[dict[str, Any]]:
    """Manifest rows for ``batch``, in index order; kept tasks' files written (at most
    ``wanted`` kept: later ones are dropped as ``surplus`` and not written)."""
    rows: dict[int, dict[str, Any]] = {}
    survivors: list[Composition] = []
    for index, comp in enumerate(batch):
        row = _row(comp, backend)
        nearest = {name: corpus.nearest(comp.source) for name, corpus in corpora.items()}
        for name, (problem, score) in nearest.items():
            row[f"nearest_{name}"], row[f"{name}_similarity"] = problem, score
        row["dropped_by"] = None
        if comp.family in exclude_families:
            row.update(dropped_by="heldout_family", reason=f"family {comp.family} is held out")
        else:
            for name, (problem, score) in nearest.items():
                if score >= threshold:
                    row.update(dropped_by=name, reason=f"{score:.3f} similar to {problem}")
                    break
        if row["dropped_by"] is None:
            twin, score = kept_corpus.nearest(comp.source)
            row["nearest_kept"], row["kept_similarity"] = twin, score
            if score >= threshold:
                row.update(dropped_by="duplicate", reason=f"{score:.3f} similar to {twin}")
            else:
                kept_corpus.add(comp.name, comp.source)  # near-duplicates within the batch too
                survivors.append(comp)
        rows[index] = row
    written = {c.name: cpu_solution(c) for c in survivors if solutions and can_write(c)}
    verdicts = lanes.run([c.to_task() for c in survivors], written if backend == "cpu" else None)
    by_name: dict[str, FilterVerdict] = {v.task: v for v in verdicts}
    kept = 0
    for index, comp in enumerate(batch):
        row = rows[index]
        verdict = by_name.get(comp.name)
        if verdict is None:
            continue
        row.update(
            eager_ms=verdict.eager_ms,
            compile_ms=verdict.compile_ms,
            dropped_by=verdict.dropped_by,
            reason=verdict.reason,
            solution=verdict.solution_ok,
        )
        if verdict.kept and kept >= wanted:
            row.update(dropped_by="surplus", reason="the count was reached in this round")
        if row["dropped_by"] is not None:
            kept_corpus.remove(comp.name)
            continue
        kept += 1
        _write_task(out / comp.name, comp, written.get(comp.name) if verdict.solution_ok else None)
    for row in rows.values():
        row["kept"] = row["dropped_by"] is None
    return [rows[i] for i in range(len(batch))]


def _row(comp: Composition, backend: str) -> dict[str, Any]:
    return {
        "index": int(comp.name.split("_")[1]),
        "name": comp.name,
        "backend": backend,
        **comp.metadata(),
        "n_ops": len(comp.ops),
        "teachable": can_write(comp),
    }


def _write_task(directory: Path, comp: Composition, solution: str | None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    if solution is not None:
        _atomic_write(directory / "solution_cpu.py", solution)
    _atomic_write(directory / "task.py", comp.source)


def _atomic_write(path: Path, text: str) -> None:
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(text)
    os.replace(staged, path)


def _read_manifest(path: Path) -> list[dict[str, Any]]:
    """The manifest's complete rows. A last line cut by a kill is dropped from the file (that
    candidate is judged again)."""
    if not path.is_file():
        return []
    text = path.read_text()
    complete, _, partial = text.rpartition("\n")
    rows = [json.loads(line) for line in complete.split("\n") if line.strip()]
    if partial:
        path.write_text(complete + "\n" if complete else "")
    return rows


def _count(report: SynthReport, row: Mapping[str, Any]) -> None:
    report.candidates += 1
    if row["kept"]:
        report.kept += 1
        report.op_counts[row["n_ops"]] = report.op_counts.get(row["n_ops"], 0) + 1
    else:
        report.dropped[row["dropped_by"]] = report.dropped.get(row["dropped_by"], 0) + 1
