"""Where a run's metrics go: metrics.jsonl, TensorBoard event files, PNG curves, the progress bar."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorboard")
pytest.importorskip("matplotlib")

from matplotlib.image import imread
from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator,
)

from cuda_agent.runner.checkpoint import RunState, load_state, save_state
from cuda_agent.runner.metrics import RunMetrics, StageProgress, plot_curves


def _scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_numeric_fields_become_stage_tags_at_the_record_number(tmp_path: Path) -> None:
    with RunMetrics(tmp_path) as metrics:
        metrics.write({"stage": "eval_before", "mean_reward": 0.25, "per_task": {"a": 1, "b": 0.5}})
        metrics.write(
            {
                "stage": "rl",
                "step": 0,
                "mean_reward": 0.5,
                "loss": -1.5,
                "done": True,  # bool: not a number
                "note": "text",
                "speedup": None,
                "tasks": ["a", "b"],
                "feedback": {"a": "ok"},  # a dict of strings: nothing
                "deep": {"x": {"y": 1.0}},  # two levels: nothing
            }
        )
        metrics.write({"stage": "rl", "step": 1, "mean_reward": 0.75, "loss": -1.0})

    assert [r["stage"] for r in _lines(tmp_path)] == ["eval_before", "rl", "rl"]
    scalars = _scalars(tmp_path)
    assert set(scalars) == {
        "eval_before/mean_reward",
        "eval_before/per_task/a",
        "eval_before/per_task/b",
        "rl/step",
        "rl/mean_reward",
        "rl/loss",
    }
    assert scalars["eval_before/mean_reward"] == [(0, 0.25)]
    assert scalars["eval_before/per_task/b"] == [(0, 0.5)]
    assert scalars["rl/mean_reward"] == [(1, 0.5), (2, 0.75)]
    assert scalars["rl/loss"] == [(1, -1.5), (2, -1.0)]


def test_a_resumed_run_continues_the_steps_and_hides_the_cut_records(tmp_path: Path) -> None:
    metrics = RunMetrics(tmp_path)
    metrics.write({"stage": "rl", "step": 0, "mean_reward": 0.1})
    save_state(tmp_path, RunState(rl_steps_done=1, metrics_bytes=metrics.size()))
    metrics.write({"stage": "rl", "step": 1, "mean_reward": 0.9})  # killed before the commit
    metrics.close()

    resumed = RunMetrics(tmp_path)
    assert resumed.global_step == 2
    resumed.truncate(load_state(tmp_path).metrics_bytes or 0)
    assert resumed.global_step == 1
    resumed.write({"stage": "rl", "step": 1, "mean_reward": 0.5})  # the step redone
    resumed.write({"stage": "rl", "step": 2, "mean_reward": 0.6})
    resumed.close()

    assert [r["mean_reward"] for r in _lines(tmp_path)] == [0.1, 0.5, 0.6]
    mean_reward = _scalars(tmp_path)["rl/mean_reward"]  # float32 in the event files
    assert [s for s, _ in mean_reward] == [0, 1, 2]
    assert [v for _, v in mean_reward] == pytest.approx([0.1, 0.5, 0.6])

    again = RunMetrics(tmp_path)  # a resume with nothing to cut starts after the last line
    assert again.global_step == 3
    again.write({"stage": "eval_after", "mean_reward": 0.7})
    again.close()
    [(step, value)] = _scalars(tmp_path)["eval_after/mean_reward"]
    assert step == 3 and value == pytest.approx(0.7)


def test_jsonl_only_writes_no_event_files(tmp_path: Path) -> None:
    with RunMetrics(tmp_path, tensorboard=False) as metrics:
        metrics.write({"stage": "rl", "step": 0, "mean_reward": 1.0})
        assert metrics.size() == (tmp_path / "metrics.jsonl").stat().st_size
    assert _lines(tmp_path) == [{"stage": "rl", "step": 0, "mean_reward": 1.0}]
    assert not (tmp_path / "tensorboard").exists()


def test_missing_tensorboard_is_a_clear_import_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if not installed
    with pytest.raises(ImportError, match="pip install tensorboard"):
        RunMetrics(tmp_path)
    RunMetrics(tmp_path, tensorboard=False).write({"stage": "rl", "mean_reward": 0.0})


def _is_png(path: Path) -> bool:
    head = path.read_bytes()[:8]
    image = imread(path)
    return head == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 2000 and image.ndim == 3


def _write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_plot_curves_writes_a_figure_per_present_group(tmp_path: Path) -> None:
    records: list[dict] = [
        {  # an old run's record: fast_1 under its old name
            "stage": "heldout_before",
            "pass_rate": 0.2,
            "faster_than_eager": 0.1,
            "faster_than_compile": None,
        },
        {"stage": "eval_before", "mean_reward": 0.1, "mean_response_tokens": 100},
        {"stage": "warmstart", "step": 0, "nll": 2.0},
    ]
    for step in range(4):
        records.append(
            {
                "stage": "rl",
                "step": step,
                "mean_reward": 0.1 * step,
                "approx_kl": 0.01 if step != 2 else None,
                "clip_fraction": 0.05,
                "ratio_max": 1.5 + step,
                "mean_response_tokens": 200 - step,
                "per_task": {"a": 1.0},
            }
        )
    records += [
        {"stage": "rft", "mean_reward": 0.5},  # no step: its order within the stage
        {"stage": "rft", "mean_reward": None},
        {
            "stage": "heldout_after",
            "pass_rate": 0.6,
            "fast_1": 0.4,
            "fast_1_compile": 0.1,
        },
    ]
    path = tmp_path / "metrics.jsonl"
    _write_jsonl(path, records)
    with path.open("a") as fh:
        fh.write('{"stage": "rl", "st')  # a line cut by a kill
    out = tmp_path / "plots"

    written = plot_curves(path, out)

    names = ["reward.png", "stability.png", "lengths.png", "heldout.png"]
    assert sorted(p.name for p in written) == sorted(names)
    assert sorted(p.name for p in out.iterdir()) == sorted(names)  # no value / throughput
    assert all(_is_png(p) for p in written)


def test_plot_curves_of_value_and_throughput_only(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    _write_jsonl(
        path,
        [
            {
                "stage": "value",
                "step": i,
                "value_loss": 1.0 / (i + 1),
                "explained_variance": 0.1 * i,
            }
            for i in range(3)
        ]
        + [{"stage": "rl", "step": 0, "tokens_per_s": 1234.5}],
    )
    written = plot_curves(path, tmp_path)
    assert sorted(p.name for p in written) == ["throughput.png", "value.png"]
    assert all(_is_png(p) for p in written)


def test_plot_curves_writes_nothing_without_its_metrics(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    _write_jsonl(
        path,
        [
            {"stage": "rl", "step": 0, "mean_reward": None, "entropy": None},
            {"stage": "heldout_after", "pass_rate": None},
            {"stage": "warmstart", "step": 0, "nll": 1.0},
            {},
        ],
    )
    assert plot_curves(path, tmp_path / "plots") == []
    assert not (tmp_path / "plots").exists()
    assert plot_curves(tmp_path / "absent.jsonl", tmp_path / "plots") == []


def test_stage_progress_shows_the_stage_and_counts_the_whole_run() -> None:
    out = io.StringIO()
    with StageProgress(5, file=out, mininterval=0) as progress:
        progress.stage("eval_before", 1)
        progress.advance()
        progress.stage("rl", 4)
        progress.advance(3)
        assert progress.bar.n == 4 and progress.bar.total == 5
        assert "stage rl 3/4" in progress.bar.desc
    text = out.getvalue()
    assert "stage eval_before" in text and "stage rl 3/4" in text

    quiet = StageProgress(3, enabled=False)
    quiet.stage("rl", 3)
    quiet.advance()
    quiet.close()
