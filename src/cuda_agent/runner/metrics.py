"""Where a training run's metrics go: the JSONL record, TensorBoard, PNG curves, a progress bar.

``metrics.jsonl`` (``checkpoint.MetricsWriter``) is the record of truth: one line per finished
record, cut back on resume to the finished work. :class:`RunMetrics` writes each record there
and mirrors its numbers to TensorBoard under ``run_dir/tensorboard/`` (``tensorboard --logdir
runs/`` shows a live run). The TensorBoard global step of a record is its line number in the
JSONL, so a resumed run continues where the file ends instead of restarting at 0.

A cut (``truncate``) leaves the cut records in the event files already written; the next
writer opens with ``purge_step`` set to the file's new length, so TensorBoard hides the events
at and after that step, and where two values land on one step it shows the latest. When the
two disagree, trust the JSONL.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cuda_agent.reward import renamed_keys
from cuda_agent.runner.checkpoint import MetricsWriter

__all__ = ["NullMetrics", "RunMetrics", "StageProgress", "plot_curves"]

_INSTALL_HINT = (
    "TensorBoard logging needs the tensorboard package: pip install tensorboard "
    "(or pass tensorboard=False to write metrics.jsonl only)"
)


def _number(value: Any) -> float | None:
    """The value as a float when it is an int or float (bool and None are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class RunMetrics:
    """One training run's metrics: ``metrics.jsonl`` plus, optionally, TensorBoard scalars.

    Each numeric top-level field of a record becomes the scalar ``{stage}/{field}``; a dict of
    numbers one level deep becomes ``{stage}/{field}/{key}``. Other values (strings, lists,
    None, deeper dicts) are in the JSONL only.
    """

    def __init__(self, run_dir: Path | str, tensorboard: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.jsonl = MetricsWriter(self.run_dir / "metrics.jsonl")
        self.tensorboard = tensorboard
        self._writer: Any = None  # a SummaryWriter, opened at the first record
        if tensorboard:
            self._summary_writer_class()  # fail now, not at the first record
        self._step = self._count_lines()

    @staticmethod
    def _summary_writer_class() -> Any:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise ImportError(_INSTALL_HINT) from exc
        return SummaryWriter

    def _count_lines(self) -> int:
        if not self.jsonl.path.exists():
            return 0
        with self.jsonl.path.open("rb") as fh:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))

    @property
    def global_step(self) -> int:
        """The TensorBoard step of the next record (the number of records in the JSONL)."""
        return self._step

    def size(self) -> int:
        return self.jsonl.size()

    def truncate(self, size: int) -> None:
        """Cut the JSONL back to ``size`` bytes; the next record's step follows the cut file."""
        self.jsonl.truncate(size)
        step = self._count_lines()
        if step < self._step and self._writer is not None:
            self._writer.close()  # reopened with purge_step at the next record
            self._writer = None
        self._step = step

    def write(self, record: dict[str, Any]) -> None:
        self.jsonl.write(record)
        step, self._step = self._step, self._step + 1
        if not self.tensorboard:
            return
        if self._writer is None:
            writer_class = self._summary_writer_class()
            purge = {"purge_step": step} if step else {}  # hides events a cut left behind
            self._writer = writer_class(log_dir=str(self.run_dir / "tensorboard"), **purge)
        for tag, value in self.scalars(record):
            self._writer.add_scalar(tag, value, global_step=step)
        self._writer.flush()

    @staticmethod
    def scalars(record: dict[str, Any]) -> Iterator[tuple[str, float]]:
        """The (tag, value) pairs that a record logs to TensorBoard."""
        stage = str(record.get("stage", "run"))
        for key, value in record.items():
            if (number := _number(value)) is not None:
                yield f"{stage}/{key}", number
            elif isinstance(value, dict):
                for sub, inner in value.items():
                    if (number := _number(inner)) is not None:
                        yield f"{stage}/{key}/{sub}", number

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> RunMetrics:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NullMetrics:
    """What a process other than rank 0 writes its metrics to (``distributed.py``): nothing."""

    def size(self) -> int:
        return 0

    def truncate(self, size: int) -> None:
        pass

    def write(self, record: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------------- curves
# figure name -> the metrics it plots (a subplot each); stability also takes any ratio_* field
_CURVES: dict[str, list[str]] = {
    "reward": ["mean_reward"],
    "stability": ["entropy", "approx_kl", "kl", "clip_fraction", "ratio_max", "ratio_mean", "ess"],
    "value": ["explained_variance", "value_loss"],
    "lengths": ["mean_response_tokens", "turns_per_episode"],
    "throughput": ["tokens_per_s"],
}
_HELDOUT = ["pass_rate", "fast_1", "fast_1_compile"]


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` (none when it does not exist), a line cut mid-write
    by a kill left out."""
    records = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut mid-write by a kill
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _finite(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and math.isfinite(number) else None


def plot_curves(metrics_path: Path | str, out_dir: Path | str) -> list[Path]:
    """Write PNG curves of a run's metrics.jsonl into ``out_dir``; returns the files written.

    Training curves (``reward``, ``stability``, ``value``, ``lengths``, ``throughput``) have one
    subplot per metric and one line per training stage, against the record's ``step`` (or its
    order within the stage). ``heldout.png`` puts the eval_* / heldout_* records in run order.
    A figure none of whose metrics appear is not written; missing and None values are skipped.
    """
    records = read_records(Path(metrics_path))
    out = Path(out_dir)
    # series[metric][stage] = [(x, y), ...] over training stages
    series: dict[str, dict[str, list[tuple[float, float]]]] = {}
    order: dict[str, int] = {}
    evals: list[tuple[str, dict[str, Any]]] = []
    for record in records:
        stage = str(record.get("stage", "run"))
        if stage.startswith(("eval", "heldout")):
            # an old run's record names fast_1 faster_than_eager: read under its new name
            evals.append((stage, renamed_keys(record)))
            continue
        position = order.get(stage, 0)
        order[stage] = position + 1
        step = _number(record.get("step"))
        x = step if step is not None else float(position)
        for key, value in record.items():
            if (y := _finite(value)) is not None:
                series.setdefault(key, {}).setdefault(stage, []).append((x, y))

    written = []
    for name, wanted in _CURVES.items():
        extra = sorted(k for k in series if name == "stability" and k.startswith("ratio_"))
        metrics = [m for m in dict.fromkeys(wanted + extra) if m in series]
        if metrics:
            written.append(_save_curves(out / f"{name}.png", name, metrics, series))
    # evaluations that have any held-out metric, evenly spaced in run order
    shown = [(s, r) for s, r in evals if any(_finite(r.get(m)) is not None for m in _HELDOUT)]
    if shown:
        written.append(_save_heldout(out / "heldout.png", shown))
    return written


def _figure(rows: int) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 2.8 * rows), layout="constrained")
    FigureCanvasAgg(fig)  # Agg, without pyplot's global state
    return fig


def _save_curves(
    path: Path, title: str, metrics: list[str], series: dict[str, dict[str, list]]
) -> Path:
    fig = _figure(len(metrics))
    axes = fig.subplots(len(metrics), 1, squeeze=False)[:, 0]
    stages = list(dict.fromkeys(stage for m in metrics for stage in series[m]))
    for ax, metric in zip(axes, metrics, strict=True):
        for stage, xy in series[metric].items():
            xs, ys = zip(*xy, strict=True)
            color = f"C{stages.index(stage) % 10}"  # one colour per stage in every subplot
            marker = "o" if len(xy) < 30 else None
            ax.plot(xs, ys, marker=marker, markersize=3, color=color, label=stage)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[-1].set_xlabel("step within stage")
    return _save(fig, title, path)


def _save_heldout(path: Path, evals: list[tuple[str, dict[str, Any]]]) -> Path:
    fig = _figure(1)
    ax = fig.subplots()
    for metric in _HELDOUT:
        xy = [(i, y) for i, (_, r) in enumerate(evals) if (y := _finite(r.get(metric))) is not None]
        if xy:
            xs, ys = zip(*xy, strict=True)
            ax.plot(xs, ys, marker="o", label=metric)
    names = [s + (f" {r['step']}" if r.get("step") is not None else "") for s, r in evals]
    ax.set_xticks(range(len(evals)), names, rotation=30, ha="right", fontsize="small")
    ax.set_ylabel("fraction of tasks")
    ax.set_xlabel("evaluation, in run order")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _save(fig, "held-out evaluation", path)


def _save(fig: Any, title: str, path: Path) -> Path:
    fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")  # replaced whole (a kill mid-write)
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------------- progress
class StageProgress:
    """One tqdm bar over the whole run (its ETA is the run's), described by the current stage."""

    def __init__(self, total_units: int, enabled: bool = True, **tqdm_kwargs: Any) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total_units, disable=not enabled, unit="step", **tqdm_kwargs)
        self.name, self.units, self.done = "", 0, 0

    def stage(self, name: str, units: int) -> None:
        self.name, self.units, self.done = name, units, 0
        self._describe()

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._describe(refresh=False)
        self.bar.update(n)

    def _describe(self, refresh: bool = True) -> None:
        self.bar.set_description(f"stage {self.name} {self.done}/{self.units}", refresh=refresh)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> StageProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
