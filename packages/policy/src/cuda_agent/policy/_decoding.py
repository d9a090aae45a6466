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

**One compiled shape per run, as far as possible.** Compiling the step costs tens of seconds
on the GPU host (a 30-layer model is one unrolled graph), and a 135M model's whole 768-token
answer takes under a second once compiled, so a recompile is worth avoiding at almost any
price. Measured on the H200 (2026-12-01, the learning run): RL steps spent 253 s and 129 s
sampling, nearly all of it compiling, because every call with a new batch size, a new cache
length or another temperature compiled again. So, when compiled:
- the cache only grows: a call runs at the largest batch (in powers of two, 8 at least) and
  the longest cache length (in steps of `CACHE_BUCKET`) seen so far, its missing rows filled
  with copies of its first row that are done from the start. A run reaches its largest
  shape in its first calls; after that every call replays the same CUDA graph;
- the temperature is a tensor input, so greedy and sampled calls share one graph; top-p and
  top-k stay constants of the graph, and a greedy call reuses the previous call's (they do
  not change a greedy draw).
The price is arithmetic on filler rows and masked cache slots, which a small model's step,
bound by launch latency and weight reads, hardly notices.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import StaticCache

from cuda_agent.policy import _decode_setup as setup
from cuda_agent.policy._sampling import sampling_processors

CACHE_BUCKET = 256  # cache lengths are rounded up to a multiple of this
BATCH_BUCKET = 8  # when compiled, the fewest rows a batch runs as (module docstring)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _power_of_two_at_least(value: int, floor: int) -> int:
    rows = floor
    while rows < value:
        rows *= 2
    return rows


@dataclass(frozen=True)
class Warp:
    """Sampling settings. temperature 0 means greedy; top_k 0 and top_p 1 mean off."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0


def sample_next(logits_bv: torch.Tensor, warp: Warp) -> tuple[torch.Tensor, torch.Tensor]:
    """([B] next tokens, [B] their sampler log-probs) from [B, V] logits (formula above)."""
    temperature = torch.tensor(warp.temperature, device=logits_bv.device)
    return draw(logits_bv, temperature, warp.top_p, warp.top_k)


def draw(
    logits_bv: torch.Tensor, temperature: torch.Tensor, top_p: float, top_k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """`sample_next` with the temperature as a 0-d tensor, so that one compiled graph serves
    greedy (temperature 0: argmax of the unwarped log-probs) and sampled calls alike. Both
    branches are computed and `where` picks one; the unpicked one never reaches the result."""
    scores = logits_bv.float()
    plain = torch.log_softmax(scores, dim=-1)
    sampled = temperature > 0
    warped = scores / torch.where(sampled, temperature, torch.ones_like(temperature))
    for processor in sampling_processors(1.0, top_p, top_k):  # top-k, then top-p
        warped = processor(None, warped)  # the warpers do not read the ids
    logp = torch.log_softmax(warped, dim=-1)
    race = -torch.log(-torch.log(torch.rand_like(logp)))
    token = torch.where(sampled, (logp + race).argmax(dim=-1), plain.argmax(dim=-1))
    pick = token[:, None]
    chosen = torch.where(sampled, logp.gather(-1, pick), plain.gather(-1, pick))
    return token, chosen.squeeze(-1)


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
    dropped_rows: int = 0  # rows that left a lean call's batch before it ended

    def first_step(self, seconds: float, new_shape: bool) -> None:
        self.first_step_seconds += seconds
        if new_shape:
            self.new_shapes += 1
            self.new_shape_seconds += seconds


class StaticDecoder:
    """Samples from a transformers causal LM with a preallocated KV cache.

    The cache and the compiled step are kept between calls. Compiled (`compile=True`, on
    CUDA) the cache only grows (module docstring): a call runs at the largest bucketed batch
    and cache length seen so far, so a run compiles for a few shapes in its first calls and
    then replays one graph. Uncompiled (the CPU), where filler rows would cost real
    arithmetic, a call runs at its own batch (rounded up to `batch_bucket`, 1 unless given)
    and cache length, and a new shape allocates a new cache. `grow_only` overrides the choice.

    Uncompiled, `lean` (on by default) also saves what a step would spend on nothing:
    - the adapters are folded into copies of the weights for the call
      (`_decode_setup.MergedAdapters`; `fold`, on by default: the copies of SmolLM2-135M's
      adapted weights are 0.4 GB while a call runs);
    - a row that has ended leaves the batch, with its cache rows, at the next check;
    - attention reads the cache slots written so far, not the whole preallocated length
      (where the model's attention is SDPA, which `grouped_decode_attention` replaces);
    - a step's projections of a few rows run as ``(W x^T)^T`` (`_decode_setup.NarrowProducts`;
      `narrow`, on by default).
    Measured on 2 CPU cores by `benchmarks/policy/cpu_decoding.py`.
    """

    def __init__(
        self,
        hf_model: Any,
        *,
        compile: bool,
        batch_bucket: int | None = None,
        grow_only: bool | None = None,
    ) -> None:
        self._model = hf_model
        self._batch_bucket = batch_bucket or (BATCH_BUCKET if compile else 1)
        self._grow_only = compile if grow_only is None else grow_only
        self._cache: Any = None
        self._cache_shape: tuple[int, int] | None = None
        # transformers 5.24 renamed the forward's `past_key_values` to `cache`.
        params = inspect.signature(hf_model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        self._compiled = compile
        self._adapters = setup.AdapterCast(hf_model)
        # Uncompiled (the CPU), four economies no graph would allow (class docstring); True
        # by default there, and a benchmark may turn them off to compare.
        self.lean = not self._grow_only
        self.fold = True  # lean: fold the adapters (costs a copy of the adapted weights)
        self.narrow = True  # lean: a few rows' projections as (W x^T)^T
        self._merged = setup.MergedAdapters(hf_model)
        self._narrow = setup.NarrowProducts(hf_model)
        self._additive_mask = False  # set per call (decode)
        # The graph's constants: top-p and top-k of the last sampled call (a greedy call keeps
        # them, since they do not change a greedy draw and another value would recompile).
        self._filters: tuple[float, int] = (1.0, 0)
        # What new shapes cost (`stats`): each one allocates a cache and, on CUDA, compiles and
        # records the step again; its first step's wall time is mostly that. Every call's first
        # step is timed too: a recompile for another reason (a new top-p) shows there.
        self.stats = DecodeStats()
        step = self._step
        if compile:
            step = torch.compile(step, mode="reduce-overhead", fullgraph=False)
        self._compiled_step: Callable[..., tuple[torch.Tensor, torch.Tensor]] = step

    def release(self) -> None:
        """Free the cache unless a graph keeps it (`grow_only`); the next call allocates one."""
        if not self._grow_only:
            self._cache = self._cache_shape = None

    def _step(
        self,
        tokens_b1: torch.Tensor,
        positions_b1: torch.Tensor,
        mask_bl: torch.Tensor,
        temperature: torch.Tensor,
        top_p: float,
        top_k: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # One query token sees exactly the slots written so far, so the 2D mask is the whole
        # mask. Passed as 4D, transformers uses it as it is: building it from the 2D one would
        # read the cache's length as a Python int, a constant of the graph, and a longer cache
        # would compile again.
        mask = mask_bl[:, None, None, :].bool()
        if self._additive_mask:  # eager attention adds its mask to the scores
            dtype = self._model.dtype
            mask = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
                ~mask, torch.finfo(dtype).min
            )
        logits = self._forward(tokens_b1, positions_b1, mask)
        return draw(logits, temperature, top_p, top_k)

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

    def _mark_dynamic(self, *inputs: torch.Tensor) -> None:
        """Compile for any batch and cache length from the first call: a shape the graph was
        specialised to would compile again (a minute or more) when the cache grows; a
        dynamic graph is only recorded again for the new size (a tenth of a second)."""
        for tensor in inputs:
            for dim in range(tensor.dim()):
                if tensor.shape[dim] > 1:  # the batch, and the mask's length
                    torch._dynamo.maybe_mark_dynamic(tensor, dim)
        for layer in getattr(self._cache, "layers", ()):
            for kv in (getattr(layer, "keys", None), getattr(layer, "values", None)):
                if isinstance(kv, torch.Tensor):
                    torch._dynamo.maybe_mark_dynamic(kv, 0)  # batch
                    torch._dynamo.maybe_mark_dynamic(kv, 2)  # cache length

    def _shape_for(self, rows: int, needed_length: int) -> tuple[int, int]:
        """The (batch, cache length) a call of `rows` rows needing `needed_length` slots runs as."""
        length = _round_up(needed_length, CACHE_BUCKET)
        if not self._grow_only:
            return _round_up(rows, self._batch_bucket), length
        batch = _power_of_two_at_least(rows, self._batch_bucket)
        if self._cache_shape is not None:
            batch = max(batch, self._cache_shape[0])
            length = max(length, self._cache_shape[1])
        return batch, length

    def _ready_cache(self, batch: int, length: int) -> bool:
        """Reset the cache, or allocate one of the new shape; True when it is new."""
        if self._cache_shape == (batch, length):
            self._cache.reset()
            return False
        self._cache = None  # free the old one first
        self._cache = StaticCache(config=self._model.config, max_cache_len=length)
        self._cache_shape = (batch, length)
        return True

    def _can_drop_rows(self) -> bool:
        """Whether the cache is one whose rows `_keep_rows` can select (transformers'
        `StaticCache`: per layer, keys and values of [batch, heads, length, dim])."""
        layers = getattr(self._cache, "layers", None) or []
        return bool(layers) and all(
            isinstance(getattr(layer, "keys", None), torch.Tensor)
            and isinstance(getattr(layer, "values", None), torch.Tensor)
            for layer in layers
        )

    def _keep_rows(self, keep: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Keep only the cache rows `keep` (ascending; a row that has ended would cost a full
        step's arithmetic otherwise), moved to the front of the same memory: each layer then
        reads the first `len(keep)` rows, a contiguous view, and no second cache is
        allocated. Returns the layers' tensors as they were, for `_put_back`."""
        before = []
        rows = len(keep)
        for layer in self._cache.layers:
            before.append((layer.keys, layer.values))
            for name in ("keys", "values"):
                kv = getattr(layer, name)
                kv[:rows] = kv.index_select(0, keep)  # (selected first, then written)
                setattr(layer, name, kv[:rows])
        self.stats.dropped_rows += len(before[0][0]) - rows if before else 0
        return before

    def _put_back(self, full: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """The cache's allocated tensors back in place (the next call of its shape reuses
        them; `reset` clears them)."""
        for layer, (keys, values) in zip(self._cache.layers, full, strict=True):
            layer.keys, layer.values = keys, values

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
        lean = self.lean and not self._compiled
        null = contextlib.nullcontext()
        fold = self._merged.merged() if lean and self.fold else null
        few = self._narrow.swapped() if lean and self.narrow else null
        with setup.grouped_attention(self._model) as grouped, self._adapters.swapped(), fold, few:
            # SDPA (and the grouped attention) take a boolean mask; eager attention adds the
            # mask to the scores, where True and False would count as 1 and 0
            impl = getattr(self._model.config, "_attn_implementation", None)
            self._additive_mask = impl == "eager"
            device = input_ids_bp.device
            rows, prompt_length = input_ids_bp.shape
            batch, length = self._shape_for(rows, prompt_length + max_new_tokens)
            if batch > rows:  # filler rows: copies of row 0, done from the start
                filler = batch - rows
                input_ids_bp = torch.cat([input_ids_bp, input_ids_bp[:1].expand(filler, -1)])
                attention_mask_bp = torch.cat(
                    [attention_mask_bp, attention_mask_bp[:1].expand(filler, -1)]
                )
            new_shape = self._ready_cache(batch, length)
            self.stats.calls += 1
            if warp.temperature > 0:
                self._filters = (warp.top_p, warp.top_k)
            top_p, top_k = self._filters
            temperature = torch.tensor(float(warp.temperature), device=device)

            # 1 on the cache slots written so far: the prompt's real tokens now, then one slot per
            # step. (SDPA would also accept ones on the unwritten slots, since the causal mask
            # hides them; flash-attention paths take the mask's extent as the keys to read.)
            mask_bl = torch.zeros((batch, length), dtype=torch.long, device=device)
            mask_bl[:, :prompt_length] = attention_mask_bp
            prompt_positions = (attention_mask_bp.cumsum(-1) - 1).clamp(min=0)
            eos = torch.tensor(sorted(eos_ids), device=device)

            tokens_bt = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
            logprobs_bt = torch.zeros((batch, max_new_tokens), dtype=torch.float32, device=device)
            token, logprob = draw(
                self._forward(input_ids_bp, prompt_positions, mask_bl), temperature, top_p, top_k
            )
            tokens_bt[:, 0], logprobs_bt[:, 0] = token, logprob
            done_b = torch.isin(token, eos)
            done_b[rows:] = True
            # The step's inputs: the latest token and its position. Kept in the same two buffers,
            # so the compiled step sees the same shapes, strides and addresses on every call.
            last_b1 = token[:, None].clone()
            position_b1 = attention_mask_bp.sum(-1, keepdim=True)

            # the rows of tokens_bt still decoding (lean: ended rows leave the batch; all rows,
            # a plain slice, until one has), and the cache's allocated tensors once they have
            live: torch.Tensor | slice = slice(None)
            full: list[tuple[torch.Tensor, torch.Tensor]] = []
            steps = 1
            try:
                while steps < max_new_tokens:
                    if steps % check_every == 0:
                        if stop_found is not None:
                            recent = tokens_bt[
                                live, max(0, steps - check_every - stop_lookback) : steps
                            ]
                            hits = stop_found(recent.cpu())
                            done_b |= torch.tensor(hits, dtype=torch.bool, device=device)
                        if bool(done_b.all()):
                            break
                        if lean and bool(done_b.any()) and self._can_drop_rows():
                            keep = (~done_b).nonzero().squeeze(-1)
                            dropped = self._keep_rows(keep)
                            full = full or dropped  # (the allocated tensors: the first drop's)
                            live = torch.arange(batch, device=device)[live][keep]
                            mask_bl, done_b = mask_bl[keep], done_b[keep]
                            last_b1, position_b1 = last_b1[keep], position_b1[keep]
                    mask_bl[:, prompt_length + steps - 1] = 1  # the slot this step writes
                    if self._compiled:
                        if steps == 1:
                            self._mark_dynamic(last_b1, position_b1, mask_bl)
                        torch.compiler.cudagraph_mark_step_begin()
                    started = time.perf_counter() if steps == 1 else None
                    # lean: the mask covers the slots written so far, and attention reads only
                    # those (`_decode_setup.grouped_decode_attention`; other attention
                    # functions read the whole cache, and need the whole mask)
                    short = lean and grouped
                    written = mask_bl[:, : prompt_length + steps] if short else mask_bl
                    token, logprob = self._compiled_step(
                        last_b1, position_b1, written, temperature, top_p, top_k
                    )
                    if started is not None:  # a call's first step: compiled here if a guard failed
                        if token.is_cuda:
                            torch.cuda.synchronize(token.device)
                        self.stats.first_step(time.perf_counter() - started, new_shape)
                    tokens_bt[live, steps] = torch.where(done_b, pad_id, token)
                    logprobs_bt[live, steps] = torch.where(done_b, 0.0, logprob)
                    done_b |= torch.isin(token, eos)
                    last_b1.copy_(token[:, None])
                    position_b1.add_(1)
                    steps += 1
            finally:  # (an error mid-call must not leave the cache shrunk)
                if full:
                    self._put_back(full)
            return Decoded(
                tokens=tokens_bt[:rows, :steps].cpu(), logprobs=logprobs_bt[:rows, :steps].cpu()
            )
