"""Sampling helpers around `model.generate`: sampler log-probs, stop strings, Sample assembly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import (
    LogitsProcessor,
    StoppingCriteria,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from cuda_agent.policy._repetition import loop_end


@dataclass(frozen=True)
class Sample:
    """One sampled response.

    response_ids: generated tokens, including the final eos if one was produced, no padding.
        When a stop string ended the response, they end with the token that completed it.
    text: the response decoded without special tokens; with a stop string it ends right after
        the stop string (the last token may have carried a few characters more).
    finish_reason: "stop" (eos or stop string), "length" (max_new_tokens reached) or
        "repetition" (the answer fell into an exact loop: `PolicyConfig.repetition_stop`).
    sampler_logprobs: log-prob of each response token under the distribution it was drawn from,
        after temperature, top-k and top-p; for greedy decoding (temperature 0) the model's
        unmodified (temperature 1) log-probs.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    text: str
    finish_reason: str
    sampler_logprobs: list[float]


def sampling_processors(temperature: float, top_p: float, top_k: int) -> list[LogitsProcessor]:
    """The warpers, in transformers' own order; empty for greedy decoding."""
    if temperature == 0.0:
        return []
    processors: list[LogitsProcessor] = []
    if temperature != 1.0:
        processors.append(TemperatureLogitsWarper(temperature))
    if top_k > 0:
        processors.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        processors.append(TopPLogitsWarper(top_p))
    return processors


class SamplerLogprobRecorder(LogitsProcessor):
    """Must be the last processor: it sees exactly the scores that generate softmaxes and samples.

    It keeps log_softmax of the latest scores ([B, V], one step only, so memory stays O(B * V))
    and gathers the chosen token's entry on the next call, when that token is the last column of
    input_ids; `finish` gathers the final step from the returned sequences.
    """

    def __init__(self) -> None:
        self._pending_bv: torch.Tensor | None = None
        self._chosen: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._pending_bv is not None:
            self._chosen.append(self._pending_bv.gather(1, input_ids[:, -1:]).squeeze(1))
        self._pending_bv = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def __deepcopy__(self, memo: dict[int, Any]) -> SamplerLogprobRecorder:
        return self  # generate may deep-copy its processor lists; the record must stay shared

    def finish(self, new_tokens_bt: torch.Tensor) -> torch.Tensor:
        """[B, T] log-probs of the generated tokens."""
        steps = new_tokens_bt.shape[1]
        if len(self._chosen) < steps and self._pending_bv is not None:
            last = len(self._chosen)
            self._chosen.append(
                self._pending_bv.gather(1, new_tokens_bt[:, last : last + 1]).squeeze(1)
            )
        if not self._chosen:
            return new_tokens_bt.new_zeros(new_tokens_bt.shape, dtype=torch.float32)
        # Some decoding loops run one step past the stop and undo it: drop that extra entry.
        return torch.stack(self._chosen[:steps], dim=1)


class StopOnStrings(StoppingCriteria):
    """Marks a row finished once its generated text contains any stop string.

    Only a window of the latest tokens is decoded each step (an occurrence completed by the newest
    token spans at most len(stop) tokens, since a token decodes to at least one character); the
    exact cut is made afterwards by `truncate_at_stop`, so a miss here only costs extra tokens.
    """

    def __init__(self, tokenizer: Any, stops: Sequence[str], prompt_length: int) -> None:
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        self.prompt_length = prompt_length
        self.window = max(len(s) for s in self.stops) + 4

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        start = max(self.prompt_length, input_ids.shape[1] - self.window)
        done = self.rows_with_stop(input_ids[:, start:])
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]

    def rows_with_stop(self, tokens_bt: torch.Tensor) -> list[bool]:
        """Which rows of these (latest) tokens contain a stop string once decoded."""
        texts = self.tokenizer.batch_decode(tokens_bt.tolist(), skip_special_tokens=True)
        return [any(stop in text for stop in self.stops) for text in texts]

    def __deepcopy__(self, memo: dict[int, Any]) -> StopOnStrings:
        return self  # generate deep-copies stopping criteria; the tokenizer need not be copied


def _first_stop_end(text: str, stops: Sequence[str]) -> int | None:
    """End index of the stop-string occurrence that completes first, or None."""
    ends = [text.find(s) + len(s) for s in stops if s in text]
    return min(ends) if ends else None


def truncate_at_stop(
    tokenizer: Any, response_ids: list[int], stops: Sequence[str]
) -> tuple[int, str] | None:
    """(number of tokens to keep, text cut after the stop string), or None if no stop string.

    Keeps the shortest token prefix whose decoding contains a stop string (binary search: that
    property only grows with the prefix).
    """
    if not stops:
        return None
    full = tokenizer.decode(response_ids, skip_special_tokens=True)
    if _first_stop_end(full, stops) is None:
        return None
    lo, hi = 1, len(response_ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if (
            _first_stop_end(tokenizer.decode(response_ids[:mid], skip_special_tokens=True), stops)
            is None
        ):
            lo = mid + 1
        else:
            hi = mid
    text = tokenizer.decode(response_ids[:lo], skip_special_tokens=True)
    end = _first_stop_end(text, stops)
    assert end is not None
    return lo, text[:end]


def build_sample(
    tokenizer: Any,
    prompt_ids: list[int],
    generated_ids: list[int],
    generated_logprobs: list[float],
    eos_ids: frozenset[int],
    stops: Sequence[str],
    repetition_window: int = 0,
) -> Sample:
    """Cut one row of generate's output at its first eos (kept), stop string or loop
    (`_repetition.loop_end` with this window; 0: none), whichever ends it first."""
    length, finish_reason = len(generated_ids), "length"
    for i, token in enumerate(generated_ids):
        if token in eos_ids:
            length, finish_reason = i + 1, "stop"
            break
    looped = loop_end(generated_ids[:length], repetition_window)
    if looped is not None:
        length, finish_reason = looped, "repetition"
    response_ids = generated_ids[:length]
    cut = truncate_at_stop(tokenizer, response_ids, stops)
    if cut is not None:
        length, text = cut
        response_ids, finish_reason = response_ids[:length], "stop"
    else:
        text = tokenizer.decode(response_ids, skip_special_tokens=True)
    return Sample(
        prompt_ids=list(prompt_ids),
        response_ids=response_ids,
        text=text,
        finish_reason=finish_reason,
        sampler_logprobs=generated_logprobs[:length],
    )
