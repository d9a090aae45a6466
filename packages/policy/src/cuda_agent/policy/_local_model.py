"""`LocalModel`: this process's model, and the three things a strategy runs on it.

A `Policy` owns one and hands it to its decoding and scoring strategies (`_strategies.py`) with
each call, so the strategies read nothing of the policy itself and `_strategies.py` does not
import `_policy.py`. It holds what decoding and scoring need of the model: the transformers
model, its tokenizer and device, the eos and pad ids, whether the vocabulary head can be
applied to response positions only (`head_is_separable`) and our static-cache decoder, built
on the first static-cache sampling. The operations:
- `decode_static`: our own loop over a preallocated KV cache (`_decoding.py`);
- `decode_with_generate`: transformers' `generate` with a dynamic cache;
- `flat_logprobs`: the scoring forward, log-probs (and entropies) of the real response tokens
  of a right-padded batch (`_scoring.py`).
"""

from __future__ import annotations

from typing import Any

import torch

from cuda_agent.policy._decoding import StaticDecoder
from cuda_agent.policy._generation import DecodeRequest, decode_static, decode_with_generate
from cuda_agent.policy._scoring import (
    ScoringBatch,
    adapter_autocast,
    at_positions,
    checkpointing_for,
    head_is_separable,
    logprobs_from_hidden,
    response_hidden_states,
)


class LocalModel:
    """The model side of a policy on this process (see the module docstring)."""

    def __init__(
        self,
        hf_model: Any,
        tokenizer: Any,
        device: torch.device,
        eos_ids: frozenset[int],
        pad_id: int,
    ) -> None:
        self.hf_model = hf_model
        self.tokenizer = tokenizer
        self.device = device
        self.eos_ids = eos_ids
        self.pad_id = pad_id
        self.separable_head = head_is_separable(hf_model, device)
        self.decoder: StaticDecoder | None = None  # built on the first static-cache sampling

    def decode_static(self, request: DecodeRequest) -> tuple[torch.Tensor, torch.Tensor]:
        """Our own decoding loop (`_decoding.py`), compiled into CUDA graphs on CUDA."""
        if self.decoder is None:
            self.decoder = StaticDecoder(self.hf_model, compile=self.device.type == "cuda")
        return decode_static(
            self.decoder, self.tokenizer, request, eos_ids=self.eos_ids, pad_id=self.pad_id
        )

    def decode_with_generate(self, request: DecodeRequest) -> tuple[torch.Tensor, torch.Tensor]:
        """transformers' `generate` with a dynamic cache; the sampler's log-probs recorded."""
        return decode_with_generate(
            self.hf_model, self.tokenizer, request, eos_ids=self.eos_ids, pad_id=self.pad_id
        )

    def flat_logprobs(
        self, batch: ScoringBatch, with_entropy: bool, entropy_grad: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """([N] log-probs, [N] entropies) of the N real response tokens of `batch`."""
        head: Any
        if self.separable_head:
            head = self.hf_model.get_output_embeddings()
            selected_brh = response_hidden_states(self.hf_model, batch)
            vocab_size = int(head.weight.shape[0])
        else:  # logits post-processed by the model: take them whole (more memory, still exact)
            with adapter_autocast(self.hf_model), checkpointing_for(self.hf_model, batch):
                logits_btv = self.hf_model(
                    input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False
                ).logits
            head, vocab_size = torch.nn.Identity(), int(logits_btv.shape[-1])
            selected_brh = at_positions(logits_btv, batch.positions)
        mask = batch.mask
        return logprobs_from_hidden(
            head,
            selected_brh[mask],
            batch.targets[mask],
            vocab_size,
            with_entropy=with_entropy,
            entropy_grad=entropy_grad,
            temperature=batch.temperature,
        )
