"""``runner.testing.run_cli`` / ``start_cli``: a command forked from the import server behaves as
``python -m cuda_agent.runner`` started afresh does (its exit status, output, working directory),
and a started command is killed with its process group."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from cuda_agent.runner.testing import run_cli, start_cli

TASK = """
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64)]


def get_init_inputs():
    return []
"""


def _fresh(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cuda_agent.runner", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)


def test_a_forked_command_exits_and_writes_as_a_fresh_one(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "broken.py").write_text("class Model(:\n")
    for args in (
        ["eval", "--quiet", "--tasks", "tasks"],  # found in the working directory, broken
        ["train", "--no-such-flag"],  # argparse's usage and status
    ):
        forked, fresh = run_cli(args, cwd=tmp_path), _fresh(args, tmp_path)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode,
            fresh.stdout,
            fresh.stderr,
        ), args
        assert forked.returncode == 2, forked.stderr
    assert (
        "task 'broken' is not valid Python"
        in run_cli(["eval", "--tasks", "tasks"], cwd=tmp_path).stderr
    )


def test_a_started_command_runs_until_killed_with_its_group(tmp_path: Path) -> None:
    task = tmp_path / "relu.py"
    task.write_text(TASK)
    with socket.socket() as server:  # an endpoint that accepts and never answers
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}/v1"
        proc = start_cli(
            ["solve", str(task), "--endpoint", url, "--backend", "cpu", "--quiet"],
            stdout=tmp_path / "out",
            stderr=tmp_path / "err",
        )
        server.settimeout(60)
        connection, _ = server.accept()  # the command is running: it asked the endpoint
        with connection:
            time.sleep(0.2)
            assert proc.poll() is None, (tmp_path / "err").read_text()
            proc.kill()
            assert proc.wait(timeout=60) == -signal.SIGKILL
    assert proc.returncode == -signal.SIGKILL and proc.poll() == -signal.SIGKILL
