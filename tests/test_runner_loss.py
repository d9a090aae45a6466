"""The composed losses of a training step (runner/trainer/loss.py) on fixed batches, by hand, and the
law that splitting a batch into micro-batches does not change the update."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_agent.agent import Episode, Turn, collate
from cuda_agent.rl_core import aggregation_counts
from cuda_agent.runner.trainer import loss as L
from cuda_agent.runner.trainer.update_config import GaeAdvantage, GroupAdvantage, LossConfig


def _turn(index, context, response, reward):
    return Turn(
        index,
        tuple(context),
        tuple(response),
        tuple(-1.0 for _ in response),
        "",
        "stop",
        "code",
        None,
        reward,
        "feedback",
    )


def _episode(group, rewards):
    turns = [
        _turn(k, [1, 2] if k == 0 else [3], [10 + k, 20 + k], r) for k, r in enumerate(rewards)
    ]
    return Episode("t", group, "full", tuple(turns), "max_turns")


def test_policy_loss_by_hand_with_truncated_importance_weights():
    logp = torch.log(torch.tensor([[0.5, 0.25]])).requires_grad_()
    old = logp.detach().clone()  # one update per batch: the old policy is the current one
    sampler = torch.log(torch.tensor([[0.5, 0.5]]))  # w = min(exp(old - sampler), 2) = [1, 0.5]
    adv = torch.tensor([[1.0, 2.0]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    total = aggregation_counts(mask)
    loss, stats = L.policy_loss(logp, old, sampler, adv, mask, total, LossConfig())
    # ratio 1: loss_t = -w_t * A_t = [-1, -1]; token mean -1; d/dlogp_t = -w_t A_t / 2
    assert loss.item() == pytest.approx(-1.0)
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-0.5, -0.5]]))
    assert stats["tokens"] == 2 and stats["clip_fraction"] == 0


def test_a_ratio_past_the_clip_gets_no_gradient_and_kl_adds_k3():
    old = torch.zeros(1, 2)
    logp = torch.tensor([[math.log(1.5), 0.0]]).requires_grad_()  # ratio 1.5 > 1 + 0.28
    mask = torch.ones(1, 2, dtype=torch.bool)
    s = LossConfig(kl_coef=0.5)
    ref = torch.tensor([[0.0, math.log(0.5)]])
    loss, stats = L.policy_loss(
        logp, old, old, torch.ones(1, 2), mask, aggregation_counts(mask), s, ref
    )
    # token 0: clipped at 1.28 (no gradient from the surrogate) + 0.5 * k3(log 1.5 vs 0)
    k3_0 = math.exp(-math.log(1.5)) - 1 + math.log(1.5)
    k3_1 = math.exp(math.log(0.5)) - 1 - math.log(0.5)
    expected = (-1.28 + 0.5 * k3_0 + (-1.0) + 0.5 * k3_1) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert stats["clip_fraction"] == pytest.approx(1.0)  # one of two tokens, times 2 tokens


def test_group_advantages_credit_later_turns_and_compare_against_the_group():
    batch = collate([_episode(0, [0.0, 2.0]), _episode(0, [1.0]), _episode(1, [3.0])])
    s = GroupAdvantage(kind="dr_grpo", turn_discount=0.4)
    adv = L.group_advantages(batch, s)
    mean = (0.8 + 2.0 + 1.0) / 3  # returns: [0 + 0.4 * 2, 2] and [1]
    torch.testing.assert_close(adv[0], torch.tensor([0.8 - mean, 2.0 - mean]))
    torch.testing.assert_close(adv[1], torch.tensor([1.0 - mean, 0.0]))
    torch.testing.assert_close(adv[2], torch.tensor([0.0, 0.0]))  # a group of one: no signal
    # spread over the tokens of each turn
    first = batch.per_row(adv)[0]
    assert first.tolist()[:2] == pytest.approx([0.8 - mean] * 2)


def test_gae_over_turns_with_the_critic_by_hand():
    batch = collate([_episode(0, [0.5, 2.0])])  # response: [10, 20, 3, 11, 21], mask 1 1 0 1 1
    values = torch.zeros(1, batch.width)
    out = L.gae(batch, values, GaeAdvantage(lam=0.95))
    # rewards on turn ends: [0, 0.5, -, 0, 2]; A_4 = 2, A_3 = 0.95 * 2, A_1 = 0.5 + 0.95 A_3,
    # A_0 = 0.95 A_1; masked-out position 2 gets 0
    a3 = 0.95 * 2
    a1 = 0.5 + 0.95 * a3
    torch.testing.assert_close(out.advantages_bt[0], torch.tensor([0.95 * a1, a1, 0.0, a3, 2.0]))
    torch.testing.assert_close(out.returns_bt, out.advantages_bt)


def test_critic_loss_clips_a_value_that_moved_too_far():
    values = torch.tensor([[1.0]], requires_grad=True)
    mask = torch.ones(1, 1, dtype=torch.bool)
    s = GaeAdvantage(value_clip=0.2)
    loss = L.critic_loss(
        values, torch.tensor([[0.0]]), torch.tensor([[0.5]]), mask, aggregation_counts(mask), s
    )
    assert loss.item() == pytest.approx(0.5)  # max(1^2, (0.7 - 0)^2) / 2


@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 6), min_size=2, max_size=6),
    split=st.integers(1, 5),
    mode=st.sampled_from(
        ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
    ),
    seed=st.integers(0, 1000),
)
def test_micro_batches_do_not_change_the_update(lengths, split, mode, seed):
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths)
    mask = torch.zeros(len(lengths), width, dtype=torch.bool)
    for i, n in enumerate(lengths):
        mask[i, :n] = True
    base = -torch.rand(len(lengths), width, generator=gen)
    sampler = base - 0.1 * torch.rand(len(lengths), width, generator=gen)
    adv = torch.randn(len(lengths), width, generator=gen)
    s = LossConfig(aggregation=mode, max_tokens=8, kl_coef=0.1)
    ref = base - 0.2
    total = aggregation_counts(mask)

    def grad(parts):
        logp = base.clone().requires_grad_()
        summed = torch.zeros(())
        for rows in parts:
            loss, _ = L.policy_loss(
                logp[rows], base[rows], sampler[rows], adv[rows], mask[rows], total, s, ref[rows]
            )
            loss.backward()
            summed = summed + loss.detach()
        return summed, logp.grad

    whole_loss, whole_grad = grad([list(range(len(lengths)))])
    rows = list(range(len(lengths)))
    parts = [rows[i : i + split] for i in range(0, len(rows), split)]
    part_loss, part_grad = grad(parts)
    torch.testing.assert_close(part_loss, whole_loss)
    torch.testing.assert_close(part_grad, whole_grad)
