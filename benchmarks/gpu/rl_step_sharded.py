"""Issue 19: one RL step with the policy sharded over the GPUs of one host (FSDP2).

    torchrun --nproc-per-node 2 benchmarks/gpu/rl_step_sharded.py OUT.json --model qwen2.5-7b
    torchrun --nproc-per-node 2 benchmarks/gpu/rl_step_sharded.py OUT.json --model tiny \\
        --prompts 2 --samples 2 --prompt-tokens 8 --new-tokens 8 --micro-batch 2 --steps 1
                                                              # a CPU smoke run (gloo)

The ``multi-gpu`` preset's shape: a randomly initialised Qwen2.5-7B (its published config,
``benchmarks/policy/throughput.py``; a numbered tokenizer of its vocabulary), bf16 on CUDA
(fp32 on the CPU), LoRA rank 32 / alpha 64, micro-batches of 8. Every process builds the same
model (same seed) on its own GPU and shards it (``Policy.shard()``; ``--no-shard`` keeps a whole
replica per process instead, the gradients averaged by ``PolicyOptimizer``). One step, as in
``rl_step_throughput.py`` (issue 17): each process samples its share of the ``prompts`` x
``samples`` sequences (``Policy.generate``; prompts ``rank::world``), scores them with a cheap
reward, collates them (``cuda_agent.agent.collate``) and takes part in one update
(``runner.trainer.update.update``, GRPO). The first step is not timed: on CUDA an unsharded policy
compiles its decoding loop there (it needs the timed steps' shapes, so ``--warm-new-tokens``
must stay at ``--new-tokens``); a sharded one compiles nothing (transformers' ``generate``), so
a short first step (``--warm-new-tokens 16``) only warms the kernels and the collectives.

Reported: tokens (prompt + completion) per second over all processes (their tokens summed, over
the slowest process's step time), the step's split (sampling, score and collate, update; each
the slowest process's), and each process's peak GPU memory. Process 0 writes OUT.json.

The update's stability guards are off here (``guard_max_ratio`` = inf, ``guard_min_ess`` = 0):
each process decides them on its own share, and a process that skips its update while another
steps would wait forever in the other's collectives. Whether the default guards would have
skipped is recorded per process (``default_guards_would_skip``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from provenance import provenance  # noqa: E402
from rl_step_throughput import SHAPES, build_model, cheap_reward, prompt_ids  # noqa: E402

from cuda_agent.runner.distributed import leave  # noqa: E402

DEFAULT_GUARDS = {"guard_max_ratio": 20.0, "guard_min_ess": 0.2}  # TrainConfig's defaults


def init_processes(gpu: bool) -> tuple[int, int, str]:
    """The process group from torchrun's environment (one process without torchrun):
    NCCL on the GPUs, one each; gloo on the CPU."""
    from accelerate import Accelerator

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if gpu:
        torch.cuda.set_device(local)
    Accelerator(cpu=not gpu)  # PolicyOptimizer steps through accelerate's state
    if not dist.is_initialized():  # accelerate leaves a one-process run without a group
        if "MASTER_ADDR" not in os.environ:
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29511", RANK="0")
            os.environ.update(WORLD_SIZE="1")
        dist.init_process_group("nccl" if gpu else "gloo")
    return dist.get_rank(), dist.get_world_size(), f"cuda:{local}" if gpu else "cpu"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--model", default="qwen2.5-7b", choices=sorted(SHAPES))
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--no-shard", action="store_true", help="a whole replica per process")
    parser.add_argument("--prompts", type=int, default=8, help="over all processes")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--lora-rank", type=int, default=32)
    parser.add_argument("--lora-alpha", type=int, default=64)
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument("--steps", type=int, default=2, help="timed steps after the first")
    parser.add_argument(
        "--warm-new-tokens", type=int, default=0, help="the untimed first step's (0: --new-tokens)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    gpu = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    rank, world, device = init_processes(gpu)
    if args.prompts % world:
        # Unequal shares give the processes different numbers of micro-batches, and so
        # different numbers of collectives: they would wait for each other forever.
        raise SystemExit(f"--prompts ({args.prompts}) must be a multiple of the {world} processes")

    from cuda_agent.agent import collate
    from cuda_agent.agent.episode import Episode, Turn
    from cuda_agent.policy import Policy, PolicyConfig
    from cuda_agent.runner.config import TrainConfig
    from cuda_agent.runner.trainer.update import update

    t_build = time.perf_counter()
    model, tokenizer = build_model(args.model, device, args.seed)  # the same in every process
    config = PolicyConfig(
        device=device,
        lora_rank=args.lora_rank,
        lora_alpha=args.lora_alpha,
        gradient_checkpointing=args.checkpointing,
    )
    policy = Policy.from_model(model, tokenizer, config)
    if not args.no_shard:
        policy.shard()
    optimizer = policy.optimizer(lr=1e-6)
    build_s = time.perf_counter() - t_build
    train = TrainConfig(
        micro_batch=args.micro_batch,
        lora_rank=args.lora_rank,
        lora_alpha=args.lora_alpha,
        max_new_tokens=args.new_tokens,
        guard_max_ratio=float("inf"),
        guard_min_ess=0.0,
    )
    vocab = SHAPES[args.model]["vocab_size"]

    def sync() -> None:
        if gpu:
            torch.cuda.synchronize()

    def step(k: int, new_tokens: int) -> dict[str, Any]:
        prompts = prompt_ids(vocab, args.prompts, args.prompt_tokens, args.seed + k)[rank::world]
        sync()
        dist.barrier()
        t0 = time.perf_counter()
        groups = policy.generate(
            prompts,
            n=args.samples,
            max_new_tokens=new_tokens,
            temperature=1.0,
            seed=k * world + rank,
        )
        sync()
        t1 = time.perf_counter()
        episodes = []
        for g, samples in enumerate(groups):
            for s in samples:
                turn = Turn(0, tuple(s.prompt_ids), tuple(s.response_ids),
                            tuple(float(x) for x in s.sampler_logprobs), "", s.finish_reason,
                            None, None, cheap_reward(list(s.response_ids)), "")  # fmt: skip
                episodes.append(Episode(f"r{rank}p{g}", g, "full", (turn,), "max_turns"))
        batch = collate(episodes)
        t2 = time.perf_counter()
        record = update(policy, optimizer, batch, train.update_config(), log=lambda _m: None)
        sync()
        t3 = time.perf_counter()
        return {
            "seconds": t3 - t0,
            "split_s": {"sample": t1 - t0, "score_and_collate": t2 - t1, "update": t3 - t2},
            "sequences": sum(len(g) for g in groups),
            "tokens": sum(len(s.prompt_ids) + len(s.response_ids) for g in groups for s in g),
            "completion_tokens": sum(len(s.response_ids) for g in groups for s in g),
            "updates": record["updates"],
            "grad_norm": record["grad_norm"],
            "default_guards_would_skip": bool(
                record.get("ratio_max", 0.0) > DEFAULT_GUARDS["guard_max_ratio"]
                or record.get("ratio_ess", 1.0) < DEFAULT_GUARDS["guard_min_ess"]
            ),
            "ratio_max": record.get("ratio_max"),
            "ratio_ess": record.get("ratio_ess"),
        }

    first = step(0, args.warm_new_tokens or args.new_tokens)
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    timed = [step(k, args.new_tokens) for k in range(1, args.steps + 1)]
    mine = {
        "rank": rank,
        "device": torch.cuda.get_device_name(device) if gpu else "cpu",
        "build_s": build_s,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if gpu else None,
        "first_step": first,
        "steps": timed,
    }
    ranks: list[Any] = [None] * world
    dist.all_gather_object(ranks, mine)
    if rank == 0:
        report = summary(ranks, args, world, gpu)
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        brief = {k: report[k] for k in ("tokens_per_s", "step_s", "split_s", "peak_gib_per_rank")}
        print(f"wrote {args.out}: {json.dumps(brief)}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    leave(0)  # every rank's work is written: past the teardown that can abort (its docstring)


def summary(
    ranks: list[dict[str, Any]], args: argparse.Namespace, world: int, gpu: bool
) -> dict[str, Any]:
    """Over all processes: tokens summed, times of the slowest process, step by step."""
    steps = []
    for k in range(len(ranks[0]["steps"])):
        per_rank = [r["steps"][k] for r in ranks]
        seconds = max(s["seconds"] for s in per_rank)
        tokens = sum(s["tokens"] for s in per_rank)
        steps.append(
            {
                "seconds": seconds,
                "tokens": tokens,
                "tokens_per_s": tokens / seconds,
                "split_s": {
                    part: max(s["split_s"][part] for s in per_rank)
                    for part in per_rank[0]["split_s"]
                },
            }
        )
    seconds = sum(s["seconds"] for s in steps)
    flags = " ".join(
        f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
        for k, v in vars(args).items()
        if k != "out" and v is not False
    )
    return {
        **provenance(
            "rl_step_sharded",
            f"torchrun --nproc-per-node {world} benchmarks/gpu/rl_step_sharded.py OUT.json {flags}",
            world if gpu else 0,
        ),
        "processes": world,
        "sharded": not args.no_shard,
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "tokens_per_s": sum(s["tokens"] for s in steps) / seconds,
        "step_s": seconds / len(steps),
        "split_s": {
            part: sum(s["split_s"][part] for s in steps) / len(steps)
            for part in steps[0]["split_s"]
        },
        "peak_gib_per_rank": [r["peak_gib"] for r in ranks],
        "steps": steps,
        "ranks": ranks,
    }


if __name__ == "__main__":
    main()
