"""Per-token log-probabilities of responses, computed chunk by chunk over the vocabulary head."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from cuda_agent.rl_core import entropy_from_logits

# Upper bound on the number of fp32 logits materialised at once (per chunk): 2**26 floats =
# 256 MiB. A chunk holds max(1, _LOGIT_CHUNK_ELEMENTS // vocab_size) response tokens.
_LOGIT_CHUNK_ELEMENTS = 2**26
# On the CPU, 2**24 floats = 64 MiB (341 tokens of a 49k vocabulary): a chunk's backward holds
# about four [chunk, vocab] float32 tensors at once (the logits, their softmax, the gradient),
# which come straight out of the process's resident memory; 256 MiB chunks put 1 GB on top
# of the CPU default's RL step (benchmarks/results/2026-12-03-cpu-memory/).
_CPU_LOGIT_CHUNK_ELEMENTS = 2**24
# Rows of a chunk whose entropy is computed at once when it needs no gradient (its float32
# temporaries: 3 x rows x vocab).
_ENTROPY_ROWS = 64


def adapter_autocast(hf_model: Any) -> contextlib.AbstractContextManager[Any]:
    """Autocast to the model's dtype when float32 adapter weights sit on a bf16/fp16 model.

    peft keeps LoRA weights in float32 (right for the optimizer), so without autocast every
    adapter matmul runs in float32 and keeps float32 copies of its inputs for the backward:
    on an H200 that made LoRA training slower than full fine-tuning and took more memory
    (`benchmarks/results/2026-11-30-h200-session4/`). Under autocast the adapter matmuls run
    in the model's dtype, as in usual mixed-precision training; the weights and their
    gradients stay float32. Not for a model that keeps some modules in float32 on purpose
    (`_keep_in_fp32_modules`): autocast would cover the whole decoder, those modules included.
    """
    dtype = hf_model.dtype
    if dtype not in (torch.bfloat16, torch.float16):
        return contextlib.nullcontext()
    if getattr(hf_model, "_keep_in_fp32_modules", None):
        # Autocast would run those modules in low precision too (and the sampler does not).
        return contextlib.nullcontext()
    if not any(p.dtype == torch.float32 for n, p in hf_model.named_parameters() if "lora_" in n):
        return contextlib.nullcontext()
    return torch.autocast(hf_model.device.type, dtype=dtype)


@dataclass(frozen=True)
class ScoringBatch:
    """(prompt, response) pairs as one right-padded batch on a device.

    input_ids, attention_mask: [B, T_total] (prompt + response, padded on the right).
    positions: [B, T_resp_max]: where response token j of row b is predicted (read), i.e.
        len(prompt[b]) - 1 + j (clamped to the row's last response token past its end).
    targets: [B, T_resp_max] response token ids (0 past the end); mask: [B, T_resp_max] bool.
    temperature: the logits are divided by it before the softmax (the distribution a sampler
        at that temperature drew from); 1: the model's own.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    positions: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    temperature: float = 1.0

    @property
    def empty(self) -> bool:
        """No response token in the whole batch (nothing to score)."""
        return self.mask.numel() == 0 or not bool(self.mask.any())


def right_padded_batch(
    prompt_ids: list[list[int]],
    response_ids: list[list[int]],
    pad_id: int,
    device: torch.device,
    temperature: float = 1.0,
) -> ScoringBatch:
    """Check and batch (prompt, response) pairs for one forward pass (see ScoringBatch)."""
    if not temperature > 0:
        raise ValueError(
            f"the scoring temperature must be > 0, got {temperature} (greedy answers are "
            "scored at 1: the sampler records the model's own log-probs for them)"
        )
    if len(prompt_ids) != len(response_ids):
        raise ValueError(f"got {len(prompt_ids)} prompts but {len(response_ids)} responses")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError(
            "every prompt needs at least one token (the first response token is predicted from it)"
        )
    batch = len(prompt_ids)
    response_length = max((len(r) for r in response_ids), default=0)
    mask = torch.zeros((batch, response_length), dtype=torch.bool)
    targets = torch.zeros((batch, response_length), dtype=torch.long)
    positions = torch.zeros((batch, response_length), dtype=torch.long)
    for b, (prompt, response) in enumerate(zip(prompt_ids, response_ids, strict=True)):
        mask[b, : len(response)] = True
        targets[b, : len(response)] = torch.tensor(response, dtype=torch.long)
        # Logits at position t predict token t + 1: response token j is read at len(prompt) - 1 + j.
        positions[b] = (
            len(prompt) - 1 + torch.arange(response_length).clamp(max=max(len(response) - 1, 0))
        )
    sequences = [list(p) + list(r) for p, r in zip(prompt_ids, response_ids, strict=True)]
    total_length = max((len(s) for s in sequences), default=0)
    input_ids = torch.full((batch, total_length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((batch, total_length), dtype=torch.long)
    for b, seq in enumerate(sequences):
        input_ids[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        attention_mask[b, : len(seq)] = 1
    return ScoringBatch(
        input_ids.to(device),
        attention_mask.to(device),
        positions.to(device),
        targets.to(device),
        mask.to(device),
        float(temperature),
    )


def at_positions(states_bth: torch.Tensor, positions_br: torch.Tensor) -> torch.Tensor:
    """[B, R, H] states at the response positions: out[b, j] = states[b, positions[b, j]]."""
    index_brh = positions_br[..., None].expand(-1, -1, states_bth.shape[-1])
    return states_bth.gather(1, index_brh)


_CHECKPOINT_MIN_TOKENS = "_cuda_agent_checkpoint_min_tokens"


def set_checkpoint_min_tokens(hf_model: Any, min_tokens: int) -> None:
    """Checkpoint (when checkpointing is on) only forwards over >= `min_tokens` tokens (0: all).
    Kept on the decoder module, which a policy and the value adapters beside it share."""
    setattr(hf_model.get_decoder(), _CHECKPOINT_MIN_TOKENS, int(min_tokens))


@contextlib.contextmanager
def checkpointing_for(hf_model: Any, batch: ScoringBatch) -> Iterator[None]:
    """Within: activation checkpointing off for a batch of fewer tokens (rows x padded length)
    than `set_checkpoint_min_tokens` asked, on as configured otherwise. The choice is made in
    the forward (the backward replays whatever the forward kept), and the layers' own flags
    are restored on the way out, errors included."""
    min_tokens = getattr(hf_model.get_decoder(), _CHECKPOINT_MIN_TOKENS, 0)
    if min_tokens <= 0 or batch.input_ids.numel() >= min_tokens:
        yield
        return
    layers = [m for m in hf_model.modules() if getattr(m, "gradient_checkpointing", False) is True]
    for layer in layers:
        layer.gradient_checkpointing = False
    try:
        yield
    finally:
        for layer in layers:
            layer.gradient_checkpointing = True


def response_hidden_states(hf_model: Any, batch: ScoringBatch) -> torch.Tensor:
    """[B, R, H] last hidden states of the decoder at `batch`'s response positions (under
    `adapter_autocast`): the state before response token j, which both the policy's head
    (log-probs) and the critic's head (values) read. One right-padded forward, with grad,
    checkpointed or not by `checkpointing_for`."""
    with adapter_autocast(hf_model), checkpointing_for(hf_model, batch):
        states_bth = hf_model.get_decoder()(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False
        ).last_hidden_state
    return at_positions(states_bth, batch.positions)


def head_is_separable(hf_model: Any, device: torch.device) -> bool:
    """True when logits == output_head(decoder(...).last_hidden_state).

    token_logprobs relies on it to apply the vocabulary head to response positions only;
    models that post-process logits (soft-capping, scaling) fail this check and take the
    plain full-logits path instead.
    """
    try:
        decoder, head = hf_model.get_decoder(), hf_model.get_output_embeddings()
    except (AttributeError, NotImplementedError, ValueError):
        return False
    if decoder is None or head is None:
        return False
    was_training = hf_model.training
    hf_model.eval()
    try:
        ids = torch.tensor([[0, 1, 2]], device=device)
        with torch.no_grad():
            full = hf_model(input_ids=ids, use_cache=False).logits
            split = head(decoder(input_ids=ids, use_cache=False).last_hidden_state)
    finally:
        hf_model.train(was_training)
    return bool(
        full.shape == split.shape
        and torch.allclose(full.float(), split.float(), rtol=1e-3, atol=1e-3)
    )


@dataclass(frozen=True)
class TokenLogprobs:
    """Log-probs of response tokens, right-padded to the longest response of the batch.

    logprobs: [B, T_resp_max] float32, log p(response[b, t] | prompt[b], response[b, :t]); 0 where
        mask is False.
    mask: [B, T_resp_max] bool, True on real response tokens.
    entropy: [B, T_resp_max] float32 entropy of the model's next-token distribution at each
        response position (0 where mask is False), or None when not requested.
    """

    logprobs: torch.Tensor
    mask: torch.Tensor
    entropy: torch.Tensor | None = None


def _chunk_logprobs_and_entropy(
    head: Callable[[torch.Tensor], torch.Tensor],
    hidden_nh: torch.Tensor,
    targets_n: torch.Tensor,
    with_entropy: bool,
    entropy_grad: bool = True,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(target) = z[target] - logsumexp(z), z = logits / temperature; the entropy (of the
    same tempered distribution) is rl_core's ``entropy_from_logits`` (its one home: exact for
    -inf logits too).

    Without ``entropy_grad`` the entropy is computed without autograd, after the log-probs, and
    ``_ENTROPY_ROWS`` rows at a time: nothing of it is saved for the backward, and the
    checkpoint's recomputation in the backward stops before it (``early_stop``). With it, the
    recomputation also rebuilds the entropy's saved [chunk, vocab] tensors, which then stay
    alive until the returned entropy is dropped, even when no gradient ever goes through them."""
    logits_nv = head(hidden_nh).float()
    if temperature != 1.0:
        logits_nv = logits_nv / temperature
    log_normaliser_n = torch.logsumexp(logits_nv, dim=-1)
    logprobs_n = logits_nv.gather(-1, targets_n[:, None]).squeeze(-1) - log_normaliser_n
    if not with_entropy:
        entropy_n = torch.zeros_like(logprobs_n)
    elif entropy_grad:
        entropy_n = entropy_from_logits(logits_nv)
    else:
        with torch.no_grad():
            entropy_n = entropy_from_logits(logits_nv.detach(), chunk_size=_ENTROPY_ROWS)
    return logprobs_n, entropy_n


def logprobs_from_hidden(
    head: Callable[[torch.Tensor], torch.Tensor],
    hidden_nh: torch.Tensor,
    targets_n: torch.Tensor,
    vocab_size: int,
    *,
    with_entropy: bool,
    entropy_grad: bool = True,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply the output head to N hidden states in chunks; return ([N] logprobs, [N] entropy)
    of the distribution softmax(logits / temperature).

    When autograd is recording, each chunk runs under activation checkpointing, so only the
    [chunk, H] hidden states are kept for the backward pass, never the [chunk, vocab] logits:
    peak memory is bounded by _LOGIT_CHUNK_ELEMENTS (_CPU_LOGIT_CHUNK_ELEMENTS on the CPU)
    regardless of batch and sequence length.
    ``entropy_grad=False``: the entropy is a value without gradient (for statistics), which
    keeps its [chunk, vocab] temporaries out of the backward (``_chunk_logprobs_and_entropy``).
    """
    elements = (
        _CPU_LOGIT_CHUNK_ELEMENTS if hidden_nh.device.type == "cpu" else _LOGIT_CHUNK_ELEMENTS
    )
    chunk = max(1, elements // max(1, vocab_size))
    needs_grad = torch.is_grad_enabled() and (
        hidden_nh.requires_grad or any(p.requires_grad for p in _parameters_of(head))
    )
    logprobs: list[torch.Tensor] = []
    entropies: list[torch.Tensor] = []
    for start in range(0, hidden_nh.shape[0], chunk):
        h, t = hidden_nh[start : start + chunk], targets_n[start : start + chunk]
        if needs_grad:
            lp, ent = checkpoint(
                _chunk_logprobs_and_entropy,
                head,
                h,
                t,
                with_entropy,
                entropy_grad,
                temperature,
                use_reentrant=False,
            )
        else:
            lp, ent = _chunk_logprobs_and_entropy(
                head, h, t, with_entropy, entropy_grad, temperature
            )
        logprobs.append(lp)
        entropies.append(ent)
    if not logprobs:
        empty = hidden_nh.new_zeros(0, dtype=torch.float32)
        return empty, empty
    return torch.cat(logprobs), torch.cat(entropies)


def _parameters_of(head: Callable[[torch.Tensor], torch.Tensor]) -> list[torch.nn.Parameter]:
    return list(head.parameters()) if isinstance(head, torch.nn.Module) else []
