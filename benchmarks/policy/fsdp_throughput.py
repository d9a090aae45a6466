"""Sharded (FSDP2, `Policy.shard()`) training throughput over the GPUs of one host.

    torchrun --nproc-per-node 2 benchmarks/policy/fsdp_throughput.py OUT.json \\
        --model qwen2.5-7b --train-batch 64 --train-tokens 4096 --micro-batch 4 --checkpointing

Each process builds the same randomly initialised model (same seed) on its own GPU, shards it,
and runs `throughput.bench_train` (log-probs + backward + optimizer step) on its share of the
`train-batch` sequences, LoRA (rank 16) then full fine-tuning. Reported: tokens per second over
all processes, and each process's peak GPU memory. Process 0 writes OUT.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
import throughput


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--model", default="qwen2.5-0.5b", choices=list(throughput.SHAPES))
    parser.add_argument("--train-batch", type=int, default=64)
    parser.add_argument("--train-tokens", type=int, default=4096)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--checkpointing", action="store_true")
    args = parser.parse_args()
    from accelerate import Accelerator

    gpu = torch.cuda.is_available()
    Accelerator(cpu=not gpu)  # the process group, from torchrun's environment
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    if gpu:
        torch.cuda.set_device(local)
    device = f"cuda:{local}" if gpu else "cpu"  # the CPU: a smoke run (gloo)
    share = argparse.Namespace(**{**vars(args), "train_batch": args.train_batch // world})
    report: dict[str, Any] = {
        "benchmark": "policy_fsdp_throughput",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": f"torchrun --nproc-per-node {world} benchmarks/policy/fsdp_throughput.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out"),
        "machine": f"{world} x {torch.cuda.get_device_name(local) if gpu else 'CPU'}",
        "torch": torch.__version__,
        "processes": world,
    }
    for lora_rank in (16, 0):
        torch.manual_seed(0)  # the same initial weights in every process
        policy = throughput.build(args.model, device, lora_rank, args.checkpointing).shard()
        result = throughput.bench_train(policy, share)
        peaks = [None] * world
        dist.all_gather_object(peaks, result["peak_gb"])
        key = "train_lora" if lora_rank else "train_full"
        report[key] = {
            "tokens": result["tokens"] * world,
            "seconds": result["seconds"],
            "tokens_per_s": result["tokens"] * world / result["seconds"],
            "peak_gb_per_process": peaks,
        }
        if rank == 0:
            print(key, report[key], flush=True)
            Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        del policy
        if gpu:
            torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
