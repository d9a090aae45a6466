"""Policy throughput: sampling and training tokens per second, against plain ``generate``.

    python benchmarks/policy/throughput.py OUT.json --model smollm2 --device cpu \\
        --batch 8 --prompt-tokens 32 --new-tokens 64 --train-batch 8 --train-tokens 256
    python benchmarks/policy/throughput.py OUT.json --model qwen2.5-0.5b --device cuda \\
        --batch 64 --prompt-tokens 128 --new-tokens 1024 --train-batch 64 --train-tokens 4096

Models: ``smollm2`` is the embedded SmolLM2-135M-Instruct (GGUF, real weights and tokenizer);
``qwen2.5-0.5b`` and ``qwen2.5-7b`` are randomly initialised models of those architectures
(shapes from their published configs) with a numbered tokenizer of the same vocabulary.

Sampling (``--parts generate``): ``batch`` random prompts of ``prompt-tokens``, ``new-tokens``
each, temperature 1, with the policy's LoRA (rank 16) in place. ``plain`` is the model's own
``generate`` with default settings; ``policy`` is ``Policy.generate`` (on CUDA its static-cache
decoding loop, compiled into CUDA graphs), timed on its second call (the first compiles; its
time is reported as ``first_call_s``). Training (``--parts train``): ``token_logprobs`` +
backward + ``PolicyOptimizer`` step over ``train-batch`` sequences of ``train-tokens`` (half
prompt, half response), in micro-batches of ``--micro-batch``, LoRA and full fine-tuning.
Tokens per second, seconds, and peak GPU memory.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from cuda_agent.policy import Policy, PolicyConfig, testing

# From the models' published config.json files.
SHAPES: dict[str, dict[str, Any]] = {
    "qwen2.5-0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
    "qwen2.5-7b": {
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
}


def build(name: str, device: str, lora_rank: int, checkpointing: bool = False) -> Policy:
    config = PolicyConfig(device=device, lora_rank=lora_rank, gradient_checkpointing=checkpointing)
    if name == "smollm2":
        return Policy.load(config)
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = testing.numbered_tokenizer(SHAPES[name]["vocab_size"])
    shape = {**SHAPES[name], "max_position_embeddings": 32768, "rope_theta": 1e6}
    qwen = Qwen2Config(
        **shape,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    with torch.device(device):
        model = Qwen2ForCausalLM(qwen).to(dtype)
    return Policy.from_model(model, tokenizer, config)


def _sync(policy: Policy) -> None:
    if policy.device.type == "cuda":
        torch.cuda.synchronize(policy.device)


def _peak_gb(policy: Policy) -> float | None:
    if policy.device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(policy.device) / 2**30


def _reset_peak(policy: Policy) -> None:
    if policy.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(policy.device)


def _prompts(policy: Policy, batch: int, length: int, seed: int) -> list[list[int]]:
    special = {int(policy.tokenizer.eos_token_id), int(policy.tokenizer.pad_token_id)}
    gen = torch.Generator().manual_seed(seed)
    high = int(policy._hf_model.config.vocab_size)
    rows = torch.randint(3, high, (batch, length), generator=gen).tolist()
    return [[t if t not in special else 3 for t in row] for row in rows]


def bench_generate(policy: Policy, args: argparse.Namespace) -> dict[str, Any]:
    prompts = _prompts(policy, args.batch, args.prompt_tokens, 0)
    ids = torch.tensor(prompts, device=policy.device)
    out: dict[str, Any] = {}
    if not args.skip_plain:
        _reset_peak(policy)
        _sync(policy)
        t0 = time.perf_counter()
        with torch.no_grad():
            seq = policy._hf_model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=args.plain_new_tokens or args.new_tokens,
                do_sample=True,
            )
        _sync(policy)
        seconds = time.perf_counter() - t0
        new = (seq.shape[1] - ids.shape[1]) * seq.shape[0]
        out["plain"] = {
            "new_tokens": new,
            "seconds": seconds,
            "tokens_per_s": new / seconds,
            "peak_gb": _peak_gb(policy),
        }
        print("plain generate", out["plain"], flush=True)
    t0 = time.perf_counter()
    policy.generate(prompts, max_new_tokens=args.new_tokens, seed=1)
    _sync(policy)
    first = time.perf_counter() - t0
    _reset_peak(policy)
    t0 = time.perf_counter()
    samples = policy.generate(prompts, max_new_tokens=args.new_tokens, seed=2)
    _sync(policy)
    seconds = time.perf_counter() - t0
    new = len(samples) * max(len(g[0].response_ids) for g in samples)
    out["policy"] = {
        "kv_cache": policy.config.kv_cache,
        "new_tokens": new,
        "seconds": seconds,
        "first_call_s": first,
        "tokens_per_s": new / seconds,
        "peak_gb": _peak_gb(policy),
    }
    print("policy generate", out["policy"], flush=True)
    if "plain" in out:
        out["speedup"] = out["policy"]["tokens_per_s"] / out["plain"]["tokens_per_s"]
    return out


def profile_generate(policy: Policy, args: argparse.Namespace, out: Path) -> None:
    """Where a decoding step's time goes: ``--profile-tokens`` steps of ``Policy.generate``
    (after the warm-up call of bench_generate, so no compilation) under the torch profiler;
    the top operators by device and by host time go to ``out``."""
    from torch.profiler import ProfilerActivity, profile

    prompts = _prompts(policy, args.batch, args.prompt_tokens, 0)
    activities = [ProfilerActivity.CPU]
    if policy.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        policy.generate(prompts, max_new_tokens=args.profile_tokens, seed=3)
        _sync(policy)
    table = prof.key_averages()
    by_device = table.table(sort_by="self_device_time_total", row_limit=25)
    by_host = table.table(sort_by="self_cpu_time_total", row_limit=25)
    out.write_text(f"{args.profile_tokens} new tokens\n\nby device time\n{by_device}\n\n"
                   f"by host time\n{by_host}\n")  # fmt: skip


def bench_train(policy: Policy, args: argparse.Namespace) -> dict[str, Any]:
    half = args.train_tokens // 2
    prompts = _prompts(policy, args.train_batch, half, 3)
    responses = _prompts(policy, args.train_batch, args.train_tokens - half, 4)
    optimizer = policy.optimizer(lr=1e-5)
    policy.train()

    def step() -> None:
        for i in range(0, args.train_batch, args.micro_batch):
            out = policy.token_logprobs(
                prompts[i : i + args.micro_batch], responses[i : i + args.micro_batch]
            )
            optimizer.backward(-(out.logprobs * out.mask).sum() / args.train_batch)
        optimizer.step()

    step()  # warm-up (allocator, kernels)
    _sync(policy)
    _reset_peak(policy)
    t0 = time.perf_counter()
    step()
    _sync(policy)
    seconds = time.perf_counter() - t0
    tokens = args.train_batch * args.train_tokens
    return {
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "peak_gb": _peak_gb(policy),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--model", default="smollm2", choices=["smollm2", *SHAPES])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--parts", default="generate,train")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument(
        "--plain-new-tokens", type=int, default=0, help="fewer for plain generate (tokens/s)"
    )
    parser.add_argument("--skip-plain", action="store_true")
    parser.add_argument("--train-batch", type=int, default=8)
    parser.add_argument("--train-tokens", type=int, default=256)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--checkpointing", action="store_true", help="activation checkpointing")
    parser.add_argument(
        "--profile", default="", help="after the sampling part, profile one more call into FILE"
    )
    parser.add_argument("--profile-tokens", type=int, default=64)
    parser.add_argument("--lora-rank", type=int, default=16, help="for sampling; 0: no adapter")
    args = parser.parse_args()
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    report: dict[str, Any] = {
        "benchmark": "policy_throughput",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python benchmarks/policy/throughput.py OUT.json "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out"),
        "machine": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor(),
        "torch": torch.__version__,
    }
    parts = args.parts.split(",")

    def save() -> None:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")

    if "generate" in parts:
        policy = build(args.model, device, args.lora_rank)
        report["generate"] = bench_generate(policy, args)
        save()
        if args.profile:
            profile_generate(policy, args, Path(args.profile))
        del policy
    if "train" in parts:
        for rank in (16, 0):
            key = "train_lora" if rank else "train_full"
            policy = build(args.model, device, rank, args.checkpointing)
            report[key] = bench_train(policy, args)
            del policy
            print(key, report[key], flush=True)
            save()


if __name__ == "__main__":
    main()
