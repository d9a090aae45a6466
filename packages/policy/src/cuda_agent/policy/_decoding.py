"""The static-cache sampling path: our own decoding loop over a transformers `StaticCache`.

transformers' `generate` spends host time on every step: it runs the logits processors and
stopping criteria in Python, grows the input ids and the mask, and synchronises with the
device to ask whether every row is done. At batch 64 on an H200, that host time is most of a
small model's step. This loop works differently:
- every per-step tensor is preallocated;
- the model step and the sampler are compiled together (CUDA graphs on CUDA);
- it asks the device whether all rows are done once every `check_every` steps, not every step.

Sampling draws from the same distribution as transformers' sampler, because it reuses
transformers' own warpers:

    scores = warp(logits)                      temperature, then top-k, then top-p
    logp   = log_softmax(scores)
    token  = argmax_i (logp_i - log E_i),      E_i = -log U_i,  U_i ~ U[0, 1) i.i.d.

The E_i are i.i.d. Exp(1), and argmax_i p_i / E_i is distributed as p: the exponential race,
also known as the Gumbel-max trick. U < 1 keeps every E_i > 0, and a masked token has
logp = -inf, so it is never drawn. This runs inside a CUDA graph; `torch.multinomial` would
stop the graph. Greedy decoding (temperature 0) takes argmax logp of the unwarped logits.

The sampler's log-prob of each token is logp[token], the same quantity that
`SamplerLogprobRecorder` records on the `generate` path.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import StaticCache

from cuda_agent.policy._decode_setup import AdapterCast, grouped_attention
from cuda_agent.policy._sampling import sampling_processors

CACHE_BUCKET = 256
"""Cache lengths are rounded up to a multiple of this, so varying prompt lengths reuse one
compiled step and one cache."""

BATCH_BUCKET = 8
"""When compiled, batches are padded up to a multiple of this many rows (copies of the first
row, marked done from the start), so that a multi-turn run whose batch shrinks as episodes end
reuses a few compiled shapes instead of compiling for every size."""


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@dataclass(frozen=True)
class Warp:
    """Sampling settings. temperature 0 means greedy; top_k 0 and top_p 1 mean off."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0


def sample_next(logits_bv: torch.Tensor, warp: Warp) -> tuple[torch.Tensor, torch.Tensor]:
    """([B] next tokens, [B] their sampler log-probs) from [B, V] logits (formula above)."""
    scores = logits_bv.float()
    if warp.temperature == 0.0:
        logp = torch.log_softmax(scores, dim=-1)
        token = logp.argmax(dim=-1)
    else:
        for processor in sampling_processors(warp.temperature, warp.top_p, warp.top_k):
            scores = processor(None, scores)  # the warpers do not read the ids
        logp = torch.log_softmax(scores, dim=-1)
        race = -torch.log(-torch.log(torch.rand_like(logp)))
        token = (logp + race).argmax(dim=-1)
    return token, logp.gather(-1, token[:, None]).squeeze(-1)


@dataclass
class Decoded:
    """tokens [B, T] (pad after a row's eos), logprobs [B, T] float32, both on the CPU."""

    tokens: torch.Tensor
    logprobs: torch.Tensor


@dataclass
class DecodeStats:
    """A decoder's counters (`Policy.decode_stats`): calls, how many started a new shape
    (batch bucket, cache length), the wall seconds of those shapes' first steps (on CUDA:
    compiling and recording), and of every call's first step."""

    calls: int = 0
    new_shapes: int = 0
    new_shape_seconds: float = 0.0
    first_step_seconds: float = 0.0

    def first_step(self, seconds: float, new_shape: bool) -> None:
        self.first_step_seconds += seconds
        if new_shape:
            self.new_shapes += 1
            self.new_shape_seconds += seconds


class StaticDecoder:
    """Samples from a transformers causal LM with a preallocated KV cache.

    The cache and the compiled step are kept between calls and reused while the bucketed
    batch size (rounded up to `batch_bucket` rows) and the bucketed cache length (prompt +
    max_new_tokens, rounded up to `CACHE_BUCKET`) stay the same. A new shape allocates a new
    cache, and on CUDA the step is compiled again for it.
    """

    def __init__(self, hf_model: Any, *, compile: bool, batch_bucket: int | None = None) -> None:
        self._model = hf_model
        self._batch_bucket = batch_bucket or (BATCH_BUCKET if compile else 1)
        self._cache: Any = None
        self._cache_shape: tuple[int, int] | None = None
        # transformers 5.24 renamed the forward's `past_key_values` to `cache`.
        params = inspect.signature(hf_model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        self._compiled = compile
        self._adapters = AdapterCast(hf_model)
        # What new shapes cost (`stats`): each one allocates a cache and, on CUDA, compiles and
        # records the step again; its first step's wall time is mostly that. Every call's first
        # step is timed too: a recompile for another reason (a new sampling setting) shows there.
        self.stats = DecodeStats()
        step = self._step
        if compile:
            step = torch.compile(step, mode="reduce-overhead", fullgraph=False)
        self._compiled_step: Callable[..., tuple[torch.Tensor, torch.Tensor]] = step

    def _step(
        self,
        tokens_b1: torch.Tensor,
        positions_b1: torch.Tensor,
        mask_bl: torch.Tensor,
        warp: Warp,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self._forward(tokens_b1, positions_b1, mask_bl)
        return sample_next(logits, warp)

    def _forward(
        self, tokens_bp: torch.Tensor, positions_bp: torch.Tensor, mask_bl: torch.Tensor
    ) -> torch.Tensor:
        out = self._model(
            input_ids=tokens_bp,
            position_ids=positions_bp,
            attention_mask=mask_bl,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kwarg: self._cache},
        )
        return out.logits[:, -1, :]

    def _ready_cache(self, batch: int, length: int) -> None:
        if self._cache_shape == (batch, length):
            self._cache.reset()
            return
        self._cache = None  # free the old one first
        self._cache = StaticCache(config=self._model.config, max_cache_len=length)
        self._cache_shape = (batch, length)

    def decode(
        self,
        input_ids_bp: torch.Tensor,
        attention_mask_bp: torch.Tensor,
        *,
        max_new_tokens: int,
        warp: Warp,
        eos_ids: Sequence[int],
        pad_id: int,
        stop_found: Callable[[torch.Tensor], list[bool]] | None = None,
        stop_lookback: int = 0,
        check_every: int = 16,
    ) -> Decoded:
        """Sample up to `max_new_tokens` tokens for each left-padded row.

        Every `check_every` steps, `stop_found` (if given) gets the latest tokens on the CPU
        ([B, check_every + stop_lookback] at most) and returns which rows have hit a stop
        string; those rows end. The loop ends early once every row has ended (eos or stop).
        The model runs with the changes of `_decode_setup` in place.
        """
        with grouped_attention(self._model), self._adapters.swapped():
            device = input_ids_bp.device
            rows, prompt_length = input_ids_bp.shape
            batch = _round_up(rows, self._batch_bucket)
            if batch > rows:  # filler rows: copies of row 0, done from the start
                filler = batch - rows
                input_ids_bp = torch.cat([input_ids_bp, input_ids_bp[:1].expand(filler, -1)])
                attention_mask_bp = torch.cat(
                    [attention_mask_bp, attention_mask_bp[:1].expand(filler, -1)]
                )
            length = _round_up(prompt_length + max_new_tokens, CACHE_BUCKET)
            new_shape = self._cache_shape != (batch, length)
            self._ready_cache(batch, length)
            self.stats.calls += 1

            # 1 on the cache slots written so far: the prompt's real tokens now, then one slot per
            # step. (SDPA would also accept ones on the unwritten slots, since the causal mask
            # hides them; flash-attention paths take the mask's extent as the keys to read.)
            mask_bl = torch.zeros((batch, length), dtype=torch.long, device=device)
            mask_bl[:, :prompt_length] = attention_mask_bp
            prompt_positions = (attention_mask_bp.cumsum(-1) - 1).clamp(min=0)
            eos = torch.tensor(sorted(eos_ids), device=device)

            tokens_bt = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
            logprobs_bt = torch.zeros((batch, max_new_tokens), dtype=torch.float32, device=device)
            token, logprob = sample_next(
                self._forward(input_ids_bp, prompt_positions, mask_bl), warp
            )
            tokens_bt[:, 0], logprobs_bt[:, 0] = token, logprob
            done_b = torch.isin(token, eos)
            done_b[rows:] = True
            # The step's inputs: the latest token and its position. Kept in the same two buffers,
            # so the compiled step sees the same shapes, strides and addresses on every call.
            last_b1 = token[:, None].clone()
            position_b1 = attention_mask_bp.sum(-1, keepdim=True)

            steps = 1
            while steps < max_new_tokens:
                if steps % check_every == 0:
                    if stop_found is not None:
                        recent = tokens_bt[:, max(0, steps - check_every - stop_lookback) : steps]
                        hits = stop_found(recent.cpu())
                        done_b |= torch.tensor(hits, dtype=torch.bool, device=device)
                    if bool(done_b.all()):
                        break
                mask_bl[:, prompt_length + steps - 1] = 1  # the slot this step writes
                if self._compiled:
                    torch.compiler.cudagraph_mark_step_begin()
                started = time.perf_counter() if steps == 1 else None
                token, logprob = self._compiled_step(last_b1, position_b1, mask_bl, warp)
                if started is not None:  # a call's first step: compiled here if a guard failed
                    if token.is_cuda:
                        torch.cuda.synchronize(token.device)
                    self.stats.first_step(time.perf_counter() - started, new_shape)
                tokens_bt[:, steps] = torch.where(done_b, pad_id, token)
                logprobs_bt[:, steps] = torch.where(done_b, 0.0, logprob)
                done_b |= torch.isin(token, eos)
                last_b1.copy_(token[:, None])
                position_b1.add_(1)
                steps += 1
            return Decoded(
                tokens=tokens_bt[:rows, :steps].cpu(), logprobs=logprobs_bt[:rows, :steps].cpu()
            )
