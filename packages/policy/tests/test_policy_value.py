"""ValueModel: alignment against a hand computation, padding, gradients, isolation from the
policy, value pre-training, save/load, the fully fine-tuned and separate-model variants."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import torch

from cuda_agent.policy import Policy, PolicyConfig, testing
from cuda_agent.policy._value import ValueModel

RESPONSES = [[70, 71, 72, 73, 2], [100], [5, 6, 7, 8, 9, 10, 11, 12]]


def perturb(parameters: Iterable[torch.nn.Parameter], seed: int, scale: float = 0.3) -> None:
    """New LoRA adapters (B = 0) and the zero-initialised head are no-ops; give them weights."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for p in parameters:
            p.add_(torch.randn_like(p) * scale)


def named_lora(policy: Policy, adapter: str) -> dict[str, torch.nn.Parameter]:
    return {n: p for n, p in policy.model.named_parameters() if f".{adapter}." in n}


def policy_adapter(policy: Policy) -> list[torch.nn.Parameter]:
    return list(named_lora(policy, "default").values())


def critic_on(policy: Policy, **kwargs: Any) -> ValueModel:
    """A LoRA policy with a perturbed adapter and a critic with a perturbed adapter and head."""
    perturb(policy_adapter(policy), seed=1)
    critic = ValueModel.from_policy(policy, **kwargs)
    perturb(critic.trainable_parameters(), seed=2)
    return critic


def logprobs(policy: Policy, prompts: list[list[int]]) -> torch.Tensor:
    with torch.no_grad():
        return policy.token_logprobs(prompts, RESPONSES).logprobs


def values(critic: ValueModel, prompts: list[list[int]]) -> torch.Tensor:
    with torch.no_grad():
        return critic.values(prompts, RESPONSES).values


def fit_random_targets(
    critic: ValueModel,
    prompts: list[list[int]],
    parameters: list[torch.nn.Parameter],
    steps: int,
) -> list[float]:
    """Value pre-training: Adam on ``parameters``, MSE toward fixed random targets; the losses."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        targets = torch.randn(3, max(map(len, RESPONSES)))
    optimizer = torch.optim.Adam(parameters, lr=1e-2)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        out = critic.values(prompts, RESPONSES)
        loss = ((out.values - targets) ** 2)[out.mask].mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def reference_values(
    critic: ValueModel, adapter: str | None, prompt: list[int], response: list[int]
) -> torch.Tensor:
    """float64 copy of the backbone with `adapter` active, one unpadded sequence, head by hand."""
    return reference_values_and_bounds(critic, adapter, prompt, response)[0]


# float32's unit roundoff u = 2^-24: one rounding moves a result by at most u times itself.
FLOAT32_UNIT_ROUNDOFF = torch.finfo(torch.float32).eps / 2


def reference_values_and_bounds(
    critic: ValueModel, adapter: str | None, prompt: list[int], response: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """`reference_values`, and how far the critic's float32 forward may land from each.

    A float32 sum of n products lies within gamma_n sum_i |x_i y_i|, gamma_n = n u / (1 - n u),
    of the exact one (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., 3.1).
    A value is such a sum, the head `h . w + b`, at the end of a chain of them from the
    embeddings. To first order the chain's relative errors add (RMSNorm brings every layer's
    input back to unit scale, so they do not compound), which bounds the error by
    `n u (|h| |w| + |b|)` (normwise: an error in `h` has no reason to follow `h`'s sign pattern)
    with n the summed length of the reductions on the way: per layer the q/k/v projections
    (hidden), the attention scores (head dim), softmax's denominator and the weighted sum over
    positions (2 x sequence), the output projection (hidden), the MLP (hidden, then
    intermediate) and two RMSNorms (2 x hidden); then the final norm and the head (2 x hidden).
    LoRA's rank-r sums run beside the projections and add no length; elementwise steps
    (rotary, exp, SiLU, rsqrt) add a few u each, within the slack of a worst-case bound.
    For the tiny model n is about 700: the bound is ~4e-4 at |h| |w| ~ 11, while CPUs were
    measured 4 to 31 u |h| |w| away (vector widths and BLAS kernels differ), and the bugs this
    checks (a wrong position, a wrong adapter) move values by 1e-2 to 5.
    """
    model = copy.deepcopy(critic.model).double().eval()
    config = model.config
    if adapter is not None:
        model.set_adapter(adapter)
        model = model.get_base_model()
    with torch.no_grad():
        hidden = model.get_decoder()(input_ids=torch.tensor([prompt + response])).last_hidden_state
    states = hidden[0, len(prompt) - 1 : len(prompt) - 1 + len(response)]
    weight, bias = critic.head.weight.double()[0], critic.head.bias.double()[0]
    values = states @ weight + bias
    hidden_size, sequence = config.hidden_size, len(prompt) + len(response)
    per_layer = (
        3 * hidden_size  # q/k/v, output projection, MLP up and gate
        + hidden_size // config.num_attention_heads  # attention scores
        + 2 * sequence  # softmax denominator, weighted sum over positions
        + config.intermediate_size  # MLP down
        + 2 * hidden_size  # two RMSNorms
    )
    length = config.num_hidden_layers * per_layer + 2 * hidden_size  # final norm, head
    magnitude = states.norm(dim=-1) * weight.norm() + bias.abs()
    return values, length * FLOAT32_UNIT_ROUNDOFF * magnitude


def assert_close_to_reference(
    values_r: torch.Tensor,
    critic: ValueModel,
    adapter: str | None,
    prompt: list[int],
    response: list[int],
) -> None:
    """The critic's float32 values of one sequence against the float64 reference, within the
    rounding bound of `reference_values_and_bounds` (not a tolerance fitted to one CPU)."""
    expected, bound = reference_values_and_bounds(critic, adapter, prompt, response)
    error = (values_r.detach().double() - expected).abs()
    assert (error <= bound).all(), (
        f"error {error.tolist()} beyond the float32 bound {bound.tolist()}"
    )


def test_values_are_the_head_on_the_value_adapters_hidden_states(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy()
    critic = critic_on(policy)
    assert critic.kind == "adapter" and critic.adapter_name == "value"
    out = critic.values(prompts, RESPONSES)
    width = max(map(len, RESPONSES))
    assert out.values.shape == out.mask.shape == (3, width)
    assert out.values.dtype == torch.float32 and out.mask.dtype == torch.bool
    assert out.values.requires_grad
    for b, (prompt, response) in enumerate(zip(prompts, RESPONSES, strict=True)):
        assert out.mask[b].tolist() == [True] * len(response) + [False] * (width - len(response))
        assert_close_to_reference(out.values[b, : len(response)], critic, "value", prompt, response)
        assert (out.values[b, len(response) :] == 0).all()
        # The policy's adapter gives other hidden states: the value adapter is the one in use.
        # Far enough from the bound that the check above tells the two adapters apart.
        expected, bound = reference_values_and_bounds(critic, "value", prompt, response)
        with_policy_adapter = reference_values(critic, "default", prompt, response)
        assert ((expected - with_policy_adapter).abs() > 10 * bound).any()


def test_padding_does_not_change_per_sequence_values(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    critic = critic_on(make_policy())
    batched = values(critic, prompts)
    for b, (prompt, response) in enumerate(zip(prompts, RESPONSES, strict=True)):
        alone = critic.values([prompt], [response]).values.detach()
        torch.testing.assert_close(batched[b, : len(response)], alone[0], atol=1e-5, rtol=1e-5)


def test_a_new_critic_predicts_zero(make_policy: Any, prompts: list[list[int]]) -> None:
    critic = ValueModel.from_policy(make_policy())
    assert (values(critic, prompts) == 0).all()


def test_gradients_reach_value_parameters_only(make_policy: Any, prompts: list[list[int]]) -> None:
    policy = make_policy().train()
    critic = critic_on(policy)
    own = {id(p) for p in critic.trainable_parameters()}
    value_adapter = list(named_lora(policy, "value").values())
    assert {id(p) for p in [*value_adapter, *critic.head.parameters()]} == own
    critic.values(prompts, RESPONSES).values.sum().backward()
    for p in critic.trainable_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0
    for name, p in policy.model.named_parameters():
        if id(p) not in own:
            assert p.grad is None, name


def test_value_pretraining_lowers_the_loss_and_leaves_the_policy_alone(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy()
    perturb(policy_adapter(policy), seed=1)
    policy_state = {k: v.clone() for k, v in policy.model.state_dict().items()}
    before = logprobs(policy, prompts)
    critic = ValueModel.from_policy(policy).train()
    losses = fit_random_targets(critic, prompts, critic.trainable_parameters(), steps=25)
    assert losses[-1] < 0.5 * losses[0], [round(x, 3) for x in losses]
    assert torch.equal(logprobs(policy, prompts), before)
    for key, value in policy.model.state_dict().items():
        if ".value." not in key:
            assert torch.equal(value, policy_state[key]), key


def test_the_policy_is_unaffected_and_keeps_training(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy().train()
    perturb(policy_adapter(policy), seed=1)
    before = logprobs(policy, prompts)
    critic = ValueModel.from_policy(policy)
    perturb(critic.trainable_parameters(), seed=2)
    assert torch.equal(logprobs(policy, prompts), before)
    critic.values(prompts, RESPONSES).values.sum().backward()  # a forward + backward of the critic
    assert torch.equal(logprobs(policy, prompts), before)
    assert policy.model.active_adapter == "default"
    assert all(p.requires_grad for p in policy_adapter(policy))
    assert all(p.requires_grad for p in critic.trainable_parameters())
    critic_values = values(critic, prompts)

    # A policy optimiser step still changes the policy's log-probs, and not the critic's values.
    policy.model.zero_grad()
    optimizer = torch.optim.SGD(policy_adapter(policy), lr=0.5)
    (-policy.token_logprobs(prompts, RESPONSES).logprobs.sum()).backward()
    optimizer.step()
    assert not torch.allclose(logprobs(policy, prompts), before)
    assert torch.equal(values(critic, prompts), critic_values)


@pytest.mark.parametrize("gradient_checkpointing", [False, True])
def test_one_backward_of_policy_and_value_losses_gives_each_its_own_gradients(
    make_policy: Any, prompts: list[list[int]], gradient_checkpointing: bool
) -> None:
    """A PPO step: log-probs (policy adapter) and values (value adapter) in one backward. Under
    activation checkpointing, the critic's layers must be recomputed with the value adapter."""

    def gradients(checkpointing: bool, parts: tuple[str, ...]) -> list[torch.Tensor | None]:
        policy = make_policy(gradient_checkpointing=checkpointing).train()
        critic = critic_on(policy)
        loss = torch.zeros(())
        if "policy" in parts:
            loss = loss - policy.token_logprobs(prompts, RESPONSES).logprobs.sum()
        if "value" in parts:
            loss = loss + (critic.values(prompts, RESPONSES).values ** 2).sum()
        loss.backward()
        params = policy_adapter(policy) + critic.trainable_parameters()
        return [None if p.grad is None else p.grad.clone() for p in params]

    joint = gradients(gradient_checkpointing, ("policy", "value"))
    policy_only = gradients(False, ("policy",))
    value_only = gradients(False, ("value",))
    for g, p, v in zip(joint, policy_only, value_only, strict=True):
        expected = p if p is not None else v
        assert g is not None and expected is not None
        assert (p is None) != (v is None)  # each parameter belongs to exactly one loss
        torch.testing.assert_close(g, expected, atol=1e-5, rtol=1e-4)


def test_policy_trainable_parameters_exclude_the_value_adapter(make_policy: Any) -> None:
    policy = make_policy()
    ValueModel.from_policy(policy)
    assert {id(p) for p in policy.trainable_parameters()} == {id(p) for p in policy_adapter(policy)}


def test_switching_the_adapters_off_keeps_both_adapters_trainable(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """The KL reference (the base model) leaves every requires_grad as it was: peft's own
    switch left the value adapter frozen, out of the critic's optimizer and its gradients."""
    policy = make_policy()
    base = logprobs(policy, prompts)
    critic = critic_on(policy)
    flags = [(n, p.requires_grad) for n, p in policy.model.named_parameters()]
    with policy.adapters_disabled():
        torch.testing.assert_close(logprobs(policy, prompts), base)
    assert [(n, p.requires_grad) for n, p in policy.model.named_parameters()] == flags
    assert not torch.equal(logprobs(policy, prompts), base)  # the policy's adapter is back on
    critic.values(prompts, RESPONSES).values.sum().backward()
    assert all(p.grad is not None for p in critic.trainable_parameters())
    with pytest.raises(ValueError, match="no adapter to switch off"):
        make_policy(lora_rank=0).adapters_disabled()


def test_value_adapter_settings(make_policy: Any) -> None:
    policy = make_policy(lora_rank=4, lora_alpha=8)
    critic = ValueModel.from_policy(policy, lora_rank=2, lora_alpha=4, adapter_name="critic")
    config = policy.model.peft_config["critic"]
    assert (config.r, config.lora_alpha) == (2, 4)
    assert config.target_modules == policy.model.peft_config["default"].target_modules
    assert all(p.shape[0] == 2 for n, p in named_lora(policy, "critic").items() if "lora_A" in n)
    assert critic.lora_rank == 2
    with pytest.raises(ValueError, match="already has an adapter named 'critic'"):
        ValueModel.from_policy(policy, adapter_name="critic")


def test_a_fully_fine_tuned_policy_shares_its_backbone(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """Documented choice: the critic is a head on the shared backbone; value-loss gradients reach
    the backbone (the policy's optimiser steps it); the critic's own parameters are the head."""
    policy = make_policy(lora_rank=0)
    with pytest.raises(ValueError, match="fully fine-tuned"):
        ValueModel.from_policy(policy, lora_rank=4)
    critic = ValueModel.from_policy(policy)
    assert critic.kind == "shared" and critic.adapter_name is None
    assert [id(p) for p in critic.trainable_parameters()] == [
        id(p) for p in critic.head.parameters()
    ]
    perturb(critic.head.parameters(), seed=2)
    for b, (prompt, response) in enumerate(zip(prompts, RESPONSES, strict=True)):
        assert_close_to_reference(
            values(critic, prompts)[b, : len(response)], critic, None, prompt, response
        )
    before = logprobs(policy, prompts)
    critic.values(prompts, RESPONSES).values.sum().backward()
    decoder = policy.model.get_decoder()
    assert all(p.grad is not None for p in decoder.parameters())  # the shared backbone
    assert policy.model.get_output_embeddings().weight.grad is None  # the vocabulary head: unused
    optimizer = torch.optim.SGD(critic.trainable_parameters(), lr=0.1)
    optimizer.step()  # value pre-training (head only) leaves the policy as it was
    assert torch.equal(logprobs(policy, prompts), before)


def test_save_then_load_reproduces_values(
    make_policy: Any, prompts: list[list[int]], tmp_path: Path
) -> None:
    saved = critic_on(make_policy())
    expected = values(saved, prompts)
    saved.save(tmp_path)
    assert (tmp_path / "value" / "adapter_config.json").is_file()
    assert (tmp_path / "value" / "adapter_model.safetensors").is_file()
    assert (tmp_path / "value_head.safetensors").is_file()
    description = json.loads((tmp_path / "value_config.json").read_text())
    assert description["kind"] == "adapter" and description["lora_rank"] == 4

    policy = make_policy()
    perturb(policy_adapter(policy), seed=1)
    fresh = ValueModel.from_policy(policy)
    before = logprobs(policy, prompts)
    assert not torch.allclose(values(fresh, prompts), expected)
    fresh.load(tmp_path)
    assert torch.equal(values(fresh, prompts), expected)
    assert torch.equal(logprobs(policy, prompts), before)  # the policy's adapter untouched
    assert all(p.requires_grad for p in policy_adapter(policy))
    assert all(p.requires_grad for p in fresh.trainable_parameters())

    # The adapter directory is plain peft format.
    policy.model.load_adapter(str(tmp_path / "value"), adapter_name="reloaded")
    for name, p in named_lora(policy, "value").items():
        assert torch.equal(p, policy.model.get_parameter(name.replace(".value.", ".reloaded.")))


def test_load_names_the_mismatch(make_policy: Any, tmp_path: Path) -> None:
    ValueModel.from_policy(make_policy(lora_rank=4)).save(tmp_path / "r4")
    with pytest.raises(ValueError, match="lora_rank=8"):
        ValueModel.from_policy(make_policy(lora_rank=8)).load(tmp_path / "r4")
    with pytest.raises(ValueError, match="kind 'adapter'"):
        ValueModel.from_policy(make_policy(lora_rank=0)).load(tmp_path / "r4")
    wide = make_policy(model=testing.tiny_llama(testing.tiny_tokenizer(), hidden_size=48))
    with pytest.raises(ValueError, match="hidden size 32"):
        ValueModel.from_policy(wide).load(tmp_path / "r4")
    targets = make_policy(lora_target_modules=("q_proj", "v_proj"))
    with pytest.raises(ValueError, match="does not match"):
        ValueModel.from_policy(targets).load(tmp_path / "r4")
    with pytest.raises(FileNotFoundError, match=r"ValueModel\.save"):
        ValueModel.from_policy(make_policy()).load(tmp_path / "nothing-here")


@pytest.mark.parametrize("lora_rank", [4, 0])
def test_a_separate_smaller_critic(
    prompts: list[list[int]], tmp_path: Path, lora_rank: int, make_policy: Any
) -> None:
    model_dir = testing.save_tiny_model(
        tmp_path / "critic-model", hidden_size=16, intermediate_size=32
    )
    config = PolicyConfig(model=str(model_dir), device="cpu", lora_rank=lora_rank, seed=5)
    critic = ValueModel.separate(config).train()
    assert critic.kind == "separate" and critic.hidden_size == 16
    own = critic.trainable_parameters()
    if lora_rank:
        assert critic.adapter_name == "default"
        assert len(own) == len([p for p in critic.model.parameters() if p.requires_grad]) + 2
    else:
        assert critic.adapter_name is None
        assert len(own) == len(list(critic.model.parameters())) + 2

    policy = make_policy()
    before = logprobs(policy, prompts)
    losses = fit_random_targets(critic, prompts, own, steps=20)
    assert losses[-1] < 0.5 * losses[0], [round(x, 3) for x in losses]
    assert torch.equal(logprobs(policy, prompts), before)

    critic.eval()
    for b, (prompt, response) in enumerate(zip(prompts, RESPONSES, strict=True)):
        adapter = critic.adapter_name
        assert_close_to_reference(
            values(critic, prompts)[b, : len(response)], critic, adapter, prompt, response
        )

    critic.save(tmp_path / "saved")
    fresh = ValueModel.separate(config)
    assert not torch.allclose(values(fresh, prompts), values(critic, prompts))
    fresh.load(tmp_path / "saved")
    torch.testing.assert_close(values(fresh, prompts), values(critic, prompts))
    with pytest.raises(ValueError, match="kind 'separate'"):
        ValueModel.from_policy(policy).load(tmp_path / "saved")


def test_from_model_builds_a_separate_critic(
    make_model: Any, tiny_tokenizer: Any, prompts: list[list[int]]
) -> None:
    critic = ValueModel.from_model(
        make_model(), tiny_tokenizer, PolicyConfig(device="cpu", lora_rank=4)
    )
    assert critic.kind == "separate"
    assert critic.values(prompts, RESPONSES).values.shape == (3, 8)


def test_empty_responses_and_bad_inputs(make_policy: Any, prompts: list[list[int]]) -> None:
    critic = ValueModel.from_policy(make_policy())
    out = critic.values(prompts[:2], [[], []])
    assert out.values.shape == out.mask.shape == (2, 0)
    mixed = critic.values(prompts[:2], [[], [5, 6]])
    assert mixed.mask.tolist() == [[False, False], [True, True]]
    with pytest.raises(ValueError, match="prompts but"):
        critic.values([[1]], [[2], [3]])
    with pytest.raises(ValueError, match="at least one token"):
        critic.values([[]], [[2]])
