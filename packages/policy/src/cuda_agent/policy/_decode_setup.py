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

Uncompiled (the CPU), a third cost: every adapted projection is three matmuls, a scale and an
add, where the weights alone are one matmul. `MergedAdapters` folds the adapters into copies
of the weights while sampling,

    W' = W + sum_a scaling_a * B_a A_a        (peft's `get_delta_weight`, each active adapter)
    x W'^T = x W^T + sum_a scaling_a * (x A_a^T) B_a^T   up to float rounding

and puts the original weight tensors back afterwards, untouched (not merged and unmerged in
place, which would leave rounding in the base weights after every call). The copies exist only
during a call. The sampler's log-probs then differ from `token_logprobs`' by float rounding
(the off-policy correction again); greedy answers can differ only where two tokens tie to
that rounding.

Uncompiled, a fourth: a projection of a few rows. Every decoding step multiplies a handful of
rows (one token per answer) by each weight. torch computes ``x W^T`` (``F.linear``) as a
product with the transposed weight; on the 2-core AMD EPYC (AVX2, torch 2.13's MKL) that form
reads the weight slowly (the vocabulary head's for 8 rows at 2.8 GB/s, for one at 12), and
the same product taken the other way round, ``(W x^T)^T``, is faster from 2 to 64 rows: 8
rows through the 49,152 x 576 vocabulary head took 39.8 ms against 11.1 ms, through a
1,536 x 576 projection 0.39 against 0.33 ms (the same at one row, slower at 600). So while
sampling, a plain ``nn.Linear`` given 2 to ``NARROW_ROWS`` rows runs as ``(W x^T)^T``
(`NarrowProducts`); other inputs (the prompt's forward, a last row) run as before. Same
products, other summation order: the logits differ by float rounding, as with the folded
adapters. The held-out batch of the CPU default run sampled 1.18 times faster (1.11 in a
first run), with the same tokens (``benchmarks/results/2026-12-07-cpu-narrow/``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

GROUPED_ATTENTION = "cuda_agent_grouped_sdpa"

NARROW_ROWS = 64
"""`NarrowProducts`: inputs of 2 to this many rows run as ``(W x^T)^T``: on the CPU measured
faster from 2 to 64 rows, the same at one, slower at 600
(``benchmarks/results/2026-12-07-cpu-narrow/``)."""


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
    """transformers' SDPA attention, with grouped heads as queries for one query token.

    A mask shorter than the cache (the uncompiled loop's: the slots written so far) limits
    the keys and values read to its length."""
    if attention_mask is not None and attention_mask.shape[-1] < key.shape[-2]:
        written = attention_mask.shape[-1]
        key, value = key[:, :, :written], value[:, :, :written]
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
def grouped_attention(hf_model: Any) -> Iterator[bool]:
    """Use `grouped_decode_attention` inside the block when the model uses SDPA; yields
    whether it does (only then may a step's mask be shorter than the cache)."""
    before = getattr(hf_model.config, "_attn_implementation", None)
    if before != "sdpa":
        yield False
        return
    hf_model.set_attn_implementation(GROUPED_ATTENTION)
    try:
        yield True
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


class MergedAdapters:
    """The active LoRA adapters folded into copies of the weights, while sampling (module
    docstring). Only plain LoRA on linear layers is folded (no DoRA or other variant, no
    adapter bias); every other layer runs as it is."""

    def __init__(self, hf_model: Any) -> None:
        from peft.tuners.lora.layer import Linear

        self._layers: list[Any] = [m for m in hf_model.modules() if isinstance(m, Linear)]

    @contextmanager
    def merged(self) -> Iterator[None]:
        folded: list[tuple[Any, torch.Tensor]] = []
        try:
            with torch.no_grad():
                for layer in self._layers:
                    names = self._foldable(layer)
                    if not names:
                        continue
                    base = layer.get_base_layer()
                    weight: torch.Tensor = base.weight.data
                    merged = weight.clone()
                    for name in names:
                        merged += layer.get_delta_weight(name).to(merged.dtype)
                    base.weight.data = merged
                    layer.merged_adapters = names  # peft's forward: the base layer alone
                    folded.append((layer, weight))
            yield
        finally:
            for layer, weight in folded:
                layer.get_base_layer().weight.data = weight
                layer.merged_adapters = []

    @staticmethod
    def _foldable(layer: Any) -> list[str]:
        """The adapters of `layer` to fold, or [] where it must run unfolded."""
        if layer.merged or layer.disable_adapters:
            return []
        names = [a for a in layer.active_adapters if a in layer.lora_A]
        base = layer.get_base_layer()
        if (
            not isinstance(base, torch.nn.Linear)
            or not base.weight.is_floating_point()
            or any(a in layer.lora_variant or layer.lora_bias.get(a, False) for a in names)
        ):
            return []
        return names


def turned_product(weight: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``rows W^T`` for ``rows`` of shape [n, in], taken as ``(W rows^T)^T`` (module docstring),
    contiguous: a transposed result sent SDPA to its slow path, and slowed what follows."""
    return torch.matmul(weight, rows.t()).t().contiguous()


def narrow_linear(layer: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)``, computed as ``(W x^T)^T`` when ``x`` holds 2 to ``NARROW_ROWS`` rows
    (module docstring), else as ``F.linear``."""
    features = x.shape[-1]
    rows = x.numel() // features if features else 0
    if rows < 2 or rows > NARROW_ROWS:  # (one row: the two forms cost the same)
        return torch.nn.functional.linear(x, layer.weight, layer.bias)
    out = turned_product(layer.weight, x.reshape(rows, features))
    if layer.bias is not None:
        out = out + layer.bias
    return out.reshape(*x.shape[:-1], layer.weight.shape[0])


class NarrowProducts:
    """Every plain ``torch.nn.Linear`` of a model runs as `narrow_linear` inside `swapped()`
    (module docstring); afterwards each runs its own ``forward`` again. Subclasses (peft's
    adapted layers, quantized layers) are left alone: their base layers, where plain, are
    swapped. So is a layer whose ``forward`` something else replaced already (accelerate's
    device hooks do): it keeps that one."""

    def __init__(self, hf_model: Any) -> None:
        self._layers = [
            m
            for m in hf_model.modules()
            if type(m) is torch.nn.Linear and m.weight.is_floating_point()
        ]

    @contextmanager
    def swapped(self) -> Iterator[None]:
        replaced: list[torch.nn.Linear] = []
        try:
            for layer in self._layers:
                if "forward" not in layer.__dict__:
                    layer.forward = functools.partial(narrow_linear, layer)  # type: ignore[method-assign]
                    replaced.append(layer)
            yield
        finally:
            for layer in replaced:
                layer.__dict__.pop("forward", None)
