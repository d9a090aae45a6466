"""The static-cache decoding loop: its sampler draws from the warped distribution, it decodes
what transformers' generate decodes, and it reuses its cache correctly between calls."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from cuda_agent.policy import Sample
from cuda_agent.policy._decoding import Warp, sample_next
from cuda_agent.policy._sampling import sampling_processors


def _flat(samples: list[list[Sample]]) -> list[Sample]:
    return [s for group in samples for s in group]


def _warped_probs(logits: torch.Tensor, warp: Warp) -> torch.Tensor:
    scores = logits.float()
    for processor in sampling_processors(warp.temperature, warp.top_p, warp.top_k):
        scores = processor(None, scores)
    return torch.softmax(scores, dim=-1)


@pytest.mark.parametrize(
    "warp",
    [Warp(), Warp(temperature=0.7), Warp(top_k=4), Warp(top_p=0.8), Warp(1.3, 0.9, 6)],
    ids=str,
)
def test_the_exponential_race_draws_from_the_warped_distribution(warp: Warp) -> None:
    torch.manual_seed(0)
    logits = torch.randn(12) * 2
    draws = 60_000
    want = _warped_probs(logits[None], warp)[0]
    tokens, logprobs = sample_next(logits.expand(draws, -1), warp)
    got = torch.bincount(tokens, minlength=12).double() / draws
    # Total variation of 60k draws over 12 outcomes: about 0.01 by chance; a sampler that
    # ignores the warp or draws argmax(logp) instead moves it by far more than 0.02.
    assert float((got - want.double()).abs().sum() / 2) < 0.02
    assert bool((want[tokens] > 0).all()), "drew a token the warpers masked out"
    torch.testing.assert_close(logprobs, want.log()[tokens])


def test_greedy_takes_the_argmax_and_reports_temperature_one_logprobs() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0], [2.0, -1.0, 0.5]])
    tokens, logprobs = sample_next(logits, Warp(temperature=0.0))
    assert tokens.tolist() == [1, 0]
    torch.testing.assert_close(
        logprobs, torch.log_softmax(logits, -1).gather(1, tokens[:, None])[:, 0]
    )


def test_static_greedy_decoding_equals_generate(make_policy: Any, prompts: list[list[int]]) -> None:
    static = make_policy(kv_cache="static").generate(prompts, n=2, max_new_tokens=20, temperature=0)
    dynamic = make_policy(kv_cache="dynamic").generate(
        prompts, n=2, max_new_tokens=20, temperature=0
    )
    for a, b in zip(_flat(static), _flat(dynamic), strict=True):
        assert a.response_ids == b.response_ids and a.finish_reason == b.finish_reason
        assert a.sampler_logprobs == pytest.approx(b.sampler_logprobs, abs=1e-4)


def test_the_cache_is_reused_and_reset_between_calls(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """Calls of one batch size whose lengths fall in one bucket share the cache; a stale
    entry from the previous call would change the next call's tokens."""
    policy = make_policy(kv_cache="static")
    fresh = make_policy(kv_cache="static")
    policy.generate(prompts[::-1], max_new_tokens=30, temperature=1.0, seed=1)
    cache = policy._decoder._cache
    again = policy.generate([p[:3] for p in prompts], max_new_tokens=9, temperature=0)
    assert policy._decoder._cache is cache
    want = fresh.generate([p[:3] for p in prompts], max_new_tokens=9, temperature=0)
    assert [s.response_ids for s in _flat(again)] == [s.response_ids for s in _flat(want)]
    policy.generate(prompts + prompts, max_new_tokens=4)  # another batch size: a new cache
    assert policy._decoder._cache is not cache
