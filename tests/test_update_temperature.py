"""The RL update scores its answers at the temperature they were sampled at.

The sampler records the log-probs of the distribution it drew from, softmax(logits / T). An
update that scored the same tokens at T = 1 would read every answer sampled at another
temperature as off-policy: its importance weights against the sampler (and the stability
guard's ratio bounds) would measure the temperature, not the policy's drift.
"""

from __future__ import annotations

from cuda_agent.agent import Episode, Turn, collate
from cuda_agent.policy import Policy, testing
from cuda_agent.runner.config import TrainConfig
from cuda_agent.runner.trainer.update import update
from cuda_agent.runner.trainer.update_config import GuardConfig, UpdateConfig

TEMPERATURE = 0.6


def _policy() -> Policy:
    policy: Policy = testing.tiny_lora_policy()
    return policy


def _sampled_episodes(policy: Policy) -> list[Episode]:
    """Two groups of two one-turn episodes sampled at TEMPERATURE, rewards that differ."""
    prompts = [[1, 5, 9, 13], [1, 7, 3]]
    groups = policy.generate(prompts, n=2, max_new_tokens=12, temperature=TEMPERATURE, seed=3)
    episodes = []
    for g, samples in enumerate(groups):
        for k, s in enumerate(samples):
            turn = Turn(
                0, tuple(s.prompt_ids), tuple(s.response_ids), tuple(s.sampler_logprobs),
                "", "stop", "c", None, float(k), "",
            )  # fmt: skip
            episodes.append(Episode(f"task{g}", g, "full", (turn,), "max_turns"))
    return episodes


def _record(temperature: float) -> dict:
    policy = _policy()
    batch = collate(_sampled_episodes(policy))
    settings = UpdateConfig(
        micro_batch=2, temperature=temperature, guard=GuardConfig(max_ratio=1e9, min_ess=0.0)
    )
    return update(policy, policy.optimizer(lr=1e-3), batch, settings)


def test_answers_sampled_at_a_temperature_are_on_policy_for_the_update() -> None:
    record = _record(TEMPERATURE)
    assert record["updates"] == 1 and not record["skipped_updates"]
    assert record["ratio_mismatch_kl"] < 1e-6
    assert abs(record["ratio_max"] - 1.0) < 1e-3 and record["ratio_ess"] > 0.999
    # scored at 1 instead, the same answers look off-policy: the gap the fix removes
    at_one = _record(1.0)
    assert at_one["ratio_mismatch_kl"] > 100 * max(record["ratio_mismatch_kl"], 1e-8)
    assert at_one["ratio_max"] > 1.05


def test_the_update_reads_the_rollouts_temperature_and_scores_greedy_answers_at_one() -> None:
    assert TrainConfig(temperature=0.7).update_config("rl").scoring_temperature == 0.7
    assert TrainConfig(temperature=0.7).update_config("rl_warmup").temperature == 0.7
    assert TrainConfig(temperature=0.0).update_config("rl").scoring_temperature == 1.0
