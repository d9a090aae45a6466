"""The RL update's memory (issue 29): a micro-batch's [tokens, vocab] tensors are gone before
the next micro-batch starts, so the update's peak does not grow with the number of
micro-batches, and holding less changes nothing in the update.

The update's entropy is a statistic: it is scored without gradient (``entropy_grad=False``).
Scored with gradient, the backward's recomputation of each checkpointed head chunk rebuilt the
entropy's saved [chunk, vocab] tensors and kept them until the micro-batch's outputs were
dropped, i.e. through the next micro-batch's forward (on the CPU default's RL step: 1 GB).
"""

from __future__ import annotations

import gc
from typing import Any

import torch

from cuda_agent.agent import Episode, Turn, collate
from cuda_agent.policy import Policy, testing
from cuda_agent.runner.trainer.update import update
from cuda_agent.runner.trainer.update_config import GuardConfig, UpdateConfig


def _episodes() -> list[Episode]:
    def turn(index: int, context: tuple[int, ...], response: tuple[int, ...], reward: float):
        logprobs = tuple(-5.0 - 0.1 * i for i in range(len(response)))
        return Turn(index, context, response, logprobs, "", "stop", "c", None, reward, "again")

    first = tuple(range(40, 52))
    return [
        Episode("a", 0, "full", (turn(0, (1, 2, 3), first, 0.0), turn(1, (7, 8), (43, 44, 45), 2.0)), "t"),
        Episode("a", 0, "full", (turn(0, (1, 2, 3), (50, 51, 52, 53, 54), -1.0),), "t"),
        Episode("b", 1, "full", (turn(0, (4, 5), tuple(range(60, 75)), 1.0),), "t"),
        Episode("b", 1, "full", (turn(0, (4, 5), (70, 71), 0.5),), "t"),
    ]  # fmt: skip


SETTINGS = UpdateConfig(micro_batch=1, guard=GuardConfig(max_ratio=1e9, min_ess=0.0))


def _policy() -> Policy:
    policy: Policy = testing.tiny_lora_policy()
    return policy


def _vocab_wide(vocab: int) -> int:
    """Live tensors [n, vocab] (logits, softmax, their gradients), parameters aside."""
    gc.collect()
    return sum(
        1
        for o in gc.get_objects()
        if type(o) is torch.Tensor  # parameters are a subclass
        and o.dim() == 2
        and o.shape[-1] == vocab
    )


def _run(policy: Policy, entropy_grad: bool | None) -> tuple[dict[str, Any], list[int]]:
    """The update on the episodes; the vocabulary-wide tensors alive as each micro-batch's
    forward starts. ``entropy_grad`` forces what the update asks of the policy (None: as is)."""
    vocab = len(policy.tokenizer)
    scored = policy.token_logprobs
    alive: list[int] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        alive.append(_vocab_wide(vocab))
        if entropy_grad is not None:
            kwargs["entropy_grad"] = entropy_grad
        return scored(*args, **kwargs)

    policy.token_logprobs = spy  # type: ignore[method-assign]
    try:
        record = update(policy, policy.optimizer(lr=1e-2), collate(_episodes()), SETTINGS)
    finally:
        del policy.token_logprobs
    return record, alive


def test_no_micro_batch_leaves_vocabulary_wide_tensors_to_the_next() -> None:
    policy = _policy()
    before = _vocab_wide(len(policy.tokenizer))
    record, alive = _run(policy, None)
    assert record["updates"] == 1 and len(alive) == 4  # four rows, one per micro-batch
    assert alive == [before] * 4
    # what the test guards against: the entropy's recomputed tensors outlive the backward
    _, alive_with_grad = _run(_policy(), True)
    assert max(alive_with_grad[1:]) > before


def test_the_entropy_without_gradient_changes_nothing_in_the_update() -> None:
    policy, reference = _policy(), _policy()
    record, _ = _run(policy, None)
    expected, _ = _run(reference, True)
    assert record == expected
    for a, b in zip(policy.trainable_parameters(), reference.trainable_parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
