"""Benchmarks of the hot `cuda_agent.rl_core` functions at realistic sizes (pytest-benchmark).

CPU (always):
    python -m pytest benchmarks/rl_core -p no:cacheprovider --benchmark-enable \
        --benchmark-json=benchmarks/results/DATE-cpu-rl_core.json -o addopts="" -m "not gpu"
GPU (marker `gpu`, skipped without CUDA by the root conftest):
    PYTHONPATH=packages/rl_core/src python -m pytest benchmarks/rl_core -p no:cacheprovider \
        --benchmark-enable --benchmark-json=benchmarks/results/DATE-h200-rl_core.json \
        -o addopts="" -m gpu

Token-level functions run on 1024 sequences x 8192 tokens (a CUDA Agent batch of long agent
turns) on both devices; entropy runs on 8 x 1024 tokens x 49152 vocabulary (float32) on the
CPU and 16 x 4096 tokens x 151936 vocabulary (bf16, a Qwen-size vocabulary) on the GPU. GPU
timings synchronise the device after each call; CPU timings use one thread (see CPU_THREADS).
"""

from collections.abc import Callable
from typing import Any

import pytest
import torch

import cuda_agent.rl_core as rl

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]
ROUNDS = {"cpu": 5, "cuda": 30}
# One thread: on a shared machine, an OpenMP thread that loses its core stalls every parallel
# op at its barrier (the scan in GAE went from 0.15 s to 3 s with a busy neighbour).
CPU_THREADS = 1
BATCH, TOKENS = 1024, 8192
GROUP_SIZE = 16
ENTROPY_SHAPES = {  # (batch, tokens, vocab, dtype, chunk_size)
    "cpu": (8, 1024, 49152, torch.float32, 1024),
    "cuda": (16, 4096, 151936, torch.bfloat16, 8192),
}


def token_batch(device: str) -> dict[str, torch.Tensor]:
    """Log-probs, masks, rewards and values of `BATCH x TOKENS`, float32, fixed seed."""
    g = torch.Generator(device=device).manual_seed(0)
    shape = (BATCH, TOKENS)
    logprobs = -3 * torch.rand(shape, generator=g, device=device)
    lengths = torch.randint(TOKENS // 8, TOKENS + 1, (BATCH, 1), generator=g, device=device)
    mask = torch.arange(TOKENS, device=device) < lengths  # ragged answers, right padding
    rewards = torch.zeros(shape, device=device)
    rewards.scatter_(1, lengths - 1, torch.randn((BATCH, 1), generator=g, device=device))
    return {
        "logprobs": logprobs,
        "old": logprobs + 0.05 * torch.randn(shape, generator=g, device=device),
        "sampler": logprobs + 0.01 * torch.randn(shape, generator=g, device=device),
        "advantages": torch.randn((BATCH, 1), generator=g, device=device),
        "mask": mask,
        "rewards": rewards,
        "values": torch.randn(shape, generator=g, device=device),
    }


def run(benchmark: Any, device: str, fn: Callable[[], Any], **info: Any) -> None:
    """Time `fn` (device-synchronised) and record what was timed in the JSON's extra_info."""

    def call() -> None:
        fn()
        if device == "cuda":
            torch.cuda.synchronize()

    previous_threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(CPU_THREADS)
    try:
        benchmark.extra_info.update(
            device=torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
            torch=torch.__version__,
            threads=torch.get_num_threads(),
            **info,
        )
        benchmark.pedantic(call, rounds=ROUNDS[device], iterations=1, warmup_rounds=1)
    finally:
        torch.set_num_threads(previous_threads)


@pytest.fixture(scope="module", params=DEVICES)
def data(request: pytest.FixtureRequest) -> tuple[str, dict[str, torch.Tensor]]:
    device = request.param
    return device, token_batch(device)


def test_group_normalized_advantages(benchmark: Any, data: Any) -> None:
    device, _ = data
    rewards_gn = torch.randn(BATCH // GROUP_SIZE, GROUP_SIZE, device=device)
    run(
        benchmark,
        device,
        lambda: rl.group_normalized_advantages(rewards_gn),
        shape=list(rewards_gn.shape),
    )


def test_gae_advantages(benchmark: Any, data: Any) -> None:
    device, x = data
    run(
        benchmark,
        device,
        lambda: rl.gae_advantages(
            x["rewards"], x["values"], gamma=1.0, lam=0.95, mask_bt=x["mask"]
        ),
        shape=[BATCH, TOKENS],
    )


def test_ppo_loss_forward_backward(benchmark: Any, data: Any) -> None:
    device, x = data
    logprobs = x["logprobs"].clone().requires_grad_(True)

    def step() -> torch.Tensor:
        loss_bt = rl.ppo_clipped_policy_loss(logprobs, x["old"], x["advantages"])
        (grad,) = torch.autograd.grad(rl.masked_token_mean(loss_bt, x["mask"]), logprobs)
        return grad

    run(benchmark, device, step, shape=[BATCH, TOKENS], what="loss + token-mean, fwd + bwd")


def test_gspo_loss_forward_backward(benchmark: Any, data: Any) -> None:
    device, x = data
    logprobs = x["logprobs"].clone().requires_grad_(True)

    def step() -> torch.Tensor:
        loss_bt = rl.gspo_policy_loss(logprobs, x["old"], x["advantages"], x["mask"])
        loss = rl.masked_seq_mean_token_mean(loss_bt, x["mask"])
        (grad,) = torch.autograd.grad(loss, logprobs)
        return grad

    run(benchmark, device, step, shape=[BATCH, TOKENS], what="loss + seq-mean, fwd + bwd")


def test_kl_k3(benchmark: Any, data: Any) -> None:
    device, x = data
    run(
        benchmark,
        device,
        lambda: rl.kl_k3(x["logprobs"], x["old"], clamp=10.0),
        shape=[BATCH, TOKENS],
    )


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_aggregation(benchmark: Any, data: Any, mode: str) -> None:
    device, x = data
    run(
        benchmark,
        device,
        lambda: rl.aggregate_loss(x["values"], x["mask"], mode),  # type: ignore[arg-type]
        shape=[BATCH, TOKENS],
    )


def test_truncated_importance_weights(benchmark: Any, data: Any) -> None:
    device, x = data
    run(
        benchmark,
        device,
        lambda: rl.truncated_importance_weights(x["old"], x["sampler"], x["mask"]),
        shape=[BATCH, TOKENS],
    )


@pytest.mark.parametrize("device", DEVICES)
def test_entropy_from_logits_chunked(benchmark: Any, device: str) -> None:
    batch, tokens, vocab, dtype, chunk_size = ENTROPY_SHAPES[device]
    g = torch.Generator(device=device).manual_seed(0)
    logits = torch.randn((batch, tokens, vocab), generator=g, device=device).to(dtype)

    def entropy() -> torch.Tensor:
        with torch.no_grad():
            return rl.entropy_from_logits(logits, chunk_size=chunk_size)

    run(
        benchmark,
        device,
        entropy,
        shape=[batch, tokens, vocab],
        dtype=str(dtype),
        chunk_size=chunk_size,
    )
