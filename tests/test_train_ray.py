"""Rollouts on Ray, on a local cluster started here (real actors, the CPU backend, a tiny model):
the actors' episodes are the trainer's own policy's, and the trainer runs RL steps with them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from cuda_agent.agent import AgentConfig, SamplingParams, run_episodes
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.policy import Policy, PolicyConfig
from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.runner.config import TrainConfig
from cuda_agent.runner.testing import copy_builtin_tasks
from cuda_agent.runner.train import train

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

TASKS = {t.name: t for t in builtin_tasks()}


@pytest.fixture(scope="module")
def cluster():
    # One CPU for the sandbox's slot actor and one for each of two rollout actors.
    ray.init(num_cpus=3, num_gpus=0, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny"))


def _tokens(batch) -> list[tuple[str, int, list[tuple[int, ...]]]]:
    return [(e.task, e.group, [t.response_ids for t in e.turns]) for e in batch.episodes]


def test_ray_rollouts_are_the_trainers_policy_on_its_current_weights(cluster, model_dir):
    from cuda_agent.runner.ray_rollouts import RayRollouts

    config = PolicyConfig(model=str(model_dir), device="cpu", lora_rank=4, seed=0)
    policy = Policy.load(config)
    tasks = [TASKS[n] for n in ("relu", "silu", "tanh")]
    greedy = SamplingParams(n=2, max_new_tokens=24, temperature=0.0, seed=0)
    agent = AgentConfig(max_turns=2)
    sandbox_config = SandboxConfig(backend="cpu", workers=1, repeats=3, timing_budget_s=0.3)
    remote_config = dataclasses.replace(sandbox_config, ray_address="auto")
    with Sandbox(sandbox_config) as local, Sandbox(remote_config) as remote:
        rollouts = RayRollouts(config, remote, workers=2)
        try:
            for _ in range(2):
                here = run_episodes(policy, local, tasks, greedy, agent)
                there = rollouts.collect(policy, tasks, greedy, agent)
                # Greedy answers depend only on the weights: the actors used the trainer's.
                assert _tokens(there) == _tokens(here)
                assert [e.group for e in there.episodes] == [0, 0, 1, 1, 2, 2]
                with torch.no_grad():  # an update: the next collection must see it
                    for p in policy.trainable_parameters():
                        p.add_(0.5 * torch.randn_like(p))
        finally:
            rollouts.close()


def test_the_trainer_runs_rl_steps_with_ray_rollouts(cluster, model_dir, tmp_path):
    copy_builtin_tasks(tmp_path / "tasks", ("relu", "silu"), compact=False)
    copy_builtin_tasks(tmp_path / "heldout", ("tanh",), compact=False)
    run = tmp_path / "run"
    config = TrainConfig(
        out=str(run),
        model=str(model_dir),
        backend="cpu",
        device="cpu",
        tasks=str(tmp_path / "tasks"),
        eval_tasks=str(tmp_path / "heldout"),
        eval_train=False,
        warmstart_steps=1,
        rl_warmup_steps=0,
        rft_tasks=0,
        value_steps=0,
        steps=2,
        turns=2,
        tasks_per_step=2,
        group_size=2,
        advantage="grpo",
        ray_address="auto",
        ray_sandbox_workers=1,
        ray_rollout_workers=2,
    )
    summary = train(config, log=lambda _m: None, progress=False)
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    rl = [r for r in records if r["stage"] == "rl"]
    assert [r["step"] for r in rl] == [0, 1]
    assert all(r["turns_per_episode"] >= 1 and r["tokens"] > 0 for r in rl)
    assert all(r["updates"] + r["skipped_updates"] == 1 for r in rl), "each step updated"
    assert summary["heldout_pass_rate_after"] is not None  # evaluated on the Ray sandbox


def test_ray_settings_without_an_address_are_refused():
    with pytest.raises(ValueError, match="--ray-address"):
        TrainConfig(ray_rollout_workers=2)
