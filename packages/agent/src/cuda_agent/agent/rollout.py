"""Single-turn rollouts: prompt -> sample -> extract -> evaluate -> reward -> trajectory.

The agent composes the sandbox and the reward; it reaches the policy only through the small
``PolicyLike`` protocol, so any sampler (a local model, a remote endpoint, a test double built
on real tokens) can drive it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from cuda_agent.kernel_sandbox import EvalResult, Task
from cuda_agent.reward import MilestoneValues, milestone_reward

from .feedback import feedback
from .parsing import extract_candidate
from .prompts import build_messages


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
class SamplingParams:
    n: int = 4
    max_new_tokens: int = 320
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None


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


RewardFn = Callable[[EvalResult], float]


def rollout_single_turn(
    policy: PolicyLike,
    evaluator: EvaluatorLike,
    tasks: Sequence[Task],
    sampling: SamplingParams = SamplingParams(),
    reward_fn: RewardFn = milestone_reward,
    malformed_reward: float = MilestoneValues().fail,
) -> list[Trajectory]:
    """Sample ``sampling.n`` answers per task, evaluate them all concurrently, score them.

    Returns ``len(tasks) * n`` trajectories ordered by task, then sample.
    """
    prompts = [policy.chat_prompt_ids(build_messages(t, evaluator.backend)) for t in tasks]
    samples = policy.generate(
        prompts,
        n=sampling.n,
        max_new_tokens=sampling.max_new_tokens,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k,
        seed=sampling.seed,
    )
    flat = [
        (g, task, s)
        for g, (task, group) in enumerate(zip(tasks, samples, strict=True))
        for s in group
    ]
    candidates = [extract_candidate(s.text) for _, _, s in flat]
    jobs = [(task, c) for (_, task, _), c in zip(flat, candidates, strict=True) if c is not None]
    results = iter(evaluator.evaluate_many(jobs))
    trajectories = []
    for (g, task, sample), candidate in zip(flat, candidates, strict=True):
        result = next(results) if candidate is not None else None
        reward = reward_fn(result) if result is not None else malformed_reward
        trajectories.append(
            Trajectory(
                task=task.name,
                group=g,
                prompt_ids=list(sample.prompt_ids),
                response_ids=list(sample.response_ids),
                sampler_logprobs=list(sample.sampler_logprobs),
                text=sample.text,
                finish_reason=sample.finish_reason,
                candidate=candidate,
                result=result,
                reward=reward,
                feedback=feedback(
                    result,
                    truncated_at=sampling.max_new_tokens
                    if sample.finish_reason == "length"
                    else None,
                ),
                loss_mask=[True] * len(sample.response_ids),
            )
        )
    return trajectories
