"""Single-turn rollouts (prompt -> sample -> extract -> evaluate -> reward -> trajectory) as
the trainer's single-turn stages read them: the multi-turn loop with one turn.

The agent composes the sandbox and the reward; it reaches the policy only through the small
``PolicyLike`` protocol, so any sampler (a local model, a remote endpoint, a test double built
on real tokens) can drive it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from cuda_agent.kernel_sandbox import EvalResult, Task
from cuda_agent.reward import MilestoneValues, milestone_reward

from .driver import AgentConfig, RewardFn, SamplingParams, run_episodes
from .feedback import feedback


class SampleLike(Protocol):
    @property
    def prompt_ids(self) -> list[int]: ...
    @property
    def response_ids(self) -> list[int]: ...
    @property
    def text(self) -> str: ...
    @property
    def finish_reason(self) -> str: ...
    @property
    def sampler_logprobs(self) -> list[float]: ...


class PolicyLike(Protocol):
    def chat_prompt_ids(self, messages: list[dict[str, str]]) -> list[int]: ...

    def generate(
        self,
        prompts: list[list[int]],
        *,
        n: int = 1,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int | None = None,
        stop: Sequence[str] = (),
    ) -> Sequence[Sequence[SampleLike]]: ...


class EvaluatorLike(Protocol):
    @property
    def backend(self) -> str: ...

    def evaluate_many(self, jobs: Sequence[tuple[Task, str]]) -> list[EvalResult]: ...


@dataclass(frozen=True)
class Trajectory:
    """One attempt at one task: the tokens the policy produced and what they earned.

    ``loss_mask`` marks the tokens the policy generated (all of ``response_ids`` in a single
    turn); multi-turn trajectories will mask tool outputs out.
    """

    task: str
    group: int  # index of the task in the rollout batch: trajectories of a group share a prompt
    prompt_ids: list[int]
    response_ids: list[int]
    sampler_logprobs: list[float]
    text: str
    finish_reason: str
    candidate: str | None
    result: EvalResult | None
    reward: float
    feedback: str
    loss_mask: list[bool] = field(default_factory=list)


_SAMPLING = SamplingParams()


def rollout_single_turn(
    policy: PolicyLike,
    evaluator: EvaluatorLike,
    tasks: Sequence[Task],
    sampling: SamplingParams = _SAMPLING,
    reward_fn: RewardFn = milestone_reward,
    malformed_reward: float = MilestoneValues().fail,
) -> list[Trajectory]:
    """Sample ``sampling.n`` answers per task, evaluate them all concurrently, score them:
    the multi-turn loop with ``max_turns=1`` (``driver.run_episodes``), one ``Trajectory``
    per episode.

    Returns ``len(tasks) * n`` trajectories ordered by task, then sample.
    """
    batch = run_episodes(
        policy,
        evaluator,
        tasks,
        sampling,
        AgentConfig(max_turns=1, micro_batches=1),  # one generate call for the batch
        reward_fn=reward_fn,
        malformed_reward=malformed_reward,
    )
    trajectories = []
    for episode in batch.episodes:
        [turn] = episode.turns
        trajectories.append(
            Trajectory(
                task=episode.task,
                group=episode.group,
                prompt_ids=list(turn.context_ids),
                response_ids=list(turn.response_ids),
                sampler_logprobs=list(turn.sampler_logprobs),
                text=turn.text,
                finish_reason=turn.finish_reason,
                candidate=turn.candidate if isinstance(turn.candidate, str) else None,
                result=turn.result,
                reward=turn.reward,
                feedback=feedback(
                    turn.result,
                    truncated_at=sampling.max_new_tokens
                    if turn.finish_reason == "length"
                    else None,
                    looped=turn.finish_reason == "repetition",
                ),
                loss_mask=[True] * len(turn.response_ids),
            )
        )
    return trajectories
