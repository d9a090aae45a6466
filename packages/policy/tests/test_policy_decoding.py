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


def test_uncompiled_sampling_folds_the_adapters_and_puts_the_weights_back(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """On the CPU the adapters are folded into copies of the weights while sampling
    (`MergedAdapters`): the answers are the unfolded model's (transformers' generate runs the
    adapters as they are), and afterwards every weight is the same tensor with the same values
    and no layer counts as merged (a merge and unmerge in place would leave rounding)."""
    from peft.tuners.lora import LoraLayer

    static, dynamic, plain = (make_policy(kv_cache=k) for k in ("static", "dynamic", "static"))
    generator = torch.Generator().manual_seed(0)
    for (name, a), (_, b) in zip(
        static.model.named_parameters(), dynamic.model.named_parameters(), strict=True
    ):
        if "lora_B" in name:  # (zero at initialisation: the adapters would change nothing)
            a.data.copy_(torch.randn(a.shape, generator=generator))
            b.data.copy_(a.data)
    before = {n: (p, p.detach().clone()) for n, p in static.model.named_parameters()}
    got = _flat(static.generate(prompts, n=2, max_new_tokens=20, temperature=0))
    want = _flat(dynamic.generate(prompts, n=2, max_new_tokens=20, temperature=0))
    without = _flat(plain.generate(prompts, n=2, max_new_tokens=20, temperature=0))
    assert [s.response_ids for s in got] != [s.response_ids for s in without], "no adapter effect"
    for a, b in zip(got, want, strict=True):
        assert a.response_ids == b.response_ids and a.finish_reason == b.finish_reason
        assert a.sampler_logprobs == pytest.approx(b.sampler_logprobs, abs=1e-4)
    after = dict(static.model.named_parameters())
    for name, (param, value) in before.items():
        assert after[name] is param and torch.equal(param, value), name
    layers = [m for m in static.model.modules() if isinstance(m, LoraLayer)]
    assert layers and not any(m.merged for m in layers)


def test_rows_that_end_leave_the_batch_and_the_others_decode_on(
    make_model: Any, tiny_tokenizer: Any
) -> None:
    """Uncompiled, a row that has ended (eos) leaves the batch at the next check (every 16
    steps) with its cache rows: the others decode as before, and as transformers' generate
    decodes them; the next call reuses the cache as allocated."""
    from cuda_agent.policy import Policy, PolicyConfig

    texts = ["Write a CUDA kernel.", "hi", "Add two vectors of floats, fast please!", "row max",
             "x", "softmax over rows"]  # fmt: skip
    prompts = [tiny_tokenizer(t)["input_ids"] for t in texts]

    def policy(kv_cache: str) -> Policy:
        model = make_model()
        # a token this seeded model's greedy rows reach at steps 18 to 78, or never
        model.generation_config.eos_token_id = [tiny_tokenizer.eos_token_id, 156]
        return Policy.from_model(
            model, tiny_tokenizer, PolicyConfig(device="cpu", lora_rank=4, kv_cache=kv_cache)
        ).eval()

    static = policy("static")
    got = _flat(static.generate(prompts, max_new_tokens=80, temperature=0))
    lengths = sorted(len(s.response_ids) for s in got)
    assert lengths[0] + 32 < lengths[-2] < lengths[-1] == 80, lengths  # ended checks apart
    # rows ending by steps 18 and 22 leave at the check of step 32, by 53 and 56 at step 64
    assert static.decode_stats()["dropped_rows"] == 4
    want = _flat(policy("dynamic").generate(prompts, max_new_tokens=80, temperature=0))
    for a, b in zip(got, want, strict=True):
        assert a.response_ids == b.response_ids and a.finish_reason == b.finish_reason
        assert a.sampler_logprobs == pytest.approx(b.sampler_logprobs, abs=1e-4)
    cache = static._decoder._cache if static._decoder is not None else None
    again = _flat(static.generate(prompts, max_new_tokens=80, temperature=0))
    assert [s.response_ids for s in again] == [s.response_ids for s in got]
    assert static._decoder is not None and static._decoder._cache is cache


def test_lean_decoding_of_a_model_with_eager_attention_equals_generate(
    make_model: Any, make_policy: Any, prompts: list[list[int]]
) -> None:
    """Only SDPA attention is swapped for the grouped one that reads the written slots; a
    model on eager attention gets the whole mask (a short one failed there), additive (a
    boolean one was added to the scores as 1 and 0: other tokens than `generate`'s)."""
    policies = []
    for kv_cache in ("static", "dynamic"):
        model = make_model()
        model.set_attn_implementation("eager")
        policies.append(make_policy(model, kv_cache=kv_cache))
    got, want = (
        _flat(p.generate(prompts, n=2, max_new_tokens=40, temperature=0)) for p in policies
    )
    assert [s.response_ids for s in got] == [s.response_ids for s in want]


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


def test_training_mode_frees_an_uncompiled_decoders_cache(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """`Policy.train()` frees the CPU decoder's KV cache (nothing holds its tensors after),
    and the next sampling call allocates one and decodes as before; a grow-only decoder (as
    compiled on CUDA, where graphs hold the cache) keeps it."""
    import gc
    import weakref

    from cuda_agent.policy._decoding import StaticDecoder

    policy = make_policy(kv_cache="static")
    first = policy.generate(prompts, max_new_tokens=12, temperature=0)
    keys = weakref.ref(policy._decoder._cache.layers[0].keys)
    policy.train()
    gc.collect()
    assert keys() is None
    again = policy.eval().generate(prompts, max_new_tokens=12, temperature=0)
    assert [s.response_ids for s in _flat(again)] == [s.response_ids for s in _flat(first)]
    kept = make_policy(kv_cache="static")
    kept._decoder = StaticDecoder(kept._hf_model, compile=False, grow_only=True)
    kept.generate(prompts, max_new_tokens=12, temperature=0)
    cache = kept._decoder._cache
    kept.train()
    assert cache is not None and kept._decoder._cache is cache


def test_grouped_decode_attention_equals_sdpa_with_repeated_heads() -> None:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from cuda_agent.policy._decode_setup import grouped_decode_attention

    module = torch.nn.Module()
    module.num_key_value_groups = 3  # type: ignore[assignment]
    module.eval()
    torch.manual_seed(0)
    query = torch.randn(5, 6, 1, 8)  # 6 query heads over 2 key/value heads
    key, value = torch.randn(5, 2, 11, 8), torch.randn(5, 2, 11, 8)
    mask = torch.rand(5, 1, 1, 11) > 0.3
    mask[:, :, :, 0] = True
    got, _ = grouped_decode_attention(module, query, key, value, mask, scaling=0.3)
    want, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.3)
    assert got.shape == want.shape == (5, 1, 6, 8)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(3, 1, 24), (64, 24), (2, 40, 24), (1, 24), (0, 24)], ids=str)
def test_a_narrow_product_is_the_linear_layers_own_up_to_rounding(
    shape: tuple[int, ...], bias: bool
) -> None:
    """`narrow_linear` takes a few rows' product the other way round, ``(W x^T)^T``: the
    values of ``F.linear`` up to float summation order, the same shape, contiguous (a
    transposed result sent SDPA to its slow path); for one row, or more than ``NARROW_ROWS``,
    it is ``F.linear`` itself."""
    from cuda_agent.policy._decode_setup import NARROW_ROWS, narrow_linear

    torch.manual_seed(0)
    layer = torch.nn.Linear(24, 40, bias=bias)
    x = torch.randn(shape)
    got, want = narrow_linear(layer, x), layer(x)
    assert got.shape == want.shape and got.is_contiguous()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    if not 2 <= x.numel() // 24 <= NARROW_ROWS:
        assert torch.equal(got, want)


def test_narrow_products_are_swapped_in_for_a_call_and_out_after_it_even_on_error(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """While it samples on the CPU, every plain ``nn.Linear`` runs as `narrow_linear`; after
    the call, and after a call that failed midway, each runs its class's ``forward`` again
    (no attribute of ours is left on a layer)."""
    policy = make_policy(kv_cache="static")
    linears = [m for m in policy.model.modules() if type(m) is torch.nn.Linear]
    assert linears
    seen: list[bool] = []
    hook = linears[0].register_forward_pre_hook(
        lambda module, args: seen.append("forward" in module.__dict__)
    )
    policy.generate(prompts, max_new_tokens=4, temperature=0)
    assert seen and all(seen), "the call's projections were not the narrow ones"
    assert not any("forward" in m.__dict__ for m in linears)

    def fail(module: Any, args: Any) -> None:
        raise RuntimeError("a step failed")

    hook.remove()
    failing = linears[-1].register_forward_pre_hook(fail)
    with pytest.raises(RuntimeError, match="a step failed"):
        policy.generate(prompts, max_new_tokens=4, temperature=0)
    failing.remove()
    assert not any("forward" in m.__dict__ for m in linears)

    # a layer whose forward was replaced before (as accelerate's hooks do) keeps it
    def own(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, linears[0].weight, linears[0].bias)

    linears[0].forward = own  # type: ignore[method-assign]
    policy.generate(prompts, max_new_tokens=4, temperature=0)
    assert linears[0].__dict__["forward"] is own


def test_sampling_in_bf16_leaves_the_float32_adapter_untouched(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy(kv_cache="static", dtype="bf16")
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters() if "lora_" in n}
    assert before and all(p.dtype == torch.float32 for p in before.values())
    samples = _flat(policy.generate(prompts, n=2, max_new_tokens=10, seed=0))
    after = dict(policy.model.named_parameters())
    for name, value in before.items():
        assert after[name].dtype == torch.float32 and torch.equal(after[name], value)
    assert policy._hf_model.config._attn_implementation == "sdpa"
    # The sampler ran a bf16 adapter; the scorer runs the float32 one: close, not equal.
    scored = policy.token_logprobs(
        [s.prompt_ids for s in samples], [s.response_ids for s in samples]
    )
    for i, sample in enumerate(samples):
        want = scored.logprobs[i, : len(sample.response_ids)]
        torch.testing.assert_close(torch.tensor(sample.sampler_logprobs), want, atol=0.3, rtol=0)


def test_batches_padded_to_a_bucket_decode_the_same_and_share_a_cache(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """As compiled on CUDA: 3 and then 5 rows both run as 8 (filler rows), with one cache."""
    from cuda_agent.policy._decoding import StaticDecoder

    bucketed = make_policy(kv_cache="static")
    bucketed._decoder = StaticDecoder(bucketed._hf_model, compile=False, batch_bucket=8)
    plain = make_policy(kv_cache="static")
    for n in (1, 2):  # 3 rows, then 6
        got = bucketed.generate(prompts, n=n, max_new_tokens=12, temperature=0)
        want = plain.generate(prompts, n=n, max_new_tokens=12, temperature=0)
        assert [s.response_ids for s in _flat(got)] == [s.response_ids for s in _flat(want)]
        for a, b in zip(_flat(got), _flat(want), strict=True):
            assert a.sampler_logprobs == pytest.approx(b.sampler_logprobs, abs=1e-5)
        assert bucketed._decoder._cache_shape == (8, 256)
    # What the run's step records report (decode_*): one shape for the bucketed decoder, two
    # for the plain one (3 rows, then 6), and every call's first step timed.
    stats = bucketed.decode_stats()
    assert (stats["calls"], stats["new_shapes"]) == (2, 1)
    assert plain.decode_stats()["new_shapes"] == 2
    assert stats["first_step_seconds"] >= stats["new_shape_seconds"] > 0


def test_the_mask_covers_only_the_cache_slots_written_so_far(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """transformers' flash-attention paths read as many keys as the 2D mask spans, so at each
    step the mask must end at the slot being written (SDPA alone would not notice)."""
    policy = make_policy(kv_cache="static")
    seen: list[tuple[list[int], int]] = []

    def record(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        mask = kwargs["attention_mask"]
        if mask.dim() == 4:  # a step's: [B, 1, 1, L], one query token
            mask = mask.reshape(mask.shape[0], -1).long()
        seen.append((mask.sum(-1).tolist(), int(mask.nonzero()[:, 1].max()) + 1))

    policy._hf_model.register_forward_pre_hook(record, with_kwargs=True)
    policy.generate(prompts, max_new_tokens=5, temperature=0)
    longest = max(len(p) for p in prompts)
    assert len(seen) == 5  # the prefill, then one call per step
    for step, (ones, extent) in enumerate(seen):
        assert ones == [len(p) + step for p in prompts]
        assert extent == longest + step


def test_a_grow_only_cache_decodes_every_call_as_its_own_shape_would(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """As compiled on CUDA: the cache grows to the largest batch and length seen and smaller
    calls run inside it (filler rows, masked slots), decoding what they decode alone. Greedy,
    so the tokens must agree; a sampled call's draws depend on the batch it runs as (the
    random numbers are drawn for every row), so it only has to grow the cache."""
    from cuda_agent.policy._decoding import StaticDecoder

    grown = make_policy(kv_cache="static")
    grown._decoder = StaticDecoder(grown._hf_model, compile=False, grow_only=True)
    plain = make_policy(kv_cache="static")
    shapes = []
    for rows, n, new, temperature in [
        (prompts, 3, 12, 1.0),  # 9 rows: batch 16
        (prompts[:1], 1, 12, 0.0),  # 1 row: still 16
        (prompts, 1, 300, 1.0),  # needs 300+ slots: the length grows to 512
        ([p * 6 for p in prompts[:2]], 2, 8, 0.0),  # 4 longer rows: still (16, 512)
        (prompts, 2, 40, 0.0),
    ]:
        kw = dict(n=n, max_new_tokens=new, temperature=temperature, seed=1)
        got = grown.generate(rows, **kw)
        shapes.append(grown._decoder._cache_shape)
        if temperature > 0:
            continue
        want = plain.generate(rows, **kw)
        assert [s.response_ids for s in _flat(got)] == [s.response_ids for s in _flat(want)]
        for a, b in zip(_flat(got), _flat(want), strict=True):
            assert a.sampler_logprobs == pytest.approx(b.sampler_logprobs, abs=1e-5)
    assert shapes == [(16, 256), (16, 256), (16, 512), (16, 512), (16, 512)]
    assert grown.decode_stats()["new_shapes"] == 2


@pytest.mark.slow
def test_compiled_decoding_compiles_once_for_greedy_and_sampled_calls_of_any_shape(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """What keeps a run's sampling from compiling again and again (the H200 run of 2026-12-01
    spent most of its RL steps compiling): after the first call, greedy and sampled calls
    with fewer rows or more, shorter prompts or longer, reuse the compiled step."""
    from torch._dynamo.utils import counters

    from cuda_agent.policy._decoding import StaticDecoder

    torch._dynamo.reset()
    policy = make_policy(kv_cache="static")
    policy._decoder = StaticDecoder(policy._hf_model, compile=True)
    policy.generate(prompts, n=4, max_new_tokens=40, temperature=1.0, top_p=0.9, seed=0)
    compiled = counters["stats"]["unique_graphs"]
    assert compiled > 0
    for rows, n, new, temperature in [
        (prompts, 1, 20, 0.0),  # greedy
        (prompts[:2], 3, 40, 1.0),
        (prompts[1:], 1, 8, 0.0),
        (prompts, 2, 30, 0.7),  # another temperature
        (prompts, 6, 300, 1.0),  # more rows, a longer cache: it grows, the graph stays
        ([p * 4 for p in prompts], 1, 12, 0.0),
    ]:
        policy.generate(rows, n=n, max_new_tokens=new, temperature=temperature, top_p=0.9)
    assert counters["stats"]["unique_graphs"] == compiled
    assert policy._decoder._cache_shape == (32, 512)
    assert policy.decode_stats()["new_shapes"] == 2


@pytest.mark.slow
def test_a_critic_on_the_policy_backbone_does_not_make_decoding_compile_again(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """The critic's forward switches peft's active adapter and back; its first switch used to
    replace an attribute the compiled step is guarded on (a recompile of 21.7 s on the H200)."""
    from torch._dynamo.utils import counters

    from cuda_agent.policy import PolicyOptimizer, ValueModel
    from cuda_agent.policy._decoding import StaticDecoder

    torch._dynamo.reset()
    policy = make_policy(kv_cache="static")
    policy._decoder = StaticDecoder(policy._hf_model, compile=True)
    critic = ValueModel.from_policy(policy)
    samples = _flat(policy.generate(prompts, n=2, max_new_tokens=8, seed=0))
    compiled = counters["stats"]["unique_graphs"]
    optimizer = PolicyOptimizer(critic.trainable_parameters(), lr=1e-3, cpu=True)
    critic.train()
    values = critic.values([s.prompt_ids for s in samples], [s.response_ids for s in samples])
    optimizer.backward(values.values.float().pow(2).mean())
    optimizer.step()
    policy.generate(prompts, n=2, max_new_tokens=8, seed=1)
    assert counters["stats"]["unique_graphs"] == compiled
