"""What the static decoding loop changes on the model while it samples, and why.

A profile of the compiled decoding step (Qwen2.5-0.5B shape, batch 64, bf16, LoRA, H200,
`benchmarks/results/2026-11-30-h200-session4/`) found two costs that are not the model's
own arithmetic:

- **Grouped-query attention.** With a padding mask, transformers' SDPA path copies each
  key/value head out to its query heads (`repeat_kv`) before attention, on every layer and
  step: 7x the KV cache written and read again. For one query token, the query heads of a
  group can instead stand in for the query positions of their shared key/value head:

      q [B, H_kv * G, 1, D]  ->  q' [B, H_kv, G, D]     (query head h uses KV head h // G)
      out' = softmax(q' K^T * scale + mask) V            mask [B, 1, 1, L] broadcasts over G
      out  = out' reshaped back to [B, H_kv * G, 1, D]

  which reads the cache once. `grouped_decode_attention` does this for a single query token
  and otherwise calls transformers' SDPA function unchanged (prefill and training).
- **Adapter dtype.** peft keeps LoRA weights in float32 on a bf16 model (right for the
  optimizer), so every adapter matmul ran in float32 on CUDA cores. While sampling, the
  adapter weights are swapped for low-precision copies kept at fixed addresses (so CUDA
  graphs can keep reading them); the float32 weights are put back afterwards, untouched.
  The sampler's log-probs are those of this bf16 model, so they can differ slightly from the
  float32-adapter log-probs of `token_logprobs`: the off-policy correction the sampler's
  log-probs exist for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

GROUPED_ATTENTION = "cuda_agent_grouped_sdpa"


def grouped_decode_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, with grouped heads as queries for one query token."""
    groups = int(getattr(module, "num_key_value_groups", 1))
    batch, heads, q_length, dim = query.shape
    if (
        q_length != 1
        or groups == 1
        or module.training
        or kwargs.get("position_bias") is not None
        or kwargs.get("softcap") is not None
        or (attention_mask is not None and attention_mask.shape[1] != 1)
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    grouped = query.reshape(batch, heads // groups, groups, dim)
    out = torch.nn.functional.scaled_dot_product_attention(
        grouped, key, value, attn_mask=attention_mask, scale=scaling
    )
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None


AttentionInterface.register(GROUPED_ATTENTION, grouped_decode_attention)
AttentionMaskInterface.register(GROUPED_ATTENTION, sdpa_mask)


@contextmanager
def grouped_attention(hf_model: Any) -> Iterator[None]:
    """Use `grouped_decode_attention` inside the block when the model uses SDPA."""
    before = getattr(hf_model.config, "_attn_implementation", None)
    if before != "sdpa":
        yield
        return
    hf_model.set_attn_implementation(GROUPED_ATTENTION)
    try:
        yield
    finally:
        hf_model.set_attn_implementation(before)


class AdapterCast:
    """Low-precision copies of the LoRA weights, swapped in for sampling (module docstring).

    The copies keep their addresses from call to call; each `swapped()` refreshes them from
    the float32 weights first, so they always hold the current adapter.
    """

    def __init__(self, hf_model: Any) -> None:
        from peft.tuners.lora import LoraLayer

        dtype = hf_model.dtype
        self._pairs: list[tuple[torch.nn.Parameter, torch.Tensor]] = []
        if dtype not in (torch.bfloat16, torch.float16):
            return
        for module in hf_model.modules():
            if not isinstance(module, LoraLayer):
                continue
            for adapters in (module.lora_A, module.lora_B):
                for param in adapters.parameters():
                    if param.is_floating_point() and param.dtype != dtype:
                        self._pairs.append((param, torch.empty_like(param, dtype=dtype)))

    @contextmanager
    def swapped(self) -> Iterator[None]:
        originals = []
        for param, copy in self._pairs:
            copy.copy_(param.data)
            originals.append(param.data)
            param.data = copy
        try:
            yield
        finally:
            for (param, _), data in zip(self._pairs, originals, strict=True):
                param.data = data
