"""The end of an answer comes from the chat template, whatever the tokenizer calls its eos.

SmolLM2-135M-Instruct's GGUF file loads with ``eos_token = "<|im_start|>"`` under transformers
5.17 and ``"<|im_end|>"`` under 5.25; a warm start that ended its targets with the tokenizer's
eos taught one machine's adapters to end answers by opening a new turn, and on the other
machine those answers never stopped.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from cuda_agent.policy import Policy, PolicyConfig, TurnTokens, end_of_turn_id, turn_tokens
from cuda_agent.policy.testing import tiny_llama, tiny_tokenizer


def _ids(tokenizer: Any) -> tuple[int, int]:
    return (
        tokenizer.convert_tokens_to_ids("<|im_end|>"),
        tokenizer.convert_tokens_to_ids("<|im_start|>"),
    )


@pytest.mark.parametrize("eos", ["<|im_end|>", "<|im_start|>", "<|endoftext|>"])
def test_the_chat_templates_turn_tokens_whatever_the_eos(eos: str) -> None:
    tokenizer = tiny_tokenizer()
    tokenizer.eos_token = eos
    im_end, im_start = _ids(tokenizer)
    assert turn_tokens(tokenizer) == TurnTokens(end_of_turn=im_end, turn_start=im_start)
    assert end_of_turn_id(tokenizer) == im_end


def test_without_special_turn_tokens_the_answer_ends_with_the_eos() -> None:
    tokenizer = tiny_tokenizer()
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    assert turn_tokens(tokenizer) == TurnTokens(None, None)
    assert end_of_turn_id(tokenizer) == tokenizer.eos_token_id
    tokenizer.chat_template = None
    assert turn_tokens(tokenizer) == TurnTokens(None, None)
    assert end_of_turn_id(tokenizer) == tokenizer.eos_token_id


def _always(tokenizer: Any, token: int) -> Any:
    """A tiny model whose every next token is ``token`` (its head's bias decides)."""
    model = tiny_llama(tokenizer)
    head = torch.nn.Linear(model.config.hidden_size, model.config.vocab_size, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[token] = 10.0
    model.lm_head = head
    return model


@pytest.mark.parametrize("kv_cache", ["dynamic", "static"])
@pytest.mark.parametrize("emits", ["<|im_end|>", "<|im_start|>"])
def test_sampling_stops_at_the_end_of_turn_and_at_a_new_turn(kv_cache: str, emits: str) -> None:
    tokenizer = tiny_tokenizer()
    tokenizer.eos_token = tokenizer.pad_token = "<|endoftext|>"  # neither of the turn tokens
    token = tokenizer.convert_tokens_to_ids(emits)
    config = PolicyConfig(device="cpu", lora_rank=0, kv_cache=kv_cache)
    policy = Policy.from_model(_always(tokenizer, token), tokenizer, config).eval()
    prompt = policy.chat_prompt_ids([{"role": "user", "content": "hi"}])
    (sample,) = policy.generate([prompt], max_new_tokens=8, temperature=0.0)[0]
    assert sample.response_ids == [token]
    assert sample.finish_reason == "stop"
