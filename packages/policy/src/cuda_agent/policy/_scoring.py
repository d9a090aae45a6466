"""Per-token log-probabilities of responses, computed chunk by chunk over the vocabulary head."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

# Upper bound on the number of fp32 logits materialised at once (per chunk): 2**26 floats =
# 256 MiB. A chunk holds max(1, _LOGIT_CHUNK_ELEMENTS // vocab_size) response tokens.
_LOGIT_CHUNK_ELEMENTS = 2**26


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
) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(target) = logit[target] - logsumexp(logits); H = logsumexp(logits) - sum(p * logits)."""
    logits_nv = head(hidden_nh).float()
    log_normaliser_n = torch.logsumexp(logits_nv, dim=-1)
    logprobs_n = logits_nv.gather(-1, targets_n[:, None]).squeeze(-1) - log_normaliser_n
    if with_entropy:
        probs_nv = torch.softmax(logits_nv, dim=-1)
        entropy_n = log_normaliser_n - (probs_nv * logits_nv).sum(-1)
    else:
        entropy_n = torch.zeros_like(logprobs_n)
    return logprobs_n, entropy_n


def logprobs_from_hidden(
    head: Callable[[torch.Tensor], torch.Tensor],
    hidden_nh: torch.Tensor,
    targets_n: torch.Tensor,
    vocab_size: int,
    *,
    with_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply the output head to N hidden states in chunks; return ([N] logprobs, [N] entropy).

    When autograd is recording, each chunk runs under activation checkpointing, so only the
    [chunk, H] hidden states are kept for the backward pass, never the [chunk, vocab] logits:
    peak memory is bounded by _LOGIT_CHUNK_ELEMENTS regardless of batch and sequence length.
    """
    chunk = max(1, _LOGIT_CHUNK_ELEMENTS // max(1, vocab_size))
    needs_grad = torch.is_grad_enabled() and (
        hidden_nh.requires_grad or any(p.requires_grad for p in _parameters_of(head))
    )
    logprobs: list[torch.Tensor] = []
    entropies: list[torch.Tensor] = []
    for start in range(0, hidden_nh.shape[0], chunk):
        h, t = hidden_nh[start : start + chunk], targets_n[start : start + chunk]
        if needs_grad:
            lp, ent = checkpoint(
                _chunk_logprobs_and_entropy, head, h, t, with_entropy, use_reentrant=False
            )
        else:
            lp, ent = _chunk_logprobs_and_entropy(head, h, t, with_entropy)
        logprobs.append(lp)
        entropies.append(ent)
    if not logprobs:
        empty = hidden_nh.new_zeros(0, dtype=torch.float32)
        return empty, empty
    return torch.cat(logprobs), torch.cat(entropies)


def _parameters_of(head: Callable[[torch.Tensor], torch.Tensor]) -> list[torch.nn.Parameter]:
    return list(head.parameters()) if isinstance(head, torch.nn.Module) else []
