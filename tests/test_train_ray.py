"""Rollouts on Ray, on a local cluster started here (real actors, the CPU backend, a tiny model):
the actors' episodes are the trainer's own policy's, the trainer runs RL steps with them, and
under torchrun two processes with Ray rollouts make the one-process run."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from cuda_agent.agent import AgentConfig, SamplingParams, run_episodes
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.policy import Policy, PolicyConfig
from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.runner.config import TrainConfig
from cuda_agent.runner.testing import copy_builtin_tasks, train_command

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

TASKS = {t.name: t for t in builtin_tasks()}
ROOT = Path(__file__).resolve().parents[1]
HANG_S = 1800  # a guard against a hung child, not a time limit (a busy 2-core machine)


@pytest.fixture(scope="module")
def cluster():
    # One CPU for each process's sandbox slot actor (two processes at most) and one for each
    # of two rollout actors.
    ray.init(num_cpus=4, num_gpus=0, include_dashboard=False, log_to_driver=False)
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


def _train(world: int, run: Path, inputs: dict[str, Path]) -> None:
    """``cuda-agent train`` with Ray rollouts on the module's cluster ("auto"), in ``world``
    processes (torchrun's, gloo) or, for 1, without a launcher."""
    command = train_command(world, "--out", str(run), *_flags(inputs))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=HANG_S)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]


def _flags(inputs: dict[str, Path]) -> list[str]:
    return ["--model", str(inputs["model"]), "--backend", "cpu", "--device", "cpu",
            "--tasks", str(inputs["tasks"]), "--eval-tasks", str(inputs["heldout"]),
            "--eval-train", "false", "--warmstart-steps", "1", "--rl-warmup-steps", "0",
            "--rft-tasks", "0", "--value-steps", "0",
            "--steps", "2", "--turns", "2", "--tasks-per-step", "2", "--group-size", "2",
            "--micro-batch", "1", "--advantage", "grpo",
            "--ray-address", "auto", "--ray-sandbox-workers", "1", "--ray-rollout-workers", "2",
            "--quiet"]  # fmt: skip


def _records(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, model_dir) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ray-inputs")
    return {
        "model": model_dir,
        "tasks": copy_builtin_tasks(root / "tasks", ("relu", "silu"), compact=False),
        "heldout": copy_builtin_tasks(root / "heldout", ("tanh", "elu"), compact=False),
    }


@pytest.fixture(scope="module")
def one_process_run(cluster, inputs, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("ray-one") / "run"
    _train(1, run, inputs)
    return run


def test_the_trainer_runs_rl_steps_with_ray_rollouts(one_process_run):
    run = one_process_run
    rl = [r for r in _records(run) if r["stage"] == "rl"]
    assert [r["step"] for r in rl] == [0, 1]
    assert all(r["turns_per_episode"] >= 1 and r["tokens"] > 0 for r in rl)
    assert all(r["updates"] + r["skipped_updates"] == 1 for r in rl), "each step updated"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["heldout_pass_rate_after"] is not None  # evaluated on the Ray sandbox


# What the one-process and the two-process runs must agree on, record by record.
COMPARED = ("mean_reward", "pass_rate", "mean_response_tokens", "turns_per_episode", "nll",
            "tokens", "grad_norm", "trained_tokens", "kl", "entropy", "updates",
            "skipped_updates", "rows", "tasks", "statuses", "verdicts")  # fmt: skip


@pytest.mark.slow
def test_two_processes_with_ray_rollouts_make_the_one_process_run(
    cluster, inputs, one_process_run, tmp_path
):
    """Under torchrun, rank 0 collects every process's episodes on the rollout actors (its
    weights are every process's: the policy is replicated) and each process updates on its
    part; each process judges its evaluation tasks on its own Ray sandbox. So two processes
    make the run one process makes: the same episodes (the same actors, seeds and weights),
    the same updates within float tolerance, rank 0 alone writing."""
    two = tmp_path / "two"
    _train(2, two, inputs)
    for run, processes in ((one_process_run, 1), (two, 2)):
        state = json.loads((run / "state.json").read_text())
        assert [s["processes"] for s in state["sessions"]] == [processes]
    first, second = _records(one_process_run), _records(two)
    assert [r["stage"] for r in first] == [r["stage"] for r in second]
    assert [r["stage"] for r in second].count("rl") == 2
    for a, b in zip(first, second, strict=True):
        for key in COMPARED:
            assert (key in a) == (key in b), f"{a['stage']}.{key}"
            if isinstance(a.get(key), float):
                assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-5), f"{a['stage']}.{key}"
            elif key in a:
                assert a[key] == b[key], f"{a['stage']}.{key}"
    from safetensors.torch import load_file

    adapter = "adapter/adapter_model.safetensors"
    one_weights, two_weights = load_file(one_process_run / adapter), load_file(two / adapter)
    assert one_weights.keys() == two_weights.keys()
    for name, tensor in one_weights.items():
        torch.testing.assert_close(two_weights[name], tensor, rtol=1e-4, atol=1e-5, msg=name)
    evaluated = json.loads((two / "eval" / "heldout_after" / "eval.json").read_text())
    assert sorted(row["task"] for row in evaluated["per_task"]) == ["elu", "tanh"]


def test_ray_settings_without_an_address_are_refused():
    with pytest.raises(ValueError, match="--ray-address"):
        TrainConfig(ray_rollout_workers=2)
