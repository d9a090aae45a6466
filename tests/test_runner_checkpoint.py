"""The runner's state and metrics files: what a resumed run trusts."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from cuda_agent.runner.checkpoint import (
    BackgroundWriter,
    MetricsWriter,
    RunState,
    load_state,
    save_state,
)


def test_metrics_cut_back_to_the_committed_length_drop_unfinished_records(tmp_path: Path) -> None:
    metrics = MetricsWriter(tmp_path / "metrics.jsonl")
    metrics.write({"stage": "rl", "step": 0})
    state = RunState(rl_steps_done=1, metrics_bytes=metrics.size())
    save_state(tmp_path, state)
    # Killed after the next step's record was written, before its state was saved:
    metrics.write({"stage": "rl", "step": 1})
    with (tmp_path / "metrics.jsonl").open("a") as fh:
        fh.write('{"stage": "rl", "st')  # and mid-line
    resumed = load_state(tmp_path)
    MetricsWriter(tmp_path / "metrics.jsonl").truncate(resumed.metrics_bytes or 0)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"stage": "rl", "step": 0}]


def test_a_state_from_before_metrics_bytes_still_loads(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(json.dumps({"finished_stages": ["eval_before"]}))
    state = load_state(tmp_path)
    assert state.metrics_bytes is None and state.finished_stages == ["eval_before"]


def test_a_run_killed_before_its_first_commit_starts_its_metrics_afresh(tmp_path: Path) -> None:
    MetricsWriter(tmp_path / "metrics.jsonl").write({"stage": "eval_before"})
    state = load_state(tmp_path)  # no state.json: nothing was committed
    MetricsWriter(tmp_path / "metrics.jsonl").truncate(state.metrics_bytes or 0)
    assert (tmp_path / "metrics.jsonl").read_text() == ""


def test_background_writes_land_in_order_one_at_a_time_and_their_errors_surface() -> None:
    """The checkpoint writer (a step's checkpoint written while the next step runs): writes
    run in the order given, never two at once; ``wait`` returns once the last has landed; a
    write that failed raises in the trainer at the next ``submit`` or ``wait``."""
    done: list[int] = []
    running = threading.Semaphore(1)

    def write(k: int) -> None:
        assert running.acquire(blocking=False), "two writes at once"
        time.sleep(0.01 * (3 - k))  # the earlier ones take longer
        done.append(k)
        running.release()

    writer = BackgroundWriter()
    for k in range(3):
        writer.submit(lambda k=k: write(k))
    writer.wait()
    assert done == [0, 1, 2]

    def fails() -> None:
        raise OSError("no space left on device")

    writer.submit(fails)
    with pytest.raises(OSError, match="no space"):
        writer.submit(lambda: write(0))
    writer.submit(fails)
    with pytest.raises(OSError, match="no space"):
        writer.close()


def test_a_run_keeps_its_job_log_unless_the_environment_names_one(
    tmp_path: Path, monkeypatch
) -> None:
    from cuda_agent.runner.checkpoint import job_log_path

    monkeypatch.delenv("CUDA_AGENT_JOB_LOG", raising=False)
    assert job_log_path(tmp_path) == str(tmp_path / "jobs.jsonl")
    monkeypatch.setenv("CUDA_AGENT_JOB_LOG", str(tmp_path / "call1.jsonl"))
    assert job_log_path(tmp_path) is None  # the sandbox writes where the environment says
