"""Tiny real models for tests and GPU smoke runs where no weights can be downloaded.

``tiny_tokenizer()`` is a byte-level BPE tokenizer (any text round-trips) with a ChatML chat
template; ``tiny_llama(...)`` a seeded, randomly initialised ``LlamaForCausalLM`` sized for it;
``save_tiny_model(path)`` writes both as a directory that ``PolicyConfig(model=path)`` loads.
Architectures of real size (for benchmarks) come from ``tiny_llama(**config_overrides)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _chatml_tokenizer(backend: Any, **tokens: str) -> Any:
    """A transformers tokenizer over ``backend`` (whose vocabulary starts with ``SPECIALS``):
    eos = pad = ``<|im_end|>``, bos ``<|im_start|>``, the ChatML template."""
    from transformers import PreTrainedTokenizerFast

    backend.add_special_tokens(SPECIALS)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        **tokens,
    )
    tokenizer.chat_template = CHATML
    return tokenizer


def tiny_tokenizer() -> Any:
    """259 tokens: 3 specials + the 256 byte-level characters; eos = pad = ``<|im_end|>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for i, char in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet())):
        vocab[char] = len(SPECIALS) + i
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    return _chatml_tokenizer(backend)


def tiny_llama(tokenizer: Any, seed: int = 0, **overrides: Any) -> Any:
    """A seeded random ``LlamaForCausalLM`` (2 layers, hidden 32 unless overridden)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    settings: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    settings.update(overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(LlamaConfig(**settings))
        # Random init is near-uniform; sharper logits make greedy ties (and flaky tests) unlikely.
        model.lm_head.weight.data.mul_(10.0)
    return model.eval()


def save_tiny_model(path: str | Path, seed: int = 0, **overrides: Any) -> Path:
    """Write a tiny model and its tokenizer to ``path`` (loadable as ``PolicyConfig(model=path)``)."""
    path = Path(path)
    tokenizer = tiny_tokenizer()
    tiny_llama(tokenizer, seed=seed, **overrides).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def numbered_tokenizer(vocab_size: int) -> Any:
    """A word-level tokenizer of ``vocab_size`` tokens (``<|endoftext|>``, ``<|im_start|>``,
    ``<|im_end|>``, then ``t3`` ... ``t{vocab_size-1}``): any id a model of that vocabulary
    samples decodes, for benchmarks of real-sized random models with no tokenizer files."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {s: i for i, s in enumerate(SPECIALS)}
    vocab.update({f"t{i}": i for i in range(len(SPECIALS), vocab_size)})
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return _chatml_tokenizer(backend, unk_token="<|endoftext|>")
