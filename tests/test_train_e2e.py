"""`cuda-agent train` end to end: stages, metrics, adapter, and resuming a killed run.

Runs the real command in a subprocess with a tiny random model (built from a config and saved
to disk, so the real loading path is used) and the real sandbox on the CPU backend. One slow
test runs the embedded default model.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest

from cuda_agent.policy.testing import save_tiny_model

SMALL = [
    "--steps", "2",
    "--warmstart-steps", "2",
    "--tasks-per-step", "2",
    "--group-size", "2",
    "--eval-tasks", "2",
    "--lora-rank", "4",
    "--quiet",
]  # fmt: skip
SHORT_TASKS = ("relu", "silu")  # the two shortest CPU solutions: a small auto budget


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="module")
def short_tasks(tmp_path_factory) -> Path:
    """Two built-in task directories (task and reference solutions) copied into one folder."""
    root = tmp_path_factory.mktemp("tasks")
    builtin = Path(str(resources.files("cuda_agent.kernel_sandbox") / "builtin"))
    for name in SHORT_TASKS:
        shutil.copytree(builtin / name, root / name)
    return root


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


def test_train_runs_every_stage_and_writes_outputs(tmp_path, tiny_model_dir, short_tasks):
    run = tmp_path / "run"
    proc = _train(
        "--model", str(tiny_model_dir), "--out", str(run), "--backend", "cpu",
        "--tasks", str(short_tasks), *SMALL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    stages = [r["stage"] for r in _records(run)]
    assert stages == ["eval_before", "warmstart", "warmstart", "rl", "rl", "eval_after"]
    rl = [r for r in _records(run) if r["stage"] == "rl"]
    assert all(len(r["tasks"]) == 2 and -1.0 <= r["mean_reward"] <= 3.0 for r in rl)
    # The answer budget was derived from the warm start's answers (byte tokens: one per byte)
    # and recorded in the resolved config; every evaluation reports its truncated share.
    config = json.loads((run / "config.json").read_text())
    longest = max(len(f"```python\n{(short_tasks / n / 'solution_cpu.py').read_text().strip()}\n```")
                  for n in SHORT_TASKS)  # fmt: skip
    assert longest < config["max_new_tokens"] <= 2 * longest + 64
    assert all(0.0 <= r["frac_truncated"] <= 1.0 for r in _records(run) if "frac_parsed" in r)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["rl_steps"] == 2 and summary["backend"] == "cpu"
    assert summary["max_new_tokens"] == config["max_new_tokens"]
    assert summary["mean_reward_before"] is not None and summary["mean_reward_after"] is not None
    assert (run / "adapter" / "adapter_config.json").exists()
    assert json.loads((run / "state.json").read_text())["rl_steps_done"] == 2
    # One checkpoint per stage is kept: the committed one.
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["rl-2", "warmstart"]


def test_a_killed_run_resumes_without_redoing_finished_work(tmp_path, tiny_model_dir, short_tasks):
    run = tmp_path / "run"
    args = ["--model", str(tiny_model_dir), "--out", str(run), "--backend", "cpu",
            "--tasks", str(short_tasks), *SMALL]  # fmt: skip
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


def test_a_budget_too_small_for_the_warm_start_is_refused(tmp_path, tiny_model_dir, short_tasks):
    # The H200 defect of 2026-12-01: answers taught by the warm start longer than the budget.
    run = tmp_path / "run"
    proc = _train(
        "--model", str(tiny_model_dir), "--out", str(run), "--backend", "cpu",
        "--tasks", str(short_tasks), *SMALL, "--max-new-tokens", "64",
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--max-new-tokens 64 cannot hold the warm start's cpu answers" in proc.stderr
    assert "relu" in proc.stderr and "--max-new-tokens 0" in proc.stderr
    assert not (run / "metrics.jsonl").exists(), "no stage ran"
    # Without a warm start the same budget is the user's choice.
    proc = _train(
        "--model", str(tiny_model_dir), "--out", str(tmp_path / "no-ws"), "--backend", "cpu",
        "--tasks", str(short_tasks), *SMALL, "--max-new-tokens", "64", "--warmstart-steps", "0",
        "--steps", "0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = _records(tmp_path / "no-ws")[-1]
    assert after["stage"] == "eval_after" and after["frac_truncated"] == 1.0  # random model
    assert "cut at 64 tokens" in next(iter(after["feedback"].values()))


def test_presets_and_flags_compose(tmp_path, tiny_model_dir, short_tasks):
    preset = tmp_path / "mine.toml"
    preset.write_text("[train]\nsteps = 0\nwarmstart_steps = 0\nseed = 7\nbogus = 1\n")
    proc = _train("--preset", str(preset), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "unknown settings bogus" in proc.stderr
    preset.write_text("[train]\nsteps = 0\nwarmstart_steps = 0\nseed = 7\neval_tasks = 2\n")
    run = tmp_path / "run"
    proc = _train(
        "--preset", str(preset), "--model", str(tiny_model_dir), "--out", str(run),
        "--backend", "cpu", "--tasks", str(short_tasks), "--seed", "3", "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = json.loads((run / "config.json").read_text())
    assert config["steps"] == 0 and config["seed"] == 3  # the flag wins over the preset
    proc = _train("--preset", "no-such-preset")
    assert proc.returncode == 2 and "presets: cpu, h200" in proc.stderr


@pytest.mark.slow
def test_default_model_learns_answers_that_fit_its_budget(tmp_path, short_tasks):
    # What would have caught the H200 defect on the CPU: after a short warm start the real
    # model's greedy answers are complete (none cut by the budget) and parse.
    run = tmp_path / "run"
    proc = _train(
        "--out", str(run), "--backend", "cpu", "--tasks", str(short_tasks),
        "--warmstart-steps", "8", "--warmstart-batch", "2", "--steps", "0", "--quiet",
        timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["model"] == "smollm2-135m-gguf"
    assert summary["frac_truncated_after"] == 0.0
    after = _records(run)[-1]
    assert after["stage"] == "eval_after" and after["frac_parsed"] == 1.0, after["feedback"]
    assert (run / "adapter" / "adapter_config.json").exists()


@pytest.mark.gpu
def test_train_runs_every_stage_on_the_gpu(tmp_path, tiny_model_dir, short_tasks):
    # The default run's stages on CUDA (policy and sandbox), with a real tokenizer: the budget
    # comes from the compact CUDA solutions the warm start teaches there.
    pytest.importorskip("cupy")
    run = tmp_path / "run"
    proc = _train(
        "--model", str(tiny_model_dir), "--out", str(run), "--backend", "cuda",
        "--device", "cuda", "--tasks", str(short_tasks), *SMALL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    stages = [r["stage"] for r in _records(run)]
    assert stages == ["eval_before", "warmstart", "warmstart", "rl", "rl", "eval_after"]
    config = json.loads((run / "config.json").read_text())
    longest = max(
        len(f"```python\n{(short_tasks / n / 'solution_cuda_compact.py').read_text().strip()}\n```")
        for n in SHORT_TASKS
    )
    assert longest < config["max_new_tokens"] <= 2 * longest + 64
    summary = json.loads((run / "summary.json").read_text())
    assert summary["backend"] == "cuda" and summary["frac_truncated_after"] is not None
