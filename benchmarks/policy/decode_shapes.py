"""What a training run's sequence of `Policy.generate` calls costs, compiling included.

    python benchmarks/policy/decode_shapes.py OUT.json --device cuda

A run does not sample one shape: greedy evaluations of 6 and 16 tasks, single-turn RL batches
of 6 tasks x 8 samples, multi-turn turns whose batch shrinks while their prompts grow. Each
call here has that shape (the `h200` preset's: a 768-token answer budget, prompts of a few
hundred tokens growing by an answer and its feedback per turn), on the SmolLM2-135M
architecture with random weights and the policy's LoRA (rank 16), bf16. A random model never
writes eos, so every call decodes its whole budget: the tokens per second are a floor.

Reported per call: wall seconds, new tokens, the decoder's counters (`Policy.decode_stats`:
new shapes, the seconds of their first steps, where CUDA compiles and records) and the cache
shape it ran as; in all: the seconds spent, of them on new shapes, and the steady tokens per
second of the calls that compiled nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from cuda_agent.policy import Policy, PolicyConfig, testing

# SmolLM2-135M-Instruct's published config.json.
SMOLLM2 = {
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
    "rope_theta": 100000.0,
    "max_position_embeddings": 8192,
}

# (what the trainer does, tasks, samples per task, prompt tokens, temperature)
CALLS = [
    ("eval held-out", 6, 1, 420, 0.0),
    ("eval training", 16, 1, 450, 0.0),
    ("rl_warmup", 6, 8, 440, 1.0),
    ("rl_warmup", 6, 8, 470, 1.0),
    ("rl turn 1", 6, 8, 450, 1.0),
    ("rl turn 2", 5, 6, 1300, 1.0),
    ("rl turn 3", 3, 4, 2100, 1.0),
    ("eval held-out", 6, 1, 420, 0.0),
]


def build(device: str) -> Policy:
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = testing.numbered_tokenizer(SMOLLM2["vocab_size"])
    config = LlamaConfig(
        **SMOLLM2,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype)
    return Policy.from_model(model, tokenizer, PolicyConfig(device=device, lora_rank=16))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--new-tokens", type=int, default=768)
    parser.add_argument("--scale", type=float, default=1.0, help="prompt lengths times this")
    args = parser.parse_args()
    policy = build(args.device)
    generator = torch.Generator().manual_seed(0)
    calls: list[dict[str, Any]] = []
    started = time.perf_counter()
    for what, tasks, n, prompt_tokens, temperature in CALLS:
        length = max(1, int(prompt_tokens * args.scale))
        prompts = torch.randint(3, SMOLLM2["vocab_size"], (tasks, length), generator=generator)
        before = policy.decode_stats()
        t0 = time.perf_counter()
        out = policy.generate(
            prompts.tolist(), n=n, max_new_tokens=args.new_tokens, temperature=temperature
        )
        seconds = time.perf_counter() - t0
        after = policy.decode_stats()
        new = sum(len(s.response_ids) for group in out for s in group)
        record = {
            "what": what,
            "rows": tasks * n,
            "prompt_tokens": length,
            "temperature": temperature,
            "seconds": round(seconds, 3),
            "new_tokens": new,
            "tokens_per_s": round(new / seconds, 1),
            "cache_shape": list(policy._decoder._cache_shape) if policy._decoder else None,
            **{f"decode_{k}": round(after[k] - before[k], 3) for k in after},
        }
        calls.append(record)
        print(json.dumps(record), flush=True)
    total = time.perf_counter() - started
    steady = [
        c for c in calls if c["decode_new_shapes"] == 0 and c["decode_first_step_seconds"] < 1
    ]
    commit = (
        os.environ.get("CUDA_AGENT_COMMIT")
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    )
    report = {
        "benchmark": "decode_shapes",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU",
        "torch": torch.__version__,
        "commit": commit,
        "command": "python benchmarks/policy/decode_shapes.py OUT.json " + " ".join(sys.argv[2:]),
        "total_s": round(total, 1),
        "new_shape_s": round(sum(c["decode_new_shape_seconds"] for c in calls), 1),
        "first_step_s": round(sum(c["decode_first_step_seconds"] for c in calls), 1),
        "new_shapes": sum(c["decode_new_shapes"] for c in calls),
        "steady_tokens_per_s": round(
            sum(c["new_tokens"] for c in steady) / max(1e-9, sum(c["seconds"] for c in steady)), 1
        ),
        "calls": calls,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "calls"}))


if __name__ == "__main__":
    main()
