"""The baselines stage measures only what the run will judge (``stages.baselines.judged``): a
warm-start-only run judges its evaluations' tasks and no training task; a run that samples
training tasks (RL, its warm-up, RFT, the value stage's collection) judges them too, each once."""

from __future__ import annotations

import dataclasses

import pytest

from cuda_agent.kernel_sandbox import builtin_tasks
from cuda_agent.runner.config import TrainConfig
from cuda_agent.runner.stages.baselines import judged

TASKS = {t.name: t for t in builtin_tasks()}
TRAIN = [TASKS["relu"], TASKS["silu"]]
HELDOUT = [TASKS["tanh"]]
OFF = TrainConfig(rl_warmup_steps=0, rft_tasks=0, value_steps=0, steps=0, warmstart_steps=5)


def _names(config: TrainConfig, evals) -> list[str]:
    return [t.name for t in judged(config, TRAIN, evals)]


def test_a_warm_start_only_run_judges_only_its_evaluations() -> None:
    assert _names(OFF, [("heldout", HELDOUT)]) == ["tanh"]
    assert _names(OFF, []) == []


@pytest.mark.parametrize(
    "change",
    [{"steps": 1}, {"rl_warmup_steps": 1}, {"rft_tasks": 2, "rft_steps": 1}, {"value_steps": 1}],
)
def test_a_stage_that_samples_training_tasks_judges_them(change: dict) -> None:
    config = dataclasses.replace(OFF, **change)
    assert _names(config, [("heldout", HELDOUT)]) == ["tanh", "relu", "silu"]


def test_rft_with_no_steps_judges_no_training_task() -> None:
    assert _names(dataclasses.replace(OFF, rft_tasks=2, rft_steps=0), []) == []


def test_a_task_in_two_sets_is_measured_once() -> None:
    config = dataclasses.replace(OFF, steps=1)
    evals = [("heldout", HELDOUT), ("train", TRAIN)]
    assert _names(config, evals) == ["tanh", "relu", "silu"]
