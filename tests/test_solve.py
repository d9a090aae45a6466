"""`cuda-agent solve TASK`: the agent on one task file, end to end (a tiny random local model,
the real sandbox on the CPU backend); and its errors for a user's mistakes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.runner.testing import run_cli

# A guard against a hung child process, not a time limit: on a busy 2-core machine a small
# run takes many minutes.
HANG_S = 3600
KERNELBENCH_STYLE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 256


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
"""


def _solve(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(["solve", *args], timeout=HANG_S)  # a process of its own


def test_solve_writes_the_episode_and_shows_each_turn(tmp_path: Path) -> None:
    task = tmp_path / "19_ReLU.py"
    task.write_text(KERNELBENCH_STYLE)
    model = save_tiny_model(tmp_path / "tiny")
    out = tmp_path / "out"
    done = _solve(str(task), "--model", str(model), "--turns", "3", "--max-new-tokens", "24",
                  "--backend", "cpu", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    episode = json.loads((out / "episode.json").read_text())
    assert episode["task"] == "19_ReLU"
    # A random model writes no code: two malformed answers in a row end the episode.
    assert episode["stop_reason"] == "malformed" and len(episode["turns"]) == 2
    for turn in episode["turns"]:
        assert turn["status"] == "malformed" and turn["reward"] == -1.0
        assert set(turn) >= {"response", "candidate", "status", "reward", "feedback",
                             "speedup_vs_eager", "speedup_vs_compile"}  # fmt: skip
    assert episode["best_turn"] == 0 and episode["best_reward"] == -1.0
    assert not (out / "best_model_new.py").exists()  # no turn had code
    assert "turn 1" in done.stdout and "stopped: malformed" in done.stdout


def test_solve_refuses_a_missing_task_and_a_bad_backend(tmp_path: Path) -> None:
    missing = _solve(str(tmp_path / "nope.py"), "--quiet")
    assert missing.returncode == 2 and "nope.py" in missing.stderr
    assert "Traceback" not in missing.stderr
    task = tmp_path / "t.py"
    task.write_text(KERNELBENCH_STYLE)
    bad = _solve(str(task), "--backend", "tpu", "--quiet")
    assert bad.returncode == 2 and "--backend must be cpu or cuda" in bad.stderr


def test_solve_drives_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    # A real `transformers serve` on loopback (the tiny random model): the agent talks to it in
    # chat messages, and the episode is written as with a local model.
    import pytest

    from cuda_agent.policy import testing

    missing = testing.missing_serving_extras()
    if missing:
        pytest.skip(f"transformers serving extras not installed: {', '.join(missing)}")
    task = tmp_path / "relu.py"
    task.write_text(KERNELBENCH_STYLE)
    out = tmp_path / "out"
    with testing.serve_tiny_model(tmp_path / "server") as (base_url, _, _):
        done = _solve(str(task), "--endpoint", base_url, "--turns", "2", "--max-new-tokens", "16",
                      "--backend", "cpu", "--out", str(out), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    episode = json.loads((out / "episode.json").read_text())
    assert len(episode["turns"]) == 2 and episode["stop_reason"] == "malformed"
    assert all(turn["response"] for turn in episode["turns"])  # the server's answers
