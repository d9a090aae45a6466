"""What `cuda-agent train` refuses before any work when launched over several processes
(`runner.distributed.check`), and what it accepts alone."""

from __future__ import annotations

import pytest

from cuda_agent.runner import distributed
from cuda_agent.runner.config import TrainConfig


def _config(**kw) -> TrainConfig:
    return TrainConfig(**{"tasks_per_step": 2, "rft_tasks": 2, **kw})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tasks_per_step": 1}, "--tasks-per-step 1 is fewer than the 2 processes"),
        ({"rft_tasks": 1, "rft_steps": 1}, "--rft-tasks 1 is fewer than the 2 processes"),
        ({"ray_address": "local"}, "--ray-address local would start a Ray cluster in each"),
    ],
)
def test_two_processes_refuse_work_they_cannot_share(monkeypatch, settings, message):
    config = _config(**settings)
    distributed.check(config)  # one process: all of it is fine
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=message):
        distributed.check(config)


def test_two_processes_accept_a_shared_cluster_and_a_task_each(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    distributed.check(_config(ray_address="auto", ray_rollout_workers=2))
