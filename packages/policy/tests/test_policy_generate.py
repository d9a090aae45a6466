"""generate: shapes, determinism, seeds, sampler log-probs, stop strings, finish reasons, padding."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.policy import Policy, Sample
from cuda_agent.policy._sampling import truncate_at_stop


def flat(samples: list[list[Sample]]) -> list[Sample]:
    return [s for group in samples for s in group]


@pytest.fixture(params=["dynamic", "static"])
def make_policy(request: pytest.FixtureRequest, make_policy: Any) -> Any:
    """Every test here runs on both sampling paths: transformers' generate with a dynamic cache,
    and our static-cache decoding loop (uncompiled on the CPU)."""

    def build(**config: Any) -> Policy:
        config.setdefault("kv_cache", request.param)
        return make_policy(**config)

    return build


def test_n_samples_per_prompt_with_consistent_fields(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy()
    eos = policy.tokenizer.eos_token_id
    # an answer ends at its turn's end or where it opens a new turn (_turns.py)
    ends = {eos, policy.tokenizer.convert_tokens_to_ids("<|im_start|>")}
    out = policy.generate(prompts, n=3, max_new_tokens=12, seed=0)
    assert len(out) == len(prompts) and all(len(group) == 3 for group in out)
    for prompt, group in zip(prompts, out, strict=True):
        for s in group:
            assert s.prompt_ids == prompt
            assert 1 <= len(s.response_ids) <= 12
            assert len(s.sampler_logprobs) == len(s.response_ids)
            assert all(lp <= 0.0 for lp in s.sampler_logprobs)
            assert s.text == policy.tokenizer.decode(s.response_ids, skip_special_tokens=True)
            assert not ends & set(s.response_ids[:-1])  # no padding after the end
            if s.finish_reason == "stop":
                assert s.response_ids[-1] in ends
            else:
                assert s.finish_reason == "length" and len(s.response_ids) == 12


def test_greedy_is_deterministic_and_ignores_the_seed(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy()
    a = policy.generate(prompts, n=2, max_new_tokens=10, temperature=0.0, seed=1)
    b = policy.generate(prompts, n=2, max_new_tokens=10, temperature=0.0, seed=2)
    assert a == b
    assert all(group[0].response_ids == group[1].response_ids for group in a)


def test_sampling_is_reproducible_with_a_seed(make_policy: Any, prompts: list[list[int]]) -> None:
    policy = make_policy()
    a = policy.generate(prompts, n=2, max_new_tokens=10, seed=7)
    b = policy.generate(prompts, n=2, max_new_tokens=10, seed=7)
    c = policy.generate(prompts, n=2, max_new_tokens=10, seed=8)
    assert a == b
    assert a != c
    assert any(g[0].response_ids != g[1].response_ids for g in a)  # n samples are not copies


def test_unseeded_runs_follow_the_config_seed_and_leave_the_global_rng_alone(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    before = torch.random.get_rng_state()
    first = make_policy(seed=3)
    runs = [first.generate(prompts, max_new_tokens=8), first.generate(prompts, max_new_tokens=8)]
    assert runs[0] != runs[1]  # successive calls draw fresh seeds
    again = make_policy(seed=3)
    assert [
        again.generate(prompts, max_new_tokens=8),
        again.generate(prompts, max_new_tokens=8),
    ] == runs
    assert torch.equal(torch.random.get_rng_state(), before)


def test_sampler_logprobs_match_token_logprobs_at_temperature_one(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy()
    # A hub model's generation_config may carry sampling options; they must not leak in.
    policy.model.get_base_model().generation_config.repetition_penalty = 3.0
    policy.model.get_base_model().generation_config.top_k = 2
    samples = flat(policy.generate(prompts, n=2, max_new_tokens=16, seed=0))
    scored = policy.token_logprobs(
        [s.prompt_ids for s in samples], [s.response_ids for s in samples]
    )
    for b, s in enumerate(samples):
        expected = scored.logprobs[b, : len(s.response_ids)]
        torch.testing.assert_close(torch.tensor(s.sampler_logprobs), expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("temperature", [0.6, 1.4])
def test_sampler_logprobs_match_token_logprobs_at_the_sampling_temperature(
    make_policy: Any, prompts: list[list[int]], temperature: float
) -> None:
    """An RL update compares its log-probs with the sampler's: scored at the temperature the
    answers were drawn at, they are the same numbers; at 1 they are not."""
    policy = make_policy()
    samples = flat(
        policy.generate(prompts, n=2, max_new_tokens=16, temperature=temperature, seed=0)
    )
    pairs = ([s.prompt_ids for s in samples], [s.response_ids for s in samples])
    with torch.no_grad():
        tempered = policy.token_logprobs(*pairs, temperature=temperature)
        plain = policy.token_logprobs(*pairs)
    gaps = []
    for b, s in enumerate(samples):
        n = len(s.response_ids)
        sampler = torch.tensor(s.sampler_logprobs)
        torch.testing.assert_close(sampler, tempered.logprobs[b, :n], atol=1e-4, rtol=1e-4)
        gaps.append(float((sampler - plain.logprobs[b, :n]).abs().max()))
    assert max(gaps) > 1e-2


def test_a_scoring_temperature_of_zero_or_less_is_refused(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy()
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="temperature must be > 0"):
            policy.token_logprobs(prompts[:1], [[5, 6]], temperature=bad)


def processed_reference(policy: Policy, s: Sample, temperature: float, top_k: int) -> torch.Tensor:
    """log_softmax(top_k(logits / temperature)) at the chosen tokens, from a full forward pass."""
    ids = torch.tensor([s.prompt_ids + s.response_ids])
    with torch.no_grad():
        logits = (
            policy.model(input_ids=ids).logits[0, len(s.prompt_ids) - 1 : -1].double() / temperature
        )
    kth = logits.topk(top_k, dim=-1).values[:, -1:]
    logits = logits.masked_fill(logits < kth, float("-inf"))
    return (
        torch.log_softmax(logits, -1).gather(-1, torch.tensor(s.response_ids)[:, None]).squeeze(-1)
    )


def test_sampler_logprobs_follow_temperature_and_top_k(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy()
    for s in flat(
        policy.generate(prompts, n=2, max_new_tokens=12, temperature=0.7, top_k=5, seed=0)
    ):
        expected = processed_reference(policy, s, temperature=0.7, top_k=5)
        assert torch.isfinite(expected).all()  # every chosen token was inside the top 5
        torch.testing.assert_close(
            torch.tensor(s.sampler_logprobs, dtype=torch.float64), expected, atol=1e-4, rtol=1e-4
        )


def test_top_k_one_is_greedy_with_probability_one(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy()
    greedy = policy.generate(prompts, max_new_tokens=10, temperature=0.0)
    top1 = policy.generate(prompts, max_new_tokens=10, temperature=1.3, top_k=1, seed=5)
    tiny_p = policy.generate(prompts, max_new_tokens=10, top_p=1e-6, seed=6)
    for g, t, p in zip(flat(greedy), flat(top1), flat(tiny_p), strict=True):
        assert g.response_ids == t.response_ids == p.response_ids
        assert t.sampler_logprobs == [0.0] * len(t.response_ids)


def test_batched_greedy_equals_one_prompt_at_a_time(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy()
    batched = policy.generate(prompts, max_new_tokens=16, temperature=0.0)
    for prompt, group in zip(prompts, batched, strict=True):
        alone = policy.generate([prompt], max_new_tokens=16, temperature=0.0)[0][0]
        assert alone.response_ids == group[0].response_ids
        torch.testing.assert_close(
            torch.tensor(alone.sampler_logprobs), torch.tensor(group[0].sampler_logprobs)
        )


def test_eos_ends_a_response_with_finish_reason_stop(
    make_model: Any, make_policy: Any, prompts: list[list[int]]
) -> None:
    plain = make_policy().generate(prompts[:1], max_new_tokens=6, temperature=0.0)[0][0]
    assert plain.finish_reason == "length" and len(plain.response_ids) == 6
    # Swap the output rows of the first greedy token and eos: now greedy emits eos first.
    model = make_model()
    eos, first = model.config.eos_token_id, plain.response_ids[0]
    with torch.no_grad():
        model.lm_head.weight[[eos, first]] = model.lm_head.weight[[first, eos]].clone()
    stopped = make_policy(model=model).generate(prompts[:1], max_new_tokens=6, temperature=0.0)[0][
        0
    ]
    assert stopped.response_ids == [eos]
    assert stopped.finish_reason == "stop" and stopped.text == ""
    assert len(stopped.sampler_logprobs) == 1


def test_stop_strings_truncate_text_and_tokens(make_policy: Any, prompts: list[list[int]]) -> None:
    policy = make_policy()
    full = policy.generate(prompts, max_new_tokens=24, temperature=0.0)
    for prompt, group in zip(prompts, full, strict=True):
        sample = group[0]
        stop = sample.text[5:8]  # a piece from the middle of the greedy text
        assert stop
        cut = policy.generate(
            [prompt], max_new_tokens=24, temperature=0.0, stop=["\x00never", stop]
        )[0][0]
        end = sample.text.find(stop) + len(stop)
        assert cut.text == sample.text[:end]
        assert cut.finish_reason == "stop"
        assert cut.response_ids == sample.response_ids[: len(cut.response_ids)]
        assert len(cut.sampler_logprobs) == len(cut.response_ids)
        assert policy.tokenizer.decode(cut.response_ids, skip_special_tokens=True).startswith(
            cut.text
        )
        # shortest: one token fewer no longer contains the stop string
        assert stop not in policy.tokenizer.decode(cut.response_ids[:-1], skip_special_tokens=True)


def test_generate_restores_training_mode(make_policy: Any, prompts: list[list[int]]) -> None:
    policy = make_policy().train()
    policy.generate(prompts[:1], max_new_tokens=2)
    assert policy.model.training


def test_chat_prompt_ids_end_with_the_generation_prompt(make_policy: Any) -> None:
    policy = make_policy()
    ids = policy.chat_prompt_ids([{"role": "user", "content": "hi"}])
    assert policy.tokenizer.decode(ids) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n": 0},
        {"max_new_tokens": 0},
        {"temperature": -1.0},
        {"top_p": 0.0},
        {"top_k": -1},
        {"stop": [""]},
    ],
)
def test_bad_sampling_arguments_are_rejected(
    make_policy: Any, prompts: list[list[int]], kwargs: dict[str, Any]
) -> None:
    with pytest.raises(ValueError):
        make_policy().generate(prompts, **kwargs)


def test_bf16_policy_samples_and_scores_in_float32(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy(dtype="bf16")
    assert next(policy.model.get_base_model().parameters()).dtype == torch.bfloat16
    samples = flat(policy.generate(prompts, max_new_tokens=8, seed=0))
    scored = policy.token_logprobs(
        [s.prompt_ids for s in samples], [s.response_ids for s in samples]
    )
    assert scored.logprobs.dtype == torch.float32
    for b, s in enumerate(samples):
        got = scored.logprobs[b, : len(s.response_ids)]
        torch.testing.assert_close(got, torch.tensor(s.sampler_logprobs), atol=0.1, rtol=0.05)


TEXT = st.text(alphabet="ab \nxé→", max_size=24)


@settings(max_examples=60, deadline=None)
@given(text=TEXT, stop=TEXT.filter(bool))
def test_truncate_at_stop_keeps_the_shortest_prefix_through_the_stop(
    tiny_tokenizer: Any, text: str, stop: str
) -> None:
    ids = tiny_tokenizer(text)["input_ids"]
    cut = truncate_at_stop(tiny_tokenizer, ids, [stop])
    if stop not in text:
        assert cut is None
        return
    assert cut is not None
    length, cut_text = cut
    assert cut_text == text[: text.find(stop) + len(stop)]
    assert stop in tiny_tokenizer.decode(ids[:length])
    assert stop not in tiny_tokenizer.decode(ids[: length - 1])


def test_kv_cache_setting_is_checked() -> None:
    from cuda_agent.policy import PolicyConfig

    with pytest.raises(ValueError, match="kv_cache"):
        PolicyConfig(kv_cache="paged-ish")


def test_chat_messages_are_prompts_too(make_policy: Any) -> None:
    policy = make_policy()
    messages = [{"role": "user", "content": "Write a CUDA add kernel."}]
    ids = policy.chat_prompt_ids(messages)
    by_messages = policy.generate([messages, ids], max_new_tokens=6, temperature=0.0)
    assert by_messages[0][0].prompt_ids == ids
    assert by_messages[0][0].response_ids == by_messages[1][0].response_ids
    with pytest.raises(TypeError, match="token ids or a list of chat messages"):
        policy.generate([["not", "ids"]], max_new_tokens=2)  # type: ignore[list-item]
