"""token_logprobs against a naive float64 reference; padding invariance; gradients."""

from __future__ import annotations

import copy
from contextlib import nullcontext
from typing import Any

import pytest
import torch

from cuda_agent.policy import Policy
from cuda_agent.policy import _scoring as scoring

RESPONSES = [[70, 71, 72, 73, 2], [100], [5, 6, 7, 8, 9, 10, 11, 12]]


def reference_logprobs(
    policy: Policy, prompt: list[int], response: list[int], temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Full-sequence forward of a float64 copy, full log_softmax of logits / temperature,
    gather: ([T], entropy [T])."""
    model = copy.deepcopy(policy.model).double().eval()
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0] / temperature
    logp = torch.log_softmax(logits, dim=-1)[len(prompt) - 1 : -1]
    token_logp = logp.gather(-1, torch.tensor(response)[:, None]).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return token_logp, entropy


def perturb_lora(policy: Policy) -> None:
    """LoRA B starts at zero (the adapter is a no-op); give it weights so the tests see it."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        for p in policy.trainable_parameters():
            p.add_(torch.randn_like(p) * 0.3)


@pytest.mark.parametrize(
    ("separable_head", "temperature"), [(True, 1.0), (False, 1.0), (True, 0.7), (False, 1.5)]
)
def test_token_logprobs_match_float64_reference(
    make_policy: Any, prompts: list[list[int]], separable_head: bool, temperature: float
) -> None:
    policy = make_policy()
    perturb_lora(policy)
    policy._separable_head = separable_head  # also exercise the full-logits fallback
    out = policy.token_logprobs(prompts, RESPONSES, with_entropy=True, temperature=temperature)
    width = max(map(len, RESPONSES))
    assert out.logprobs.shape == out.mask.shape == (3, width)
    assert out.logprobs.dtype == torch.float32 and out.mask.dtype == torch.bool
    assert out.entropy is not None and out.entropy.shape == (3, width)
    for b, (prompt, response) in enumerate(zip(prompts, RESPONSES, strict=True)):
        ref_logp, ref_entropy = reference_logprobs(policy, prompt, response, temperature)
        assert out.mask[b].tolist() == [True] * len(response) + [False] * (width - len(response))
        torch.testing.assert_close(
            out.logprobs[b, : len(response)].double(), ref_logp, atol=1e-5, rtol=1e-5
        )
        torch.testing.assert_close(
            out.entropy[b, : len(response)].double(), ref_entropy, atol=1e-5, rtol=1e-5
        )
        assert (out.logprobs[b, len(response) :] == 0).all()


def test_the_head_of_a_llama_is_applied_to_response_positions_only(make_policy: Any) -> None:
    assert make_policy()._separable_head


def test_padding_does_not_change_per_sequence_results(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy()
    perturb_lora(policy)
    batched = policy.token_logprobs(prompts, RESPONSES)
    for b, (prompt, response) in enumerate(zip(prompts, RESPONSES, strict=True)):
        alone = policy.token_logprobs([prompt], [response])
        torch.testing.assert_close(
            batched.logprobs[b, : len(response)], alone.logprobs[0], atol=1e-5, rtol=1e-5
        )


def test_chunked_head_gives_the_same_values_and_gradients(
    make_policy: Any, prompts: list[list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = make_policy()
    perturb_lora(policy)

    def values_and_grads() -> tuple[torch.Tensor, list[torch.Tensor]]:
        policy.model.zero_grad()
        out = policy.token_logprobs(prompts, RESPONSES, with_entropy=True)
        assert out.entropy is not None
        (out.logprobs.sum() + out.entropy.sum()).backward()
        return out.logprobs.detach(), [p.grad.clone() for p in policy.trainable_parameters()]

    whole, whole_grads = values_and_grads()
    for name in ("_LOGIT_CHUNK_ELEMENTS", "_CPU_LOGIT_CHUNK_ELEMENTS"):
        monkeypatch.setattr(scoring, name, 3 * len(policy.tokenizer))  # 3 tokens per chunk
    chunked, chunked_grads = values_and_grads()
    torch.testing.assert_close(chunked, whole)
    # The same fp32 sums in another order, whose rounding differs between CPUs (vector widths,
    # BLAS kernels): measured under 1e-5 relative on a Xeon and 1.03e-5 on an AMD EPYC, where
    # the log-probability and entropy terms partly cancel. A chunking mistake (a token dropped
    # or counted twice) moves a gradient by that token's share of it, a few percent with these
    # short responses. The bound sits between, a thousand eps from each.
    rtol = 1000 * torch.finfo(torch.float32).eps  # 1.2e-4
    for a, b in zip(chunked_grads, whole_grads, strict=True):
        assert (a - b).norm() <= rtol * b.norm()


def test_an_entropy_without_gradient_is_the_same_and_stays_out_of_the_backward(
    make_policy: Any, prompts: list[list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """entropy_grad=False: the same log-probs, entropies and log-prob gradients, an entropy
    without gradient, and a backward that does not rebuild it: the entropy is computed once per
    head chunk (in the forward), where with its gradient the backward's recomputation of each
    checkpointed chunk computes it again (and keeps its [chunk, vocab] tensors)."""
    policy = make_policy().train()
    perturb_lora(policy)
    calls: list[int] = []
    entropy = scoring.entropy_from_logits

    def counted(*args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(1)
        return entropy(*args, **kwargs)

    monkeypatch.setattr(scoring, "entropy_from_logits", counted)
    monkeypatch.setattr(scoring, "_CPU_LOGIT_CHUNK_ELEMENTS", 3 * len(policy.tokenizer))

    def run(entropy_grad: bool) -> tuple[Any, list[torch.Tensor], int]:
        policy.model.zero_grad()
        calls.clear()
        out = policy.token_logprobs(
            prompts, RESPONSES, with_entropy=True, entropy_grad=entropy_grad
        )
        out.logprobs.sum().backward()
        return out, [p.grad.clone() for p in policy.trainable_parameters()], len(calls)

    with_grad, grads, computed_with_grad = run(True)
    plain, plain_grads, computed = run(False)
    chunks = -(-sum(map(len, RESPONSES)) // 3)
    assert (computed, computed_with_grad) == (chunks, 2 * chunks)
    assert with_grad.entropy.requires_grad and not plain.entropy.requires_grad
    torch.testing.assert_close(plain.logprobs, with_grad.logprobs, rtol=0, atol=0)
    torch.testing.assert_close(plain.entropy, with_grad.entropy.detach(), rtol=0, atol=0)
    for a, b in zip(plain_grads, grads, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_gradient_reaches_lora_parameters_only(make_policy: Any, prompts: list[list[int]]) -> None:
    policy = make_policy().train()
    trainable = policy.trainable_parameters()
    assert trainable and all(
        "lora_" in name for name, p in policy.model.named_parameters() if p.requires_grad
    )
    policy.token_logprobs(prompts, RESPONSES).logprobs.sum().backward()
    for name, p in policy.model.named_parameters():
        if "lora_B" in name:
            assert p.grad is not None and p.grad.abs().sum() > 0, name
        elif "lora_A" in name:
            assert p.grad is not None, name  # zero at init: B == 0 blocks its gradient
        else:
            assert p.grad is None, name


def test_full_fine_tuning_trains_every_parameter(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy(lora_rank=0)
    params = policy.trainable_parameters()
    assert len(params) == len(list(policy.model.parameters()))
    policy.token_logprobs(prompts, RESPONSES).logprobs.sum().backward()
    assert all(p.grad is not None for p in params)


def test_gradient_checkpointing_gives_the_same_gradients(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    grads = []
    for checkpointing in (False, True):
        policy = make_policy(gradient_checkpointing=checkpointing).train()
        perturb_lora(policy)
        policy.token_logprobs(prompts, RESPONSES).logprobs.sum().backward()
        grads.append([p.grad for p in policy.trainable_parameters()])
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)


def test_checkpoint_min_tokens_checkpoints_only_long_forwards_with_the_same_gradients(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """`checkpoint_min_tokens`: a forward over fewer tokens (rows x padded length) keeps its
    activations (each layer runs once), a longer one is recomputed in the backward (twice);
    the gradients match a policy without checkpointing, and the layers' flags are restored."""
    reference = make_policy().train()
    perturb_lora(reference)
    policy = make_policy(gradient_checkpointing=True, checkpoint_min_tokens=40).train()
    perturb_lora(policy)
    layer = next(m for m in policy._hf_model.modules() if type(m).__name__.endswith("DecoderLayer"))
    runs: list[int] = []
    layer.mlp.register_forward_pre_hook(lambda module, args: runs.append(1))  # recompute too
    batches = {"short": (prompts[1:2], [[5, 6]]), "long": (prompts, RESPONSES)}
    n_tokens = {name: len(p) * max(len(a) + len(b) for a, b in zip(p, r, strict=True))
                for name, (p, r) in batches.items()}  # fmt: skip
    assert n_tokens["short"] < 40 <= n_tokens["long"]  # the premise: one each side
    for name, (prompt_ids, responses) in batches.items():
        grads = []
        for model in (reference, policy):
            model.model.zero_grad()
            runs.clear()
            model.token_logprobs(prompt_ids, responses).logprobs.sum().backward()
            grads.append([p.grad.clone() for p in model.trainable_parameters()])
        assert len(runs) == (1 if name == "short" else 2), name
        for a, b in zip(*grads, strict=True):
            torch.testing.assert_close(a, b)
    assert layer.gradient_checkpointing is True
    with pytest.raises(ValueError, match="checkpoint_min_tokens"):
        make_policy(checkpoint_min_tokens=-1)


def test_empty_responses(make_policy: Any, prompts: list[list[int]]) -> None:
    policy = make_policy()
    out = policy.token_logprobs(prompts[:2], [[], []], with_entropy=True)
    assert out.logprobs.shape == (2, 0) and out.entropy is not None
    mixed = policy.token_logprobs(prompts[:2], [[], [5, 6]])
    assert mixed.mask.tolist() == [[False, False], [True, True]]
    assert (mixed.logprobs[0] == 0).all()


def test_bad_inputs_are_rejected(make_policy: Any) -> None:
    policy = make_policy()
    with pytest.raises(ValueError, match="prompts but"):
        policy.token_logprobs([[1]], [[2], [3]])
    with pytest.raises(ValueError, match="at least one token"):
        policy.token_logprobs([[]], [[2]])


def test_a_bf16_lora_policy_trains_in_mixed_precision(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """float32 adapter weights on a bf16 model: the adapter matmuls run in bf16 (autocast), the
    weights and their gradients stay float32; a float32 model is left alone."""
    assert isinstance(scoring.adapter_autocast(make_policy()._hf_model), type(nullcontext()))
    policy = make_policy(dtype="bf16").train()
    assert isinstance(scoring.adapter_autocast(policy._hf_model), torch.autocast)
    seen: list[torch.dtype] = []
    lora_a = next(m for n, m in policy.model.named_modules() if n.endswith("q_proj.lora_A.default"))
    lora_a.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    responses = [[5, 6, 7], [8, 9], [10]]
    policy.token_logprobs(prompts, responses).logprobs.sum().backward()
    assert seen and all(d == torch.bfloat16 for d in seen)
    grads = [p.grad for n, p in policy.model.named_parameters() if "lora_" in n]
    assert grads and all(g is not None and g.dtype == torch.float32 for g in grads)
    assert all(bool(torch.isfinite(g).all()) for g in grads)
    # A model that keeps some modules in float32 on purpose is left alone.
    policy._hf_model._keep_in_fp32_modules = ["lm_head"]
    assert isinstance(scoring.adapter_autocast(policy._hf_model), type(nullcontext()))


def test_scoring_entropy_is_rl_cores_and_survives_a_banned_token() -> None:
    """The entropy scoring returns is rl_core's formula (its one home), chunked and under
    checkpointing: a head that bans a token (logit -inf) gives a finite entropy and gradient."""
    from cuda_agent.rl_core import entropy_from_logits

    torch.manual_seed(0)
    weight = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    banned = torch.tensor([0.0, -torch.inf, 0.0, 0.0, 0.0, 0.0], dtype=torch.float64)

    def head(h: torch.Tensor) -> torch.Tensor:
        return h @ weight.T + banned

    hidden = torch.randn(5, 4, dtype=torch.float64)
    targets = torch.tensor([0, 2, 3, 4, 5])
    logprobs, entropy = scoring.logprobs_from_hidden(head, hidden, targets, 6, with_entropy=True)
    torch.testing.assert_close(entropy, entropy_from_logits(head(hidden)).float())
    expected = torch.log_softmax(head(hidden), -1).gather(-1, targets[:, None]).squeeze(-1)
    torch.testing.assert_close(logprobs, expected.float())
    (grad,) = torch.autograd.grad(entropy.sum(), weight)
    assert bool(torch.isfinite(grad).all())
