"""Fixtures: a tiny byte-level tokenizer with a ChatML template and a tiny random Llama."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

# Let the tests run from a plain checkout (the package need not be pip-installed).
_SRC = str(Path(__file__).resolve().parents[1] / "src")
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from cuda_agent.policy import Policy, PolicyConfig  # noqa: E402

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Any:
    """259 tokens: 3 specials + the 256 byte-level characters (any text round-trips)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab = {s: i for i, s in enumerate(specials)}
    for i, char in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet())):
        vocab[char] = len(specials) + i
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(specials)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
    )
    tokenizer.chat_template = CHATML
    return tokenizer


@pytest.fixture
def make_model(tiny_tokenizer: Any) -> Callable[..., Any]:
    """Fresh tiny LlamaForCausalLM; the same weights on every call (seeded)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def build(seed: int = 0) -> Any:
        config = LlamaConfig(
            vocab_size=len(tiny_tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
            tie_word_embeddings=False,
            bos_token_id=tiny_tokenizer.bos_token_id,
            eos_token_id=tiny_tokenizer.eos_token_id,
            pad_token_id=tiny_tokenizer.pad_token_id,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = LlamaForCausalLM(config)
            # Random init is near-uniform; sharper logits make greedy ties (and flaky tests) unlikely.
            model.lm_head.weight.data.mul_(10.0)
        return model.eval()

    return build


@pytest.fixture
def make_policy(make_model: Callable[..., Any], tiny_tokenizer: Any) -> Callable[..., Policy]:
    def build(model: Any = None, **config: Any) -> Policy:
        config.setdefault("device", "cpu")
        config.setdefault("lora_rank", 4)
        policy = Policy.from_model(
            model if model is not None else make_model(), tiny_tokenizer, PolicyConfig(**config)
        )
        return policy.eval()

    return build


@pytest.fixture
def prompts(tiny_tokenizer: Any) -> list[list[int]]:
    """Three prompts of different lengths (so batches need padding)."""
    texts = ["Write a CUDA kernel.", "hi", "Add two vectors of floats, fast please!"]
    return [tiny_tokenizer(t)["input_ids"] for t in texts]
