"""Sampling on the CPU: the static decoder's lean economies on, against off.

    python benchmarks/policy/cpu_decoding.py OUT.json [--rounds 2] [--new-tokens 768]

The CPU default run's held-out evaluation as it samples it: the embedded SmolLM2-135M with a
rank-16 adapter, the twelve held-out tasks of ``cuda-agent train``'s default
(``heldout-ops+heldout-compositions:6``), their chat prompts for the C backend, one greedy
batch of ``--new-tokens``. The adapter's B matrices are drawn (0.02 x normal), as after
training (at initialisation they are zero and the adapter adds nothing).

Uncompiled, ``StaticDecoder.lean`` folds the adapters into copies of the weights for each
call, lets ended rows leave the batch, and reads only the cache slots written so far;
``plain`` runs the same decoder with ``lean`` off. The two alternate (lean, plain, plain,
lean, ...) so that a drift of the machine hits both. Reported: seconds of each call, the
new tokens, the rows that left early, and whether both made the same tokens.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
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
    parser.add_argument("--rounds", type=int, default=2, help="pairs of calls")
    parser.add_argument("--new-tokens", type=int, default=768)
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

    call()  # the decoder and its cache made, the model's first forward
    decoder = policy._decoder
    assert decoder is not None, "the policy did not decode with the static loop"
    runs: dict[str, list[float]] = {"lean": [], "plain": []}
    tokens: dict[str, list[list[int]]] = {}
    for i in range(2 * args.rounds):
        kind = ("lean", "plain", "plain", "lean")[i % 4]
        decoder.lean = kind == "lean"
        dropped = policy.decode_stats()["dropped_rows"]
        seconds, ids = call()
        runs[kind].append(seconds)
        tokens[kind] = ids
        left = policy.decode_stats()["dropped_rows"] - dropped
        print(f"{kind}: {seconds:.1f} s, {sum(map(len, ids))} tokens, {left} rows left early",
              flush=True)  # fmt: skip
    decoder.lean = True

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
        f"--rounds {args.rounds} --new-tokens {args.new_tokens}",
        "tasks": TASKS,
        "rows": len(prompts),
        "prompt_tokens": [len(p) for p in prompts],
        "new_tokens": {k: sum(map(len, v)) for k, v in tokens.items()},
        "longest_answer": max(len(t) for t in tokens["lean"]),
        "same_tokens": tokens["lean"] == tokens["plain"],
        "seconds": runs,
        "median_s": medians,
        "speedup": medians["plain"] / medians["lean"],
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("median_s", "speedup", "same_tokens")}))


if __name__ == "__main__":
    main()
