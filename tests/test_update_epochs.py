"""PPO's epochs (GRPO's mu): ``ppo_epochs`` passes over one rollout batch, every pass's ratios
taken against the log-probs before the first, so the clip bounds how far the passes move the
policy together. A pass that took its ratios against the policy as it stood then would see 1
everywhere and clip nothing: the first test tells the two apart."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.agent import Episode, Turn, collate
from cuda_agent.policy import testing
from cuda_agent.runner.config import TrainConfig
from cuda_agent.runner.trainer.update import update
from cuda_agent.runner.trainer.update_config import GuardConfig, UpdateConfig


def _batch(policy) -> object:
    """Two groups of four one-turn answers sampled from ``policy``, rewards that differ."""
    groups = policy.generate([[1, 5, 9, 13], [1, 7, 3]], n=4, max_new_tokens=12, seed=3)
    episodes = []
    for g, samples in enumerate(groups):
        for k, s in enumerate(samples):
            turn = Turn(
                0, tuple(s.prompt_ids), tuple(s.response_ids), tuple(s.sampler_logprobs),
                "", "stop", "c", None, float(k % 2), "",
            )  # fmt: skip
            episodes.append(Episode(f"task{g}", g, "full", (turn,), "max_turns"))
    return collate(episodes)


def _run(epochs: int, updates: int = 1, lr: float = 5e-2) -> tuple[dict, dict]:
    torch.manual_seed(0)
    policy = testing.tiny_lora_policy()
    settings = UpdateConfig(
        micro_batch=4,
        updates_per_batch=updates,
        epochs=epochs,
        guard=GuardConfig(max_ratio=1e9, min_ess=0.0),
    )
    record = update(policy, policy.optimizer(lr=lr), _batch(policy), settings)
    return record, _trainable(policy)


def _trainable(policy) -> dict[str, torch.Tensor]:
    """A copy of the policy's trained weights (its LoRA adapters)."""
    return {k: v.detach().clone() for k, v in policy.model.named_parameters() if v.requires_grad}


def test_later_passes_are_clipped_against_the_policy_that_sampled() -> None:
    one, _ = _run(epochs=1)
    three, _ = _run(epochs=3)
    assert one["updates"] == 1 and three["updates"] == 3
    assert one["clip_fraction"] == 0.0  # one on-policy pass: every ratio is 1
    assert three["clip_fraction"] > 0.0  # the second and third passes moved past the clip
    assert three["ratio_max"] == pytest.approx(one["ratio_max"])  # trainer against sampler


def test_epochs_repeat_the_same_mini_batches() -> None:
    record, _ = _run(epochs=2, updates=2)
    assert record["updates"] == 4
    first, _ = _run(epochs=1, updates=2)
    # each pass trains every token once: the tokens counted are the pass's times the passes
    assert record["trained_tokens"] == 2 * first["trained_tokens"]


def test_more_epochs_move_the_weights_further_from_the_start() -> None:
    torch.manual_seed(0)
    start = _trainable(testing.tiny_lora_policy())
    moved = []
    for epochs in (1, 3):
        _, weights = _run(epochs=epochs, lr=1e-3)
        moved.append(sum(float((weights[k] - start[k]).norm()) for k in start))
    assert moved[1] > moved[0] > 0


def test_the_flag_sets_the_updates_passes_and_zero_is_refused() -> None:
    assert TrainConfig(ppo_epochs=2).update_config("rl").epochs == 2
    assert TrainConfig().update_config("rl").epochs == 1
    with pytest.raises(ValueError, match="--ppo-epochs must be >= 1"):
        TrainConfig(ppo_epochs=0)
