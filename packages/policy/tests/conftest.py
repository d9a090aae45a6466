"""Fixtures: a tiny byte-level tokenizer with a ChatML template and a tiny random Llama."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# Let the tests run from a plain checkout (the package need not be pip-installed).
_SRC = str(Path(__file__).resolve().parents[1] / "src")
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

from cuda_agent.policy import Policy, PolicyConfig, testing  # noqa: E402


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Any:
    """259 tokens: 3 specials + the 256 byte-level characters (any text round-trips)."""
    return testing.tiny_tokenizer()


@pytest.fixture
def make_model(tiny_tokenizer: Any) -> Callable[..., Any]:
    """Fresh tiny LlamaForCausalLM; the same weights on every call (seeded)."""

    def build(seed: int = 0) -> Any:
        return testing.tiny_llama(tiny_tokenizer, seed=seed, max_position_embeddings=512)

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
