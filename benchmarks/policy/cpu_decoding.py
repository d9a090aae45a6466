"""Sampling on the CPU: the static decoder's lean economies on, against off.

    python benchmarks/policy/cpu_decoding.py OUT.json [--rounds 2] [--new-tokens 768]
    python benchmarks/policy/cpu_decoding.py OUT.json --kinds lean --rounds 1   # its memory

The CPU default run's held-out evaluation as it samples it: the embedded SmolLM2-135M with a
rank-16 adapter, the twelve held-out tasks of ``cuda-agent train``'s default
(``heldout-ops+heldout-compositions:6``), their chat prompts for the C backend, one greedy
batch of ``--new-tokens``. The adapter's B matrices are drawn (0.02 x normal), as after
training (at initialisation they are zero and the adapter adds nothing).

Uncompiled, ``StaticDecoder.lean`` folds the adapters into copies of the weights for each
call, lets ended rows leave the batch, reads only the cache slots written so far, and takes a
few rows' projections as ``(W x^T)^T``;
``plain`` runs the same decoder with ``lean`` off; ``nofold`` is ``lean`` without the fold
(``StaticDecoder.fold``); ``nonarrow`` is ``lean`` with a few rows' projections taken as
``x W^T`` again (``StaticDecoder.narrow`` off). The kinds alternate (a, b, b, a, ...) so that
a drift of the machine hits each alike. Reported: seconds of each call, the new tokens, the
rows that left early, whether all kinds made the same tokens, and the process's peak resident
set before the timed calls and after them (one kind per run, to read a kind's memory).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import resource
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

from cuda_agent.agent.prompts import build_messages
from cuda_agent.policy import Policy, PolicyConfig
from cuda_agent.runner.task_sets import load_set

TASKS = "heldout-ops+heldout-compositions:6"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=2, help="calls of each kind")
    parser.add_argument("--new-tokens", type=int, default=768)
    parser.add_argument("--kinds", default="lean,plain", help="of lean, plain, nofold, nonarrow")
    args = parser.parse_args()

    policy = Policy.load(PolicyConfig(device="cpu", lora_rank=16))
    generator = torch.Generator().manual_seed(0)
    for name, param in policy.model.named_parameters():
        if "lora_B" in name:
            param.data.copy_(torch.randn(param.shape, generator=generator) * 0.02)
    prompts = [policy.chat_prompt_ids(build_messages(t, "cpu")) for t in load_set(TASKS)]

    def call() -> tuple[float, list[list[int]]]:
        started = time.perf_counter()
        out = policy.generate(prompts, max_new_tokens=args.new_tokens, temperature=0, seed=0)
        return time.perf_counter() - started, [g[0].response_ids for g in out]

    # the decoder made and the model's first forward run, on a call too small to count in
    # the peak memory of the calls after it
    policy.generate(prompts[:1], max_new_tokens=2, temperature=0)
    decoder = policy._decoder
    assert decoder is not None, "the policy did not decode with the static loop"
    kinds = args.kinds.split(",")
    order = kinds + kinds[::-1]
    runs: dict[str, list[float]] = {k: [] for k in kinds}
    tokens: dict[str, list[list[int]]] = {}
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # (kB on Linux)
    for i in range(len(kinds) * args.rounds):
        kind = order[i % len(order)]
        decoder.lean, decoder.fold = kind != "plain", kind != "nofold"
        decoder.narrow = kind != "nonarrow"
        dropped = policy.decode_stats()["dropped_rows"]
        seconds, ids = call()
        runs[kind].append(seconds)
        tokens[kind] = ids
        left = policy.decode_stats()["dropped_rows"] - dropped
        print(f"{kind}: {seconds:.1f} s, {sum(map(len, ids))} tokens, {left} rows left early",
              flush=True)  # fmt: skip
    decoder.lean, decoder.fold, decoder.narrow = True, True, True

    medians = {k: statistics.median(v) for k, v in runs.items()}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()  # fmt: skip
    report: dict[str, Any] = {
        "benchmark": "cpu_decoding",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads",
        "torch": torch.__version__,
        "commit": commit,
        "command": "python benchmarks/policy/cpu_decoding.py OUT.json "
        f"--rounds {args.rounds} --new-tokens {args.new_tokens} --kinds {args.kinds}",
        "tasks": TASKS,
        "rows": len(prompts),
        "prompt_tokens": [len(p) for p in prompts],
        "new_tokens": {k: sum(map(len, v)) for k, v in tokens.items()},
        "longest_answer": max(len(t) for t in tokens[kinds[0]]),
        "same_tokens": all(t == tokens[kinds[0]] for t in tokens.values()),
        "peak_rss_gb_before_calls": peak_before,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        "seconds": runs,
        "median_s": medians,
        "speedup_over_plain": {
            k: medians["plain"] / m for k, m in medians.items() if "plain" in medians
        },
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("median_s", "same_tokens", "peak_rss_gb")}))


if __name__ == "__main__":
    main()
