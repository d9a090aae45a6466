"""Run state on disk, written atomically so a run killed at any moment resumes cleanly.

Layout of a run directory::

    config.json        the resolved TrainConfig
    metrics.jsonl      one JSON object per finished step (appended, flushed)
    state.json         progress: finished stages, steps done in each, the latest checkpoint,
                       one record per invocation (a run resumed after a deadline or a kill)
    checkpoints/<name>/  adapter (peft format), value/ (the critic), optimizer.pt
    rft/episodes.jsonl the collected episodes (rejection fine-tuning, value pre-training)
    eval/<name>/       each evaluation's eval.json, eval.md, eval.png, per-task rows
    adapter/           the final adapter
    summary.json       written at the end
    report.html        then the page a person reads (``report``), from the files above
    .lock              held by the invocation writing the run (``run_lock.py``)
    jobs.jsonl         the sandbox's job log (``job_log_path``): each job's arrival, lane and
                       verdict as they happened (``kernel-sandbox jobs``), for a run that stalled

Every file a resumed run reads is replaced whole: written to a temporary name beside it,
fsynced, then moved over the old one with ``os.replace`` (``write_text_atomic``,
``write_json_atomic``); a checkpoint is written into a dot directory, fsynced and renamed
(``replace_dir``); the JSONL files are appended and fsynced, a torn last line cut on resume. A
kill (or a power cut) at any moment leaves the old file or the new one, never part of one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunState:
    finished_stages: list[str] = field(default_factory=list)
    stage_steps: dict[str, int] = field(default_factory=dict)  # steps done of each stage
    rl_steps_done: int = 0  # stage_steps["rl"], kept for readers of older runs
    checkpoint: str = ""  # relative to the run directory
    evaluations: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> summary
    eval_before: dict[str, Any] | None = None  # (older runs)
    # Bytes of metrics.jsonl that belong to finished work (None: a state from before this field).
    # A run killed after writing a record but before saving the state would otherwise leave that
    # record twice once the work is redone; resuming cuts the file back to this length.
    metrics_bytes: int | None = None
    train_seconds: float = 0.0  # wall seconds of the training stages so far, across resumes
    budget_cuts: dict[str, int] = field(default_factory=dict)  # stage -> steps the budget cut
    # One record per invocation of ``train`` (a run resumed after a deadline or a kill spans
    # several): ``started`` (ISO time), ``seconds`` (its wall time up to its last save),
    # ``end`` ("finished", "deadline", or "" when it was killed or is running),
    # ``stopped_before`` (the unit a deadline stopped it before) and ``stage_steps`` reached.
    sessions: list[dict[str, Any]] = field(default_factory=list)
    # The longest unit of each kind (a stage's step, "evaluation <set>", "collection",
    # "baselines") in seconds, over every invocation: a deadline's estimates (deadline.py).
    unit_seconds: dict[str, float] = field(default_factory=dict)

    def steps_done(self, stage: str) -> int:
        return self.stage_steps.get(stage, 0)


def _holds_weights(path: Path) -> bool:
    """Whether ``path`` holds what ``Policy.save`` writes (an adapter or full weights)."""
    return (path / "adapter_config.json").is_file() or any(path.glob("*.safetensors"))


def trained_weights(spec: str | Path) -> Path:
    """The directory of the weights ``spec`` names: a run directory's final ``adapter/``, else
    its last committed checkpoint's (a run stopped by a deadline or killed), or a directory
    ``Policy.save`` wrote. ``ValueError`` naming what is missing otherwise."""
    path = Path(spec)
    if not path.is_dir():
        raise ValueError(f"{spec} does not exist (a run directory or an adapter directory)")
    if _holds_weights(path):
        return path
    if _holds_weights(path / "adapter"):
        return path / "adapter"
    state = path / "state.json"
    if state.is_file():
        checkpoint = load_state(path).checkpoint
        if checkpoint and _holds_weights(path / checkpoint / "adapter"):
            return path / checkpoint / "adapter"
    raise ValueError(
        f"{spec} holds no trained weights (adapter_config.json or *.safetensors as Policy.save "
        "writes them; a training run keeps its final ones in RUN/adapter and the last "
        "checkpoint's in RUN/checkpoints/<name>/adapter)"
    )


def job_log_path(run_dir: Path) -> str | None:
    """Where a run's (or an evaluation's) sandbox writes its job log: ``run_dir/jobs.jsonl``,
    or None where ``$CUDA_AGENT_JOB_LOG`` names a file already (the sandbox writes there: one
    file for several runs, as ``benchmarks/gpu/learning_run.py`` keeps one per device call).
    Appended to, never read back by the run: a log cut by a kill does no harm."""
    return None if os.environ.get("CUDA_AGENT_JOB_LOG") else str(run_dir / "jobs.jsonl")


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` whole: a temporary file, fsynced, then ``os.replace``."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2))


def fsync_tree(root: Path) -> None:
    """Flush every file under ``root`` to disk (before a rename makes the directory current:
    after a power cut the rename could otherwise survive while the contents did not)."""
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with path.open("rb") as fh:
                os.fsync(fh.fileno())


def load_state(run_dir: Path) -> RunState:
    path = run_dir / "state.json"
    if not path.exists():
        return RunState(metrics_bytes=0)  # nothing finished: any metrics line is unfinished work
    return RunState(**json.loads(path.read_text()))


def save_state(run_dir: Path, state: RunState) -> None:
    write_json_atomic(run_dir / "state.json", asdict(state))


def replace_dir(staged: Path, final: Path) -> None:
    """Move a fully written directory into place (the old one is removed only afterwards);
    its files are fsynced first."""
    fsync_tree(staged)
    old = final.with_name(final.name + ".old")
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(staged, final)
    shutil.rmtree(old, ignore_errors=True)


class BackgroundWriter:
    """One thread that writes checkpoints while training goes on, one at a time and in order:
    ``submit`` waits for the write before it (so at most one is in flight), ``wait`` for the
    last. A write that failed raises in the caller at the next ``submit`` or ``wait``."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")
        self._pending: Any = None

    def submit(self, write: Callable[[], None]) -> None:
        self.wait()
        self._pending = self._pool.submit(write)

    def wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()  # its exception, if it raised

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._pool.shutdown(wait=True)


class MetricsWriter:
    """Appends one JSON line per record and flushes, so a crash loses nothing finished."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def truncate(self, size: int) -> None:
        """Drop everything after the first ``size`` bytes (records of unfinished work)."""
        if self.path.exists() and self.path.stat().st_size > size:
            with self.path.open("r+b") as fh:
                fh.truncate(size)
                os.fsync(fh.fileno())

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
