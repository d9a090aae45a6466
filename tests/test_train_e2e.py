"""`cuda-agent train` end to end: stages, metrics, adapter, and resuming a killed run.

Runs the real command in a subprocess with a tiny random model (built from a config and saved
to disk, so the real loading path is used) and the real sandbox on the CPU backend. One slow
test runs the embedded default model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.policy.testing import save_tiny_model

SMALL = [
    "--steps", "2",
    "--warmstart-steps", "2",
    "--tasks-per-step", "2",
    "--group-size", "2",
    "--max-new-tokens", "24",
    "--eval-tasks", "2",
    "--lora-rank", "4",
    "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def _train(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent.runner", "train", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_train_runs_every_stage_and_writes_outputs(tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    proc = _train("--model", str(tiny_model_dir), "--out", str(run), "--backend", "cpu", *SMALL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stages = [r["stage"] for r in _records(run)]
    assert stages == ["eval_before", "warmstart", "warmstart", "rl", "rl", "eval_after"]
    rl = [r for r in _records(run) if r["stage"] == "rl"]
    assert all(len(r["tasks"]) == 2 and -1.0 <= r["mean_reward"] <= 3.0 for r in rl)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["rl_steps"] == 2 and summary["backend"] == "cpu"
    assert summary["mean_reward_before"] is not None and summary["mean_reward_after"] is not None
    assert (run / "adapter" / "adapter_config.json").exists()
    assert json.loads((run / "state.json").read_text())["rl_steps_done"] == 2
    # One checkpoint per stage is kept: the committed one.
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["rl-2", "warmstart"]


def test_a_killed_run_resumes_without_redoing_finished_work(tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    args = ["--model", str(tiny_model_dir), "--out", str(run), "--backend", "cpu", *SMALL]
    args[args.index("--steps") + 1] = "3"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cuda_agent.runner", "train", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    state_file = run / "state.json"
    deadline = time.monotonic() + 600
    # Kill it hard as soon as the first RL step has been checkpointed.
    while time.monotonic() < deadline and proc.poll() is None:
        if state_file.exists() and json.loads(state_file.read_text())["rl_steps_done"] >= 1:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.2)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    done_before = json.loads(state_file.read_text())["rl_steps_done"]

    resumed = _train("--resume", str(run), "--quiet")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    records = _records(run)
    stages = [r["stage"] for r in records]
    assert stages.count("eval_before") == 1 and stages.count("warmstart") == 2
    rl_steps = [r["step"] for r in records if r["stage"] == "rl"]
    assert rl_steps == [0, 1, 2], f"killed after {done_before} steps, got {rl_steps}"
    assert stages[-1] == "eval_after"
    assert json.loads((run / "summary.json").read_text())["rl_steps"] == 3


def test_bad_arguments_get_clear_errors(tmp_path):
    proc = _train("--group-size", "0")
    assert proc.returncode == 2 and "--group-size must be >= 1" in proc.stderr
    proc = _train("--resume", str(tmp_path))
    assert proc.returncode == 2 and "not a run directory" in proc.stderr
    proc = _train("--model", str(tmp_path / "missing"), "--out", str(tmp_path / "r"), "--quiet")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "missing" in proc.stderr


@pytest.mark.slow
def test_default_model_trains_end_to_end(tmp_path):
    run = tmp_path / "run"
    small = [a for a in SMALL if a not in ("--lora-rank", "4")]
    proc = _train("--out", str(run), "--backend", "cpu", *small, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["model"] == "smollm2-135m-gguf"
    assert (run / "adapter" / "adapter_config.json").exists()
