"""One `generate` batch on one process: the request, the seeded RNG, and the two decoders.

`Policy.generate` left-pads the rows of a call (prompts x n) into a `DecodeRequest` and hands it
to one of:
- `decode_static`: our own loop over a preallocated KV cache (`_decoding.py`), compiled into
  CUDA graphs on CUDA;
- `decode_with_generate`: transformers' `generate` with a dynamic cache, the sampler's
  log-probs recorded by a logits processor (`_sampling.py`).
Which one runs is chosen once per policy (`_strategies.py`). Both return ([rows, T_new] token
ids, [rows, T_new] sampler log-probs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

from cuda_agent.policy._decoding import StaticDecoder, Warp
from cuda_agent.policy._repetition import StopOnRepetition, rows_looping
from cuda_agent.policy._sampling import SamplerLogprobRecorder, StopOnStrings, sampling_processors


@dataclass(frozen=True)
class DecodeRequest:
    """One `generate` call's rows, left-padded on the policy's device, and its settings."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    max_new_tokens: int
    warp: Warp
    stop: Sequence[str]
    repetition_window: int = 0


def left_padded(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """([R, T] ids, [R, T] attention mask) of `rows` padded on the left to the longest one."""
    prompt_length = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), prompt_length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), prompt_length), dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, prompt_length - len(row) :] = torch.tensor(row)
        attention_mask[i, prompt_length - len(row) :] = 1
    return input_ids, attention_mask


@contextmanager
def fork_rng_seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Seed the RNGs that sampling on `device` uses, restoring the caller's RNG state afterwards."""
    cuda_devices = []
    if device.type == "cuda":
        cuda_devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=cuda_devices):
        torch.random.default_generator.manual_seed(seed)
        for index in cuda_devices:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        yield


def decode_static(
    loop: StaticDecoder,
    tokenizer: Any,
    request: DecodeRequest,
    *,
    eos_ids: frozenset[int],
    pad_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Our own decoding loop (`_decoding.py`), compiled into CUDA graphs on CUDA."""
    stop_found, lookback = _stop_check(tokenizer, request)
    decoded = loop.decode(
        request.input_ids,
        request.attention_mask,
        max_new_tokens=request.max_new_tokens,
        warp=request.warp,
        eos_ids=sorted(eos_ids),
        pad_id=pad_id,
        stop_found=stop_found,
        stop_lookback=lookback,
    )
    return decoded.tokens, decoded.logprobs


def _stop_check(
    tokenizer: Any, request: DecodeRequest
) -> tuple[Callable[[torch.Tensor], list[bool]] | None, int]:
    """The static loop's periodic check (which rows hit a stop string or fell into a loop) and
    the tokens it looks back over; (None, 0) when the request has neither."""
    stops = StopOnStrings(tokenizer, request.stop, 0) if request.stop else None
    window = request.repetition_window
    if stops is None and not window:
        return None, 0

    def found(tokens_bt: torch.Tensor) -> list[bool]:
        hits = stops.rows_with_stop(tokens_bt) if stops else [False] * len(tokens_bt)
        if window:
            hits = [a or b for a, b in zip(hits, rows_looping(tokens_bt, window), strict=True)]
        return hits

    return found, max(stops.window if stops else 0, window)


def decode_with_generate(
    hf_model: Any,
    tokenizer: Any,
    request: DecodeRequest,
    *,
    eos_ids: frozenset[int],
    pad_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' `generate` with a dynamic cache; the sampler's log-probs recorded."""
    input_ids, attention_mask, stop = request.input_ids, request.attention_mask, request.stop
    temperature, top_p, top_k = request.warp.temperature, request.warp.top_p, request.warp.top_k
    max_new_tokens, prompt_length = request.max_new_tokens, input_ids.shape[1]
    recorder = SamplerLogprobRecorder()
    processors = LogitsProcessorList([*sampling_processors(temperature, top_p, top_k), recorder])
    criteria = StoppingCriteriaList([StopOnStrings(tokenizer, stop, prompt_length)] if stop else [])
    if request.repetition_window:
        criteria.append(StopOnRepetition(request.repetition_window, prompt_length))
    # Warpers run as our own processors (before the recorder), so generate's are all off
    # (its global default top_k is 50). Greedy ignores them, so they are only set to sample.
    neutral_warpers = {"temperature": 1.0, "top_k": 0, "top_p": 1.0} if temperature > 0 else {}
    generation_config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=temperature > 0,
        num_beams=1,
        use_cache=True,
        **neutral_warpers,
        pad_token_id=pad_id,
        eos_token_id=sorted(eos_ids),
    )
    with _neutral_generation_defaults(hf_model):
        sequences = hf_model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            generation_config=generation_config,
            logits_processor=processors,
            stopping_criteria=criteria,
        )
    new_tokens = sequences[:, prompt_length:]
    return new_tokens.cpu(), recorder.finish(new_tokens).cpu()


@contextmanager
def _neutral_generation_defaults(hf_model: Any) -> Iterator[None]:
    """generate fills unset options from model.generation_config (a hub model may ship, say,
    repetition_penalty=1.05 or top_k=20), which would silently change the sampling
    distribution; swap in a neutral one for the call."""
    saved = hf_model.generation_config
    hf_model.generation_config = GenerationConfig()
    try:
        yield
    finally:
        hf_model.generation_config = saved
