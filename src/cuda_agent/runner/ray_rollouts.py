"""Episode collection on Ray actors (the ``[ray]`` table: ``address``, ``rollout_workers``).

Each rollout actor holds a copy of the policy (where Ray places it: a GPU of its own when the
policy runs on CUDA) and runs the agent's loop (``agent.run_episodes``) on a share of the
step's tasks, judging answers on the cluster's sandbox actors (the ``RaySandbox`` it is handed:
the same scheduler and slots as the trainer's). Before each collection the trainer's trainable
weights (the LoRA adapter, or every weight in full fine-tuning) go to the object store once and
every actor loads them, so the episodes are on-policy. The update stays in the trainer process.

Tasks are split into contiguous shares, one per actor, and the episodes come back in task
order with their group numbers offset by the share's first task, as one local
``run_episodes`` would number them. Actor ``k`` samples with ``seed + k``: the episodes are
drawn from the same policy as local collection's, not the same draws.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch

from cuda_agent.agent import AgentConfig, RolloutBatch, SamplingParams, run_episodes
from cuda_agent.kernel_sandbox import EvalResult, Task
from cuda_agent.policy import Policy, PolicyConfig
from cuda_agent.reward import MilestoneValues, milestone_reward


def trainable_state(policy: Policy) -> dict[str, torch.Tensor]:
    """The weights the trainer updates in the policy, on the CPU, by parameter name (not a
    critic's value adapter beside them: the rollout copies have none)."""
    own = {id(p) for p in policy.trainable_parameters()}
    return {
        name: p.detach().to("cpu", copy=True)
        for name, p in policy.model.named_parameters()
        if id(p) in own
    }


class RolloutActor:
    """A policy copy that runs episodes against a (Ray) sandbox."""

    def __init__(self, config: PolicyConfig, sandbox: Any) -> None:
        self.policy = Policy.load(config)
        self.sandbox = sandbox
        self.params = dict(self.policy.model.named_parameters())

    def load(self, state: dict[str, torch.Tensor]) -> int:
        missing = sorted(set(state) - set(self.params))
        if missing:
            raise ValueError(
                f"the trainer's weights name parameters this copy lacks: {missing[:5]}"
            )
        with torch.no_grad():
            for name, value in state.items():
                self.params[name].copy_(value)
        return len(state)

    def collect(
        self,
        tasks: Sequence[Task],
        sampling: SamplingParams,
        config: AgentConfig,
        reward_fn: Callable[[EvalResult], float] = milestone_reward,
        malformed_reward: float = MilestoneValues().fail,
    ) -> RolloutBatch:
        self.policy.eval()
        return run_episodes(
            self.policy, self.sandbox, tasks, sampling, config,
            reward_fn=reward_fn, malformed_reward=malformed_reward,
        )  # fmt: skip


class RayRollouts:
    """``workers`` rollout actors on the cluster ``sandbox`` (a ``RaySandbox``) runs on."""

    def __init__(self, policy_config: PolicyConfig, sandbox: Any, workers: int) -> None:
        import ray

        if workers < 1:
            raise ValueError("RayRollouts needs at least one rollout worker")
        self.ray = ray
        on_gpu = policy_config.device.startswith("cuda") or (
            policy_config.device == "auto" and ray.cluster_resources().get("GPU", 0) > 0
        )
        remote = ray.remote(RolloutActor).options(
            num_gpus=1 if on_gpu else 0, num_cpus=0 if on_gpu else 1
        )
        self.actors: list[Any] = [remote.remote(policy_config, sandbox) for _ in range(workers)]

    def collect(
        self,
        policy: Policy,
        tasks: Sequence[Task],
        sampling: SamplingParams,
        config: AgentConfig,
        reward_fn: Callable[[EvalResult], float] = milestone_reward,
        malformed_reward: float = MilestoneValues().fail,
    ) -> RolloutBatch:
        """The episodes of ``tasks`` with ``policy``'s current weights, spread over the actors,
        each turn scored by ``reward_fn`` (``malformed_reward`` for an answer without code)."""
        ray = self.ray
        state = ray.put(trainable_state(policy))
        ray.get([a.load.remote(state) for a in self.actors])
        n = len(self.actors)
        bounds = [round(k * len(tasks) / n) for k in range(n + 1)]
        calls = []
        for k, actor in enumerate(self.actors):
            share = list(tasks[bounds[k] : bounds[k + 1]])
            if share:
                seed = None if sampling.seed is None else sampling.seed + k
                part = dataclasses.replace(sampling, seed=seed)
                calls.append(
                    (
                        bounds[k],
                        actor.collect.remote(share, part, config, reward_fn, malformed_reward),
                    )
                )
        episodes: list[Any] = []
        seconds: dict[str, float] = {}
        evaluations = programs = 0
        for offset, ref in calls:
            batch = ray.get(ref)
            episodes += [dataclasses.replace(e, group=e.group + offset) for e in batch.episodes]
            evaluations += batch.evaluations
            programs += batch.sandbox_jobs
            for key, value in batch.seconds.items():
                seconds[key] = max(seconds.get(key, 0.0), value)  # the actors ran side by side
        # (the actors' sandbox windows are in their own processes' clocks: not kept)
        return RolloutBatch(episodes, seconds, evaluations, sandbox_jobs=programs)

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors = []
