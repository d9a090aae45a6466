"""``cuda-agent train --rl-reward``: the RL stages' turn reward, milestone (the reference
system's -1 / 1 / 2 / 3) or log_speedup (clip(ln speedup, -1, 1) for a correct answer, -2 for a
failed or malformed one).

Runs of a tiny random model on the CPU backend (its answers hold no code: every turn is
malformed, so a step's mean reward is the reward of a malformed answer), and the reward
functions on real sandbox verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.reward import log_speedup_reward
from cuda_agent.runner.cli import main
from cuda_agent.runner.stages.rollouts import LOG_SPEEDUP_FAILURE, scoring
from cuda_agent.runner.testing import copy_builtin_tasks

ONE_RL_STEP = [
    "--backend", "cpu", "--warmstart-steps", "0", "--rl-warmup-steps", "0", "--rft-tasks", "0",
    "--value-steps", "0", "--steps", "1", "--tasks-per-step", "2", "--group-size", "2",
    "--eval-before", "false", "--eval-train", "false", "--eval-after-warmstart", "false",
    "--lora-rank", "4", "--max-new-tokens", "16", "--seed", "3", "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("rl-reward")
    model = save_tiny_model(root / "model")
    copy_builtin_tasks(root / "tasks", ("relu", "silu"))
    copy_builtin_tasks(root / "heldout", ("tanh",), compact=False)
    return [
        "--model", str(model), "--tasks", str(root / "tasks"),
        "--eval-tasks", str(root / "heldout"), *ONE_RL_STEP,
    ]  # fmt: skip


def _rl_record(run: Path) -> dict:
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    [record] = [r for r in records if r["stage"] == "rl"]
    return record


@pytest.mark.parametrize(("reward", "malformed"), [("milestone", -1.0), ("log_speedup", -2.0)])
def test_the_rl_step_scores_its_turns_with_the_chosen_reward(setup, tmp_path, reward, malformed):
    run = tmp_path / reward
    assert main(["train", *setup, "--rl-reward", reward, "--out", str(run)]) == 0
    record = _rl_record(run)
    assert record["pass_rate"] == 0.0 and record["frac_parsed"] == 0.0  # no code: malformed
    assert record["mean_reward"] == malformed
    assert json.loads((run / "config.json").read_text())["rl_reward"] == reward


def test_log_speedup_tells_correct_answers_apart_where_milestone_may_not():
    """Two correct answers to relu, the shipped solution and a slower one (it computes relu
    twice): under log_speedup their rewards are their clipped log speedups, different and
    above the failure value; a wrong answer gets the failure value under both."""
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    slower = relu.solutions["cpu"].replace(
        "        relu(out, x, x.numel())\n",
        "        for _ in range(20):\n            relu(out, x, x.numel())\n",
    )
    wrong = relu.solutions["cpu"].replace("x[i] > 0.f ? x[i] : 0.f", "x[i]")
    assert relu.solutions["cpu"] not in (slower, wrong)
    config = SandboxConfig(backend="cpu", workers=1, repeats=5, timing_budget_s=0.3)
    with Sandbox(config) as sandbox:
        fast, slow, bad = (
            sandbox.evaluate(relu, s) for s in (relu.solutions["cpu"], slower, wrong)
        )
    assert fast.correct and slow.correct and not bad.correct
    log_reward, log_malformed = scoring("log_speedup")
    milestone, milestone_malformed = scoring("milestone")
    assert (log_malformed, milestone_malformed) == (LOG_SPEEDUP_FAILURE, -1.0)
    assert -1.0 <= log_reward(slow) <= log_reward(fast) <= 1.0
    # Apart: the trainer's reward is noise-aware (a speedup within the timing's spread earns
    # its pessimistic bound), so on a loaded machine both may sit at the floor; their
    # measured speedups (20 times the work) still tell them apart.
    assert slow.candidate_time_ms > fast.candidate_time_ms
    raw = [log_speedup_reward(o, noise_aware=False) for o in (slow, fast)]
    assert raw[0] < raw[1] or raw[0] == raw[1] in (-1.0, 1.0)  # (apart, or both clipped)
    assert log_reward(bad) == LOG_SPEEDUP_FAILURE and milestone(bad) == -1.0
    assert milestone(fast) in (1.0, 2.0, 3.0)
    with pytest.raises(ValueError, match="milestone or log_speedup"):
        scoring("speed")
