"""Ending an answer that has fallen into an exact loop (`PolicyConfig.repetition_stop`).

Small models, greedy ones above all, often fall into a cycle (the same phrase or line over and
over) and stay in it until the answer budget runs out; every row of the batch then waits for
them. The rule, with a window of ``W`` tokens: an answer ends after its first ``L`` tokens when
``L`` is the smallest length whose last ``W`` tokens repeat with a period ``p <= W // 4`` (at
least four whole copies), i.e.

    ids[j] == ids[j - p]  for every j in [L - W + p, L).

The cut is made by this rule alone (`loop_end`), like a stop string's: the decoding loops look
for it every few steps (`rows_looping`) only to stop early, so where they look does not change
the answer. The answer keeps its first ``L`` tokens and its `finish_reason` is
``"repetition"``; a correct program holds no such run in practice (four copies of one stretch,
``W`` tokens in all: none of cuda-agent's shipped solutions does, `tests/test_repetition_stop.py`
at the repository's root).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import StoppingCriteria

MIN_WINDOW = 8
"""The shortest window accepted: four copies of a period of 1 or 2 tokens."""


def check_window(window: int) -> int:
    """``window`` itself if it is 0 (off) or at least `MIN_WINDOW`; else a ValueError."""
    if window != 0 and window < MIN_WINDOW:
        raise ValueError(f"repetition_stop must be 0 (off) or >= {MIN_WINDOW}, got {window}")
    return window


def loop_end(ids: Sequence[int], window: int) -> int | None:
    """The smallest ``L`` whose last ``window`` tokens of ``ids[:L]`` repeat with a period of at
    most ``window // 4``, or None (also when ``window`` is 0)."""
    if window <= 0 or len(ids) < window:
        return None
    t = torch.tensor(list(ids), dtype=torch.long)
    best: int | None = None
    for p in range(1, window // 4 + 1):
        same = (t[p:] == t[:-p]).to(torch.int32)  # same[k]: ids[k + p] == ids[k]
        need = window - p  # that many matches in a row, the last at same[L - p - 1]
        if len(same) < need:
            continue
        runs = torch.cat([same.new_zeros(1), torch.cumsum(same, 0)])  # runs[k]: sum same[:k]
        matches = runs[need:] - runs[:-need]  # matches[i]: sum same[i : i + need]
        hit = (matches == need).nonzero()
        if len(hit):
            end = int(hit[0]) + need + p  # the run same[i : i + need] ends ids[: i + need + p]
            best = end if best is None else min(best, end)
    return best


def rows_looping(tokens_bt: torch.Tensor, window: int) -> list[bool]:
    """Which rows' latest ``window`` tokens repeat with a period of at most ``window // 4``
    (the rule at the newest token; a row shorter than ``window`` is not looping)."""
    rows, length = tokens_bt.shape
    if window <= 0 or length < window:
        return [False] * rows
    tail = tokens_bt[:, -window:]
    looping = torch.zeros(rows, dtype=torch.bool, device=tail.device)
    for p in range(1, window // 4 + 1):
        looping |= (tail[:, p:] == tail[:, :-p]).all(dim=1)
    return [bool(x) for x in looping.tolist()]  # (one copy to the host)


class StopOnRepetition(StoppingCriteria):
    """`rows_looping` as transformers' stopping criterion, over the generated tokens only."""

    def __init__(self, window: int, prompt_length: int) -> None:
        self.window = window
        self.prompt_length = prompt_length

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        looping = rows_looping(input_ids[:, self.prompt_length :], self.window)
        return torch.tensor(looping, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]

    def __deepcopy__(self, memo: dict[int, Any]) -> StopOnRepetition:
        return self
