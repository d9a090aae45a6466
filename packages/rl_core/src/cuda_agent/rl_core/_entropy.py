"""Entropy of the policy's next-token distributions, from logits, in chunks."""

import torch


def entropy_from_logits(logits_btv: torch.Tensor, *, chunk_size: int | None = None) -> torch.Tensor:
    """Entropy of `softmax(logits)` over the last dim, shape `logits_btv.shape[:-1]`.

        H_bt = -sum_v p_btv log p_btv = logsumexp_v(z_btv) - sum_v p_btv z_btv,  p = softmax(z)

    The standard identity (as in verl and OpenRLHF), exact for any logits, including -inf
    for banned tokens. Computed in float32 (float64 stays float64) whatever the logits' dtype.
    `chunk_size` tokens at a time bounds the float32 temporaries to `chunk_size x V` instead
    of `B x T x V` (1024 x 8192 tokens over a 152k vocabulary would need 5 TB at once);
    `None` does all tokens at once. Chunking bounds the forward pass: use it for
    logging under `torch.no_grad`; under autograd each chunk's softmax is kept for backward,
    so also wrap the call in `torch.utils.checkpoint` if memory is short.
    """
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    batch_shape = logits_btv.shape[:-1]
    logits_nv = logits_btv.reshape(-1, logits_btv.shape[-1])
    if chunk_size is None or chunk_size >= logits_nv.shape[0]:
        return _entropy(logits_nv).reshape(batch_shape)
    chunks = [_entropy(chunk_cv) for chunk_cv in logits_nv.split(chunk_size)]
    return torch.cat(chunks).reshape(batch_shape)


def _entropy(logits_nv: torch.Tensor) -> torch.Tensor:
    dtype = torch.promote_types(logits_nv.dtype, torch.float32)
    # A banned token (z = -inf, p = 0) would make p * z = 0 * -inf = nan, in value and
    # gradient; the most negative finite float gives p = 0 and p * z = 0 instead.
    logits_nv = logits_nv.to(dtype).clamp(min=torch.finfo(dtype).min)
    probs_nv = torch.softmax(logits_nv, dim=-1)
    return torch.logsumexp(logits_nv, dim=-1) - (probs_nv * logits_nv).sum(dim=-1)
