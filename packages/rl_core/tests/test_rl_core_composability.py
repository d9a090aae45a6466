"""Every function is pure (inputs untouched) and composes under `torch.func` and `torch.compile`."""

import inspect
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import cuda_agent.rl_core as rl

TORCH_SETTINGS = settings(deadline=None, max_examples=20)
# torch.compile's own internals warn about torch.jit.script_method; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")


def batch(seed: int = 0, b: int = 3, t: int = 7, v: int = 5) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logprobs = -torch.rand(b, t, generator=g, dtype=torch.float64) * 3
    mask = torch.rand(b, t, generator=g) > 0.3
    mask[:, 0] = True
    return {
        "logprobs": logprobs,
        "old": logprobs + 0.3 * torch.randn(b, t, generator=g, dtype=torch.float64),
        "adv": torch.randn(b, 1, generator=g, dtype=torch.float64),
        "values": torch.randn(b, t, generator=g, dtype=torch.float64),
        "rewards": torch.randn(b, t, generator=g, dtype=torch.float64),
        "mask": mask,
        "logits": torch.randn(b, t, v, generator=g, dtype=torch.float64),
        "rewards_gn": torch.randn(2, 4, generator=g, dtype=torch.float64),
        "turn_rewards": torch.randn(b, t, generator=g, dtype=torch.float64),
    }


def call_everything(x: dict[str, torch.Tensor]) -> None:
    lp, old, adv, mask = x["logprobs"], x["old"], x["adv"], x["mask"]
    rl.group_normalized_advantages(x["rewards_gn"])
    rl.leave_one_out_advantages(x["rewards_gn"])
    rl.informative_groups(x["rewards_gn"])
    rl.gae_advantages(x["rewards"], x["values"], gamma=0.9, lam=0.95, mask_bt=mask)
    rl.batch_normalized_advantages(x["values"], mask)
    rl.discounted_returns(x["rewards"], gamma=0.4, mask_bt=mask)
    turn = rl.turn_index_from_loss_mask(mask)
    rl.turn_rewards_at_turn_ends(x["turn_rewards"], turn, mask)
    rl.spread_turns_to_tokens(x["turn_rewards"], turn, mask)
    rl.ppo_clipped_policy_loss(lp, old, adv, dual_clip=3.0)
    rl.gspo_policy_loss(lp, old, adv, mask)
    rl.value_loss(x["values"], x["rewards"], old_values_bt=old, clip_eps=0.2)
    rl.entropy_from_logits(x["logits"], chunk_size=4)
    for kl in (rl.kl_k1, rl.kl_k2, rl.kl_k3):
        kl(lp, old, clamp=10.0)
    rl.sequence_kl(lp, old, mask, estimator="k3")
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum"):
        rl.aggregate_loss(x["values"], mask, mode)
    rl.masked_seq_mean_token_sum_norm(x["values"], mask, max_tokens=8)
    rl.aggregation_counts(mask)
    rl.truncated_importance_weights(lp, old, mask, level="sequence")
    rl.importance_sampling_mask(lp, old, mask)
    rl.importance_ratio_stats(lp, old, mask, level="geometric")
    rl.clip_fraction(lp, old, mask)
    rl.approx_kl(lp, old, mask)
    rl.approx_kl_k3(lp, old)
    rl.explained_variance(x["values"], x["rewards"], mask)


def test_no_function_changes_its_inputs() -> None:
    inputs = batch()
    copies = {k: v.clone() for k, v in inputs.items()}
    versions = {k: v._version for k, v in inputs.items()}
    call_everything(inputs)
    for k, v in inputs.items():
        assert torch.equal(v, copies[k]) and v._version == versions[k], k


def test_everything_is_exported_and_documented() -> None:
    for name in rl.__all__:
        obj = getattr(rl, name)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue  # a Literal alias of the accepted names
        assert obj.__doc__ and len(obj.__doc__) > 40, name


@TORCH_SETTINGS
@given(seed=st.integers(0, 2**16))
def test_vmap_over_sequences_matches_the_batched_call(seed: int) -> None:
    x = batch(seed)
    lp, old, mask = x["logprobs"], x["old"], x["mask"]
    per_seq = torch.func.vmap(lambda a, b: rl.kl_k3(a, b, clamp=10.0))(lp, old)
    torch.testing.assert_close(per_seq, rl.kl_k3(lp, old, clamp=10.0))
    entropy = torch.func.vmap(lambda z: rl.entropy_from_logits(z, chunk_size=3))(x["logits"])
    torch.testing.assert_close(entropy, rl.entropy_from_logits(x["logits"]))
    returns = torch.func.vmap(lambda r, m: rl.discounted_returns(r, gamma=0.4, mask_bt=m))
    torch.testing.assert_close(
        returns(x["rewards"], mask), rl.discounted_returns(x["rewards"], gamma=0.4, mask_bt=mask)
    )

    def seq_gspo(lp_t: torch.Tensor, old_t: torch.Tensor, a: torch.Tensor, m: torch.Tensor):
        return rl.masked_token_mean(
            rl.gspo_policy_loss(lp_t, old_t, a, m, eps_low=0.9, eps_high=9), m
        )

    # Per-sequence gradients by vmap(grad) equal the gradient of the sum of sequence losses.
    per_seq_grad = torch.func.vmap(torch.func.grad(seq_gspo))(lp, old, x["adv"], mask)
    lp_req = lp.clone().requires_grad_(True)
    total = sum(seq_gspo(lp_req[i], old[i], x["adv"][i], mask[i]) for i in range(lp.shape[0]))
    (grad,) = torch.autograd.grad(total, lp_req)
    torch.testing.assert_close(per_seq_grad, grad)


def loss_step(
    logprobs_bt: torch.Tensor,
    old_bt: torch.Tensor,
    advantages_b1: torch.Tensor,
    mask_bt: torch.Tensor,
    logits_btv: torch.Tensor,
    sampler_bt: torch.Tensor,
) -> torch.Tensor:
    """A whole policy-loss step: TIS-weighted PPO + KL penalty - entropy bonus, aggregated."""
    weights_bt = rl.truncated_importance_weights(old_bt, sampler_bt, mask_bt)
    loss_bt = weights_bt * rl.ppo_clipped_policy_loss(
        logprobs_bt, old_bt, advantages_b1, dual_clip=3.0
    )
    loss_bt = loss_bt + 0.01 * rl.kl_k3(logprobs_bt, old_bt, clamp=10.0)
    loss_bt = loss_bt - 0.001 * rl.entropy_from_logits(logits_btv, chunk_size=8)
    counts = rl.aggregation_counts(mask_bt)
    return rl.masked_token_mean(loss_bt, mask_bt, num_tokens=counts.num_tokens)


def test_a_loss_step_and_gae_compile_to_one_graph() -> None:
    x = batch(1)
    args = (x["logprobs"], x["old"], x["adv"], x["mask"], x["logits"], x["logprobs"] - 0.1)
    compiled = torch.compile(loss_step, backend="aot_eager", fullgraph=True)
    for fn in (loss_step, compiled):
        lp = x["logprobs"].clone().requires_grad_(True)
        loss = fn(lp, *args[1:])
        (grad,) = torch.autograd.grad(loss, lp)
        if fn is loss_step:
            expected = (loss.detach(), grad)
    torch.testing.assert_close((loss.detach(), grad), expected)

    def gae(r: torch.Tensor, v: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return rl.gae_advantages(r, v, gamma=1.0, lam=0.95, mask_bt=m).advantages_bt

    compiled_gae = torch.compile(gae, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(
        compiled_gae(x["rewards"], x["values"], x["mask"]),
        gae(x["rewards"], x["values"], x["mask"]),
    )


@pytest.mark.slow
def test_inductor_compiles_the_loss_step() -> None:
    x = batch(2)
    args = (x["logprobs"], x["old"], x["adv"], x["mask"], x["logits"], x["logprobs"] - 0.1)
    compiled = torch.compile(loss_step, fullgraph=True)
    torch.testing.assert_close(compiled(*args), loss_step(*args))
    assert math.isfinite(float(compiled(*args)))
