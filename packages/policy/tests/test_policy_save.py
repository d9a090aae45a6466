"""save -> load_adapter round trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from cuda_agent.policy import PolicyConfig

RESPONSES = [[70, 71, 72, 2], [5, 6]]


def train_a_little(policy: Any, prompts: list[list[int]]) -> None:
    """Two SGD steps so the saved weights differ from a fresh policy's."""
    optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=0.5)
    for _ in range(2):
        optimizer.zero_grad()
        (-policy.token_logprobs(prompts[:2], RESPONSES).logprobs.sum()).backward()
        optimizer.step()


@pytest.mark.parametrize("lora_rank", [4, 0])
def test_save_then_load_adapter_reproduces_logprobs(
    make_policy: Any, prompts: list[list[int]], tmp_path: Path, lora_rank: int
) -> None:
    trained = make_policy(lora_rank=lora_rank)
    train_a_little(trained, prompts)
    with torch.no_grad():
        expected = trained.token_logprobs(prompts[:2], RESPONSES).logprobs
    trained.save(tmp_path)

    fresh = make_policy(lora_rank=lora_rank)
    with torch.no_grad():
        assert not torch.allclose(fresh.token_logprobs(prompts[:2], RESPONSES).logprobs, expected)
        fresh.load_adapter(tmp_path)
        torch.testing.assert_close(fresh.token_logprobs(prompts[:2], RESPONSES).logprobs, expected)

    saved = json.loads((tmp_path / "policy_config.json").read_text())
    assert PolicyConfig(**saved) == trained.config
    assert (tmp_path / "tokenizer_config.json").is_file()
    weights = "adapter_model.safetensors" if lora_rank else "model.safetensors"
    assert (tmp_path / weights).is_file()


def test_a_snapshot_writes_the_weights_as_they_were_when_taken(
    make_policy: Any, prompts: list[list[int]], tmp_path: Path
) -> None:
    """A checkpoint written in the background while training goes on holds the step it was
    taken at, not the weights the later steps made, in the files `save` writes."""
    from safetensors.torch import load_file

    policy = make_policy(lora_rank=4)
    train_a_little(policy, prompts)
    with torch.no_grad():
        expected = policy.token_logprobs(prompts[:2], RESPONSES).logprobs
    policy.save(tmp_path / "saved")
    snapshot = policy.weights_snapshot()
    train_a_little(policy, prompts)  # the live weights move on
    snapshot.write(tmp_path / "snapshot")
    names = sorted(p.name for p in (tmp_path / "saved").iterdir())
    assert sorted(p.name for p in (tmp_path / "snapshot").iterdir()) == names
    saved = load_file(str(tmp_path / "saved" / "adapter_model.safetensors"))
    written = load_file(str(tmp_path / "snapshot" / "adapter_model.safetensors"))
    assert saved.keys() == written.keys()
    assert all(torch.equal(saved[k], written[k]) for k in saved)
    fresh = make_policy(lora_rank=4)
    fresh.load_adapter(tmp_path / "snapshot")
    with torch.no_grad():
        torch.testing.assert_close(fresh.token_logprobs(prompts[:2], RESPONSES).logprobs, expected)
        moved = policy.token_logprobs(prompts[:2], RESPONSES).logprobs
    assert not torch.allclose(moved, expected)
    assert policy.snapshots_weights
    full = make_policy(lora_rank=0)
    assert not full.snapshots_weights
    with pytest.raises(ValueError, match="LoRA"):
        full.weights_snapshot()


def test_load_adapter_names_the_mismatch(make_policy: Any, tmp_path: Path) -> None:
    make_policy(lora_rank=4).save(tmp_path / "r4")
    with pytest.raises(ValueError, match="lora_rank=8"):
        make_policy(lora_rank=8).load_adapter(tmp_path / "r4")
    with pytest.raises(FileNotFoundError, match="lora_rank > 0"):
        make_policy(lora_rank=4).load_adapter(tmp_path / "nothing-here")


@pytest.mark.parametrize("lora_rank", [4, 0])
def test_export_merged_loads_without_peft_and_scores_the_same(
    make_policy: Any, prompts: list[list[int]], tmp_path: Path, lora_rank: int
) -> None:
    from transformers import AutoModelForCausalLM

    policy = make_policy(lora_rank=lora_rank)
    train_a_little(policy, prompts)
    want = policy.token_logprobs(prompts[:2], RESPONSES).logprobs.detach()
    out = policy.export_merged(tmp_path / "merged")
    assert not (out / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(out)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    exported = make_policy(model=merged, lora_rank=0)
    got = exported.token_logprobs(prompts[:2], RESPONSES).logprobs.detach()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # The policy is untouched: still an adapter, still trainable, same scores.
    assert all(p.requires_grad for p in policy.trainable_parameters())
    again = policy.token_logprobs(prompts[:2], RESPONSES).logprobs.detach()
    torch.testing.assert_close(again, want, atol=0, rtol=0)
