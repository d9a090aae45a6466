"""Single-turn rollouts through the real sandbox (CPU backend).

The policy side is a replay sampler that answers with fixed texts: the agent reaches policies
only through the ``PolicyLike`` protocol, and fixed answers let the test know the right reward.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from cuda_agent.agent import SamplingParams, rollout_single_turn
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks


@dataclass(frozen=True)
class ReplaySample:
    prompt_ids: list[int]
    response_ids: list[int]
    text: str
    finish_reason: str
    sampler_logprobs: list[float]


class ReplayPolicy:
    """Answers the i-th sample of every prompt with ``answers[i]``; tokens are UTF-8 bytes."""

    def __init__(self, answers: list[str], finish_reason: str = "stop") -> None:
        self.answers = answers
        self.finish_reason = finish_reason
        self.calls: list[dict] = []

    def chat_prompt_ids(self, messages):
        return list("\n".join(m["content"] for m in messages).encode())

    def generate(self, prompts, *, n=1, **kwargs):
        self.calls.append({"prompts": len(prompts), "n": n, **kwargs})
        out = []
        for prompt in prompts:
            group = []
            for i in range(n):
                ids = list(self.answers[i].encode())
                group.append(
                    ReplaySample(
                        prompt, ids, self.answers[i], self.finish_reason, [-0.1] * len(ids)
                    )
                )
            out.append(group)
        return out


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(backend="cpu", workers=1, repeats=5, timing_budget_s=0.3)) as sb:
        yield sb


def test_rollout_rewards_follow_the_verdicts(sandbox):
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    answers = [
        f"Here it is:\n```python\n{relu.solutions['cpu']}```",
        "I cannot do that.",
        "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x)\n```",
    ]
    policy = ReplayPolicy(answers)
    trajectories = rollout_single_turn(
        policy, sandbox, [relu, relu], SamplingParams(n=3, max_new_tokens=64, seed=1)
    )
    assert len(trajectories) == 6
    assert [t.group for t in trajectories] == [0, 0, 0, 1, 1, 1]
    assert policy.calls == [
        {"prompts": 2, "n": 3, "max_new_tokens": 64, "temperature": 1.0, "top_p": 1.0,
         "seed": 1}
    ]  # fmt: skip
    honest, malformed, cheat = trajectories[:3]
    assert honest.result is not None and honest.result.status == "ok"
    assert honest.reward >= 1.0 and honest.feedback.startswith("PASS")
    assert malformed.result is None and malformed.candidate is None and malformed.reward == -1.0
    assert cheat.result is not None and cheat.result.status == "rejected" and cheat.reward == -1.0
    for t in trajectories:
        assert len(t.loss_mask) == len(t.response_ids) == len(t.sampler_logprobs)
        assert all(t.loss_mask)


def test_feedback_says_when_the_budget_cut_the_answer(sandbox):
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    cut = '```python\nimport torch\nfrom torch import nn\n\nrelu = cpu_kernel(r"""\nvoid relu('
    policy = ReplayPolicy([cut], finish_reason="length")
    [t] = rollout_single_turn(policy, sandbox, [relu], SamplingParams(n=1, max_new_tokens=512))
    assert t.candidate is None and t.reward == -1.0 and t.finish_reason == "length"
    assert t.feedback == (
        "FAIL: the answer was cut at 512 tokens (the answer budget) before ModelNew was "
        "complete; write a shorter answer."
    )
    # A complete candidate in a cut answer is judged, and the cut is still said.
    done = f"```python\n{relu.solutions['cpu']}```\nNow let me explain"
    [t] = rollout_single_turn(
        ReplayPolicy([done], finish_reason="length"), sandbox, [relu], SamplingParams(n=1)
    )
    assert t.result is not None and t.result.status == "ok"
    assert t.feedback.startswith("PASS") and t.feedback.endswith(
        "(the answer was cut at 320 tokens, the answer budget)"
    )
    # An answer the policy ended for looping (its repetition_stop) is said to be so.
    looped = ReplayPolicy(["the the the the the the the the"], finish_reason="repetition")
    [t] = rollout_single_turn(looped, sandbox, [relu], SamplingParams(n=1))
    assert t.reward == -1.0 and t.feedback == (
        "Your answer was stopped: it fell into a loop, repeating the same text. FAIL: no "
        "```python block defining class ModelNew was found in the answer."
    )
