"""PolicyOptimizer: steps through accelerate; several processes average their gradients."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from cuda_agent.policy import PolicyOptimizer

RESPONSES = [[70, 71, 72, 2], [5, 6], [9, 10, 11], [40, 41]]


def test_a_step_lowers_the_loss_and_reports_the_gradient_norm(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    policy = make_policy()
    opt = policy.optimizer(lr=1e-2, max_grad_norm=1.0)

    def loss() -> torch.Tensor:
        return -policy.token_logprobs(prompts[:2], RESPONSES[:2]).logprobs.sum()

    before = float(loss().detach())
    for _ in range(5):
        opt.backward(loss())
        stats = opt.step()
        assert stats["grad_norm"] > 0 and stats["lr"] == 1e-2
        assert all(p.grad is None for p in policy.trainable_parameters())
    assert float(loss().detach()) < before


def test_micro_batches_accumulate_before_the_step(
    make_policy: Any, prompts: list[list[int]]
) -> None:
    """Two backward calls then one step equal one backward of the summed loss."""
    a, b = make_policy(), make_policy()
    opt_a, opt_b = (
        a.optimizer(lr=1e-2, max_grad_norm=None),
        b.optimizer(lr=1e-2, max_grad_norm=None),
    )
    for i in range(2):
        opt_a.backward(-a.token_logprobs([prompts[i]], [RESPONSES[i]]).logprobs.sum())
    opt_b.backward(-b.token_logprobs(prompts[:2], RESPONSES[:2]).logprobs.sum())
    opt_a.step(), opt_b.step()
    for pa, pb in zip(a.trainable_parameters(), b.trainable_parameters(), strict=True):
        torch.testing.assert_close(pa, pb, atol=1e-6, rtol=1e-5)


def test_bad_settings_and_misuse_are_refused(make_policy: Any) -> None:
    policy = make_policy()
    with pytest.raises(ValueError, match="lr"):
        policy.optimizer(lr=0.0)
    with pytest.raises(ValueError, match="no trainable"):
        PolicyOptimizer([torch.nn.Parameter(torch.ones(2), requires_grad=False)], lr=1e-3)
    with pytest.raises(RuntimeError, match="before any backward"):
        policy.optimizer(lr=1e-3).step()


_WORKER = r"""
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
from cuda_agent.policy import Policy, PolicyConfig, testing
rank, world, out, mode, lora = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6])
device = sys.argv[8] if sys.argv[8] == "cpu" else f"cuda:{rank}"
tok = testing.tiny_tokenizer()
policy = Policy.from_model(testing.tiny_llama(tok, max_position_embeddings=512), tok,
                           PolicyConfig(device=device, dtype="float32", lora_rank=lora,
                                        kv_cache="dynamic"))
if mode == "fsdp":
    from accelerate import Accelerator
    Accelerator(cpu=device == "cpu")  # the process group, from the launcher's environment
    policy.shard()
prompts = [tok(t)["input_ids"] for t in ["Write a CUDA kernel.", "hi", "add", "more please"]]
responses = [[70, 71, 72, 2], [5, 6], [9, 10, 11], [40, 41]]
greedy = [s.response_ids for g in policy.generate(prompts[:2], max_new_tokens=6, temperature=0)
          for s in g]
opt = policy.optimizer(lr=1e-2, max_grad_norm=float(sys.argv[7]) if sys.argv[7] != "none" else None)
share = slice(rank * 4 // world, (rank + 1) * 4 // world)
loss = -policy.token_logprobs(prompts[share], responses[share]).logprobs.sum() * world / 4
opt.backward(loss)
stats = opt.step()
whole = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in policy.trainable_parameters()]
flat = torch.cat([p.detach().reshape(-1) for p in whole])
policy.save(out + ".ckpt")
if mode == "fsdp":  # a process with no share of the batch still takes part in the collectives
    mine = slice(0, 2) if rank == 0 else slice(0, 0)
    scored = policy.token_logprobs(prompts[mine], responses[mine])
    opt.backward(-scored.logprobs.sum())
    opt.step()
    policy.generate(prompts[mine], max_new_tokens=3)
json.dump({"processes": opt.num_processes, "params": flat.tolist(), "greedy": greedy,
           "grad_norm": stats["grad_norm"]}, open(out, "w"))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_workers(
    tmp_path: Path, world: int, mode: str, lora: int, max_norm: str, device: str = "cpu"
) -> list[dict[str, Any]]:
    """`world` real processes of _WORKER (gloo on the CPU, NCCL on GPUs: one each), with the
    environment torchrun / accelerate launch would give them."""
    src = str(Path(__file__).resolve().parents[1] / "src")
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    port, procs, outs = _free_port(), [], []
    for rank in range(world):
        out = tmp_path / f"{mode}_lora{lora}_w{world}_r{rank}.json"
        env = {
            **os.environ,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            "OMP_NUM_THREADS": "1",
        }
        if device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        if world == 1:
            for key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE"):
                env.pop(key)
        cmd = [sys.executable, str(script), src, str(rank), str(world), str(out), mode]
        procs.append(subprocess.Popen([*cmd, str(lora), max_norm, device], env=env))
        outs.append(out)
    for p in procs:
        assert p.wait(timeout=300) == 0
    return [json.loads(o.read_text()) for o in outs]


@pytest.mark.slow
def test_two_processes_step_like_one_process_on_the_whole_batch(tmp_path: Path) -> None:
    """Two processes with half the batch each end with the parameters of one process that
    saw it all."""
    single = _run_workers(tmp_path, 1, "ddp", 4, "none", "cpu")[0]
    pair = _run_workers(tmp_path, 2, "ddp", 4, "none", "cpu")
    assert single["processes"] == 1 and [r["processes"] for r in pair] == [2, 2]
    want = torch.tensor(single["params"])
    for result in pair:
        torch.testing.assert_close(torch.tensor(result["params"]), want, atol=1e-6, rtol=1e-5)


_TWO_GPUS = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two CUDA GPUs"
)


@pytest.mark.parametrize(
    "device",
    [
        pytest.param("cpu", marks=pytest.mark.slow),
        pytest.param("cuda", marks=[pytest.mark.gpu, _TWO_GPUS]),
    ],
)
@pytest.mark.parametrize("lora", [4, 0], ids=["lora", "full"])
def test_sharded_training_steps_like_one_process_on_the_whole_batch(
    tmp_path: Path, lora: int, device: str, make_policy: Any
) -> None:
    """FSDP2 over two processes: the same greedy samples, the same clipped step and gradient
    norm as one unsharded process on the whole batch, and a checkpoint an unsharded policy
    loads. Then a round where one process has nothing to score or sample: it must still take
    part in the collectives, or both processes hang or fail."""
    single = _run_workers(tmp_path, 1, "ddp", lora, "0.5", device)[0]
    pair = _run_workers(tmp_path, 2, "fsdp", lora, "0.5", device)
    assert [r["processes"] for r in pair] == [2, 2]
    assert single["grad_norm"] > 0.5  # so the clipping acted
    want = torch.tensor(single["params"])
    # Adam's first step is lr * g / (|g| + eps): on gradients near eps (full fine-tuning has
    # some), summation order moves it by up to about 1e-5; a wrong step moves it by lr = 1e-2.
    for result in pair:
        assert result["greedy"] == single["greedy"]
        assert result["grad_norm"] == pytest.approx(single["grad_norm"], rel=1e-5)
        torch.testing.assert_close(torch.tensor(result["params"]), want, atol=1e-4, rtol=1e-5)
    restored = make_policy(lora_rank=lora)
    restored.load_adapter(tmp_path / f"fsdp_lora{lora}_w2_r0.json.ckpt")
    flat = torch.cat([p.detach().reshape(-1) for p in restored.trainable_parameters()])
    torch.testing.assert_close(flat, torch.tensor(pair[0]["params"]), atol=1e-6, rtol=1e-6)


def test_shard_needs_a_process_group(make_policy: Any) -> None:
    with pytest.raises(RuntimeError, match="process group"):
        make_policy().shard()


def test_release_memory_is_nothing_on_the_cpu(make_policy: Any) -> None:
    """Off CUDA there is no device allocator to give back: zeros, and the policy works on."""
    policy = make_policy()
    assert policy.release_memory() == {"allocated": 0, "reserved": 0, "released": 0}
    [[sample]] = policy.generate([[1, 5, 9]], n=1, max_new_tokens=2, temperature=0.0)
    assert sample.response_ids
