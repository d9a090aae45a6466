"""The critic's optimizer in the ``value`` and ``rl`` stages: over the value adapter and the head
(the critic's own weights) whether the process ran the earlier stages or was resumed from a
checkpoint, and the value adapter learns in both stages.

An earlier stage with a KL penalty scores the base model with the adapters switched off; peft's
switch used to leave only the policy's adapter trainable, so a continuing process built the
critic's optimizer over the head alone (a resumed one over adapter and head: its checkpoint did
not load) and no value step ever reached the value adapter.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from cuda_agent.agent import Episode, Turn, collate, episode_to_json
from cuda_agent.policy import Policy, PolicyConfig, testing
from cuda_agent.runner.checkpoint import MetricsWriter, RunState, load_state
from cuda_agent.runner.config import TrainConfig
from cuda_agent.runner.context import Run
from cuda_agent.runner.stages import value
from cuda_agent.runner.trainer.update import update

CONFIG = TrainConfig(
    device="cpu",
    lora_rank=4,
    lora_alpha=8,
    kl_coef=0.05,  # the earlier stages score the base model: the adapters switched off
    value_steps=2,  # the first moves the zero head only; the second reaches the adapter
    value_lr=1e-2,
    advantage="gae",
    guard_min_ess=0.0,
    guard_max_ratio=1e9,
    seed=3,
)


def _episodes() -> list[Episode]:
    def turn(index: int, context: tuple[int, ...], response: tuple[int, ...], reward: float):
        logprobs = (-5.0,) * len(response)
        return Turn(index, context, response, logprobs, "", "stop", "c", None, reward, "again")

    return [
        Episode("a", 0, "full", (turn(0, (1, 2, 3), (40, 41, 42), 0.0), turn(1, (7,), (43,), 2.0)), "t"),
        Episode("a", 0, "full", (turn(0, (1, 2, 3), (50, 51), -1.0),), "t"),
        Episode("b", 1, "full", (turn(0, (4, 5), (60, 61, 62, 63), 1.0),), "t"),
        Episode("b", 1, "full", (turn(0, (4, 5), (70,), 0.5),), "t"),
    ]  # fmt: skip


def _process(run_dir: Path, state: RunState | None = None) -> Run:
    """What ``train`` sets up in a process: the policy, the run's context, the critic restored."""
    tokenizer = testing.tiny_tokenizer()
    policy_config = PolicyConfig(
        device="cpu", lora_rank=CONFIG.lora_rank, lora_alpha=CONFIG.lora_alpha, seed=CONFIG.seed
    )
    policy = Policy.from_model(testing.tiny_llama(tokenizer), tokenizer, policy_config)
    metrics = MetricsWriter(run_dir / "metrics.jsonl")
    ctx = Run(CONFIG, run_dir, policy, None, [], [], metrics, state or RunState(), lambda _: None)  # type: ignore[arg-type]
    ctx.restore(critic=True)
    return ctx


def _names(ctx: Run, name: str) -> list[str]:
    """The names of the parameters ``ctx``'s optimizer ``name`` steps, in its order."""
    critic = ctx.critic()
    named = {id(p): n for n, p in ctx.policy.model.named_parameters()}
    named.update({id(p): f"value_head.{n}" for n, p in critic.head.named_parameters()})
    return [named[id(p)] for p in ctx.optimizers[name].parameters]


def _value_adapter(ctx: Run) -> dict[str, torch.Tensor]:
    marker = f".{ctx.critic().adapter_name}."
    return {n: p.detach().clone() for n, p in ctx.policy.model.named_parameters() if marker in n}


def _changed(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> list[str]:
    return [n for n in before if not torch.equal(before[n], after[n])]


def test_the_critic_trains_its_adapter_and_head_in_a_continuing_and_a_resumed_process(
    tmp_path: Path,
) -> None:
    torch.manual_seed(0)
    (tmp_path / "rft").mkdir()
    lines = "".join(json.dumps(episode_to_json(e)) + "\n" for e in _episodes())
    (tmp_path / "rft" / "episodes.jsonl").write_text(lines)
    batch = collate(_episodes())

    # A process that runs the stages in order: an RL warm-up step with the KL penalty first.
    continuing = _process(tmp_path)
    warmup = continuing.optimizer("rl_warmup", CONFIG.lr)
    assert (
        update(continuing.policy, warmup, batch, CONFIG.update_config("rl_warmup"))["updates"] == 1
    )
    continuing.finish_stage("rl_warmup")
    continuing.optimizer(value.STAGE, CONFIG.value_lr, critic=True)  # the one value.run uses
    in_value = _names(continuing, value.STAGE)
    adapter = _value_adapter(continuing)
    assert len(in_value) == len(adapter) + 2  # the value adapter and the head
    assert set(in_value) == {*adapter, "value_head.weight", "value_head.bias"}
    value.run(continuing)
    # (LoRA's B starts at 0, so A's gradient is 0 until B has moved: B moves first.)
    lora_b = [n for n in adapter if ".lora_B." in n]
    assert lora_b and set(lora_b) <= set(_changed(adapter, _value_adapter(continuing)))

    # A process resumed from the value stage's checkpoint: the same parameters, and its
    # optimizer's state loads.
    resumed = _process(tmp_path, load_state(tmp_path))
    assert resumed.state.checkpoint == f"checkpoints/{value.STAGE}-{CONFIG.value_steps}"
    resumed.optimizer(value.STAGE, CONFIG.value_lr, critic=True)
    assert _names(resumed, value.STAGE) == in_value
    assert len(resumed.optimizers[value.STAGE].state_dict()["state"]) == len(in_value)

    # The rl stage (from the resumed process): its critic optimizer steps the same parameters,
    # and a step with the KL penalty on still reaches the value adapter.
    resumed.optimizers.clear()
    policy_optimizer = resumed.optimizer("rl", CONFIG.lr)
    critic_optimizer = resumed.optimizer("rl-critic", CONFIG.value_lr, critic=True)
    assert _names(resumed, "rl-critic") == in_value
    adapter = _value_adapter(resumed)
    record = update(
        resumed.policy,
        policy_optimizer,
        batch,
        CONFIG.update_config("rl"),
        resumed.critic(),
        critic_optimizer,
    )
    assert record["updates"] == 1
    assert len(_changed(adapter, _value_adapter(resumed))) == len(adapter)


def test_the_rollout_copies_get_the_policys_weights_not_the_critics(tmp_path: Path) -> None:
    """Ray's rollout copies hold the policy alone: a value adapter's weights sent to them would
    name parameters they lack."""
    from cuda_agent.runner.ray_rollouts import trainable_state

    ctx = _process(tmp_path)
    named = {id(p): n for n, p in ctx.policy.model.named_parameters()}
    assert set(trainable_state(ctx.policy)) == {
        named[id(p)] for p in ctx.policy.trainable_parameters()
    }
    assert not any(".value." in n for n in trainable_state(ctx.policy))
