"""``benchmarks/gpu/learning_run.py`` (issue 29): the trainer's command line of each device
call. The trainer does not save ``--unit-estimates``; a resumed call must pass them again, or
the first evaluation of a run that never timed one would be guessed at (on the H200 that guess
lost a call)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location(
        "learning_run", ROOT / "benchmarks" / "gpu" / "learning_run.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_call_runs_the_trainer_with_its_limit_and_the_estimates(tmp_path):
    train_command = _load().train_command
    run = tmp_path / "run"
    flags = ["--preset", "h200", "--unit-estimates", "prior/state.json", "--steps", "0"]
    head = [sys.executable, "-m", "cuda_agent.runner", "train", "--quiet"]
    # No config.json yet: a new run, whatever the mode says.
    assert train_command("resume", run, "/m.gguf", flags, 500.4) == [
        *head, "--model", "/m.gguf", "--out", str(run), *flags, "--stop-after", "500",
    ]  # fmt: skip
    run.mkdir()
    (run / "config.json").write_text("{}")
    assert train_command("resume", run, "/m.gguf", flags, 300) == [
        *head, "--resume", str(run), "--unit-estimates", "prior/state.json", "--stop-after", "300",
    ]  # fmt: skip
    assert train_command("resume", run, "/m.gguf", ["--steps", "3"], 300) == [
        *head, "--resume", str(run), "--stop-after", "300",
    ]  # fmt: skip
