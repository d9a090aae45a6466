"""`PolicyConfig.repetition_stop`: an answer that falls into an exact loop ends at the first
token where the rule holds, the same on both decoders, and the decoding stops early."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.policy import PolicyConfig
from cuda_agent.policy._repetition import loop_end, rows_looping


def _rule_holds(ids: list[int], length: int, window: int) -> bool:
    """The docstring's rule, written out: ids[:length]'s last `window` tokens repeat with a
    period of at most window // 4."""
    if length < window:
        return False
    return any(
        all(ids[j] == ids[j - p] for j in range(length - window + p, length))
        for p in range(1, window // 4 + 1)
    )


@settings(max_examples=300, deadline=None)
@given(
    window=st.integers(8, 24),
    head=st.lists(st.integers(0, 3), max_size=40),
    unit=st.lists(st.integers(0, 3), min_size=1, max_size=7),
    copies=st.integers(0, 12),
    tail=st.lists(st.integers(0, 3), max_size=10),
)
def test_loop_end_is_the_first_length_where_the_rule_holds(
    window: int, head: list[int], unit: list[int], copies: int, tail: list[int]
) -> None:
    ids = head + unit * copies + tail
    want = next((n for n in range(len(ids) + 1) if _rule_holds(ids, n, window)), None)
    assert loop_end(ids, window) == want
    rows = torch.tensor([ids]) if ids else torch.zeros((1, 0), dtype=torch.long)
    assert rows_looping(rows, window) == [_rule_holds(ids, len(ids), window)]


def test_loop_end_is_off_at_zero_and_a_window_below_eight_is_refused() -> None:
    assert loop_end([5] * 100, 0) is None
    assert loop_end([5] * 100, 8) == 8
    with pytest.raises(ValueError, match=r"repetition_stop must be 0 \(off\) or >= 8"):
        PolicyConfig(repetition_stop=7)


def _steps(policy: Any, prompts: list[list[int]], **kwargs: Any) -> tuple[list[Any], int]:
    """generate's samples and how many forwards the model ran (decoding steps, prefill too)."""
    calls = 0

    def count(*_: Any) -> None:
        nonlocal calls
        calls += 1

    embed = policy.model.get_input_embeddings()
    handle = embed.register_forward_hook(count)
    try:
        samples = [s for group in policy.generate(prompts, **kwargs) for s in group]
    finally:
        handle.remove()
    return samples, calls


@pytest.mark.parametrize("kv_cache", ["static", "dynamic"])
def test_a_looping_answer_ends_where_the_loop_is_found_and_decoding_stops_early(
    make_policy: Any, prompts: list[list[int]], kv_cache: str
) -> None:
    window, budget = 16, 160
    free = make_policy(kv_cache=kv_cache)
    stopped = make_policy(kv_cache=kv_cache, repetition_stop=window)
    want, _ = _steps(free, prompts, max_new_tokens=budget, temperature=0)
    got, _ = _steps(stopped, prompts, max_new_tokens=budget, temperature=0)
    cut = 0
    for a, b in zip(want, got, strict=True):
        end = loop_end(a.response_ids, window)
        if end is None:  # no loop: the same answer
            assert (b.response_ids, b.finish_reason, b.text) == (
                a.response_ids,
                a.finish_reason,
                a.text,
            )
            continue
        cut += 1
        assert b.finish_reason == "repetition"
        assert b.response_ids == a.response_ids[:end]
        assert b.sampler_logprobs == pytest.approx(a.sampler_logprobs[:end], abs=1e-6)
        assert b.text == stopped.tokenizer.decode(b.response_ids, skip_special_tokens=True)
    assert cut >= 1  # the tiny model's greedy answer to the third prompt loops

    # a batch of the looping row alone stops decoding soon after the loop (checked every 16
    # steps on the static loop, every step by generate), not at the budget
    looping = [p for p, a in zip(prompts, want, strict=True) if loop_end(a.response_ids, window)]
    (alone,), steps = _steps(stopped, looping[:1], max_new_tokens=budget, temperature=0)
    assert alone.finish_reason == "repetition"
    assert steps <= len(alone.response_ids) + 16 + 1 < budget
    _, free_steps = _steps(free, looping[:1], max_new_tokens=budget, temperature=0)
    assert free_steps >= budget - 1
