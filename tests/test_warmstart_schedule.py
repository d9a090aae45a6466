"""The warm start's learning-rate schedule (``--warmstart-schedule``, ``rl_core.scheduled_lr``): a
cosine from the peak to ``peak * floor`` over the stage's steps, set before each step, recorded
in the metrics, and the same in a run stopped and resumed mid-stage as in an unbroken one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.runner import deadline as deadline_module
from cuda_agent.runner.cli import main
from cuda_agent.runner.config import TrainConfig
from cuda_agent.runner.deadline import EX_TEMPFAIL
from cuda_agent.runner.testing import AfterUnits, copy_builtin_tasks


def test_a_wrong_schedule_or_floor_is_refused() -> None:
    with pytest.raises(ValueError, match="--warmstart-schedule must be one of constant, cosine"):
        TrainConfig(warmstart_schedule="linear")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="--warmstart-lr-floor must be in"):
        TrainConfig(warmstart_lr_floor=1.5)


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("schedule")
    model = save_tiny_model(root / "model")
    copy_builtin_tasks(root / "tasks", ("relu", "silu"))
    copy_builtin_tasks(root / "heldout", ("tanh",), compact=False)
    return [
        "train", "--model", str(model), "--tasks", str(root / "tasks"),
        "--eval-tasks", str(root / "heldout"), "--backend", "cpu", "--rl-warmup-steps", "0",
        "--rft-tasks", "0", "--value-steps", "0", "--steps", "0", "--eval-before", "false",
        "--eval-train", "false", "--lora-rank", "4", "--max-new-tokens", "40", "--seed", "5",
        "--quiet", "--warmstart-steps", "4", "--warmstart-schedule", "cosine",
        "--warmstart-lr", "1e-2", "--warmstart-lr-floor", "0.2",
    ]  # fmt: skip


def _rates(run: Path) -> list[float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["lr"] for r in rows if r.get("stage") == "warmstart"]


def test_each_step_trains_at_its_rate_and_a_resumed_run_at_the_same(
    setup, tmp_path: Path, monkeypatch
) -> None:
    straight = tmp_path / "straight"
    assert main([*setup, "--out", str(straight)]) == 0
    want = [1e-2 * (0.2 + 0.8 * 0.5 * (1 + math.cos(math.pi * k / 3))) for k in range(4)]
    assert _rates(straight) == pytest.approx(want)
    stopped = tmp_path / "stopped"
    with monkeypatch.context() as patch:  # two steps (after the baselines), then the deadline
        patch.setattr(deadline_module, "Deadline", lambda at, **_: AfterUnits(3))
        assert main([*setup, "--stop-after", "1e6", "--out", str(stopped)]) == EX_TEMPFAIL
    assert len(_rates(stopped)) == 2
    assert main(["train", "--resume", str(stopped), "--quiet"]) == 0
    assert _rates(stopped) == pytest.approx(want)
    a = load_file(str(straight / "adapter" / "adapter_model.safetensors"))
    b = load_file(str(stopped / "adapter" / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
