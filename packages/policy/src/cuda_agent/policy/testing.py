"""Tiny real models for tests and GPU smoke runs where no weights can be downloaded.

``tiny_tokenizer()`` is a byte-level BPE tokenizer (any text round-trips) with a ChatML chat
template; ``tiny_llama(...)`` a seeded, randomly initialised ``LlamaForCausalLM`` sized for it;
``save_tiny_model(path)`` writes both as a directory that ``PolicyConfig(model=path)`` loads;
``serve_tiny_model(root)`` serves that model from a real ``transformers serve`` on loopback.
Architectures of real size (for benchmarks) come from ``tiny_llama(**config_overrides)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
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


def tiny_lora_policy(seed: int = 1, scale: float = 0.3) -> Any:
    """A CPU ``Policy`` on ``tiny_llama`` with a rank-4 LoRA whose weights are drawn from
    ``seed`` (times ``scale``): LoRA B starts at zero, an adapter that tests can see."""
    from cuda_agent.policy import Policy, PolicyConfig

    tokenizer = tiny_tokenizer()
    config = PolicyConfig(device="cpu", lora_rank=4, lora_alpha=8, seed=0)
    policy = Policy.from_model(tiny_llama(tokenizer), tokenizer, config)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed)
        for p in policy.trainable_parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)
    return policy


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


SERVING_EXTRAS = ("fastapi", "uvicorn", "openai", "pydantic")


def missing_serving_extras() -> list[str]:
    """The packages ``transformers serve`` needs that are not installed."""
    import importlib.util

    return [name for name in SERVING_EXTRAS if importlib.util.find_spec(name) is None]


@contextlib.contextmanager
def serve_tiny_model(
    root: Path, startup_timeout_s: float = 120.0
) -> Iterator[tuple[str, str, Path]]:
    """A real OpenAI-compatible server on loopback: ``transformers serve`` in a subprocess,
    fully offline, serving ``save_tiny_model(root / "tiny-llama")`` with sampling on. Yields
    (base_url, model id, model dir); stops the server on exit. Raises RuntimeError when it
    exits or is not ready in time (with its log's tail)."""
    import json
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request

    model_dir = save_tiny_model(root / "tiny-llama")
    # `transformers serve` only turns sampling on through the model's generation config
    # (temperature > 0 alone leaves do_sample False, i.e. greedy); temperature 0 turns it off.
    config_path = model_dir / "generation_config.json"
    generation_config = json.loads(config_path.read_text())
    generation_config["do_sample"] = True
    config_path.write_text(json.dumps(generation_config))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "HF_HOME": str(root / "hf_home"),
        "CUDA_VISIBLE_DEVICES": "",
        "TOKENIZERS_PARALLELISM": "false",
    }
    command = [
        sys.executable, "-m", "transformers.cli.transformers", "serve",
        str(model_dir),  # force_model: preloaded, and the only model the server answers for
        "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
    ]  # fmt: skip
    log_path = root / "server.log"

    def tail() -> str:
        return log_path.read_text(errors="replace")[-3000:] if log_path.exists() else "(no log)"

    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"transformers serve exited with {process.returncode}:\n{tail()}"
                )
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                    if response.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"transformers serve not ready after {startup_timeout_s:g} s:\n{tail()}"
                )
            time.sleep(0.25)
        yield base_url, str(model_dir), model_dir
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
