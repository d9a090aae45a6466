"""What a warm-start step's commit costs the training loop (CPU or GPU).

    python benchmarks/warmstart_commit.py OUT.json [--steps 20] [-- extra train flags]

Runs a warm-start-only `cuda-agent train` (the default preset: the embedded SmolLM2-135M,
LoRA rank 16; `--steps 0`, no other stage, one held-out task evaluated at the end) and reads
from the run: the steps' own seconds (`metrics.jsonl`: the forward, backward and optimizer
step) and the training stages' wall seconds (`state.json`'s `train_seconds`: each step with
its commit, the checkpoint and `state.json`). Their difference per step is what the loop
waits for the commit (`commit_s_per_step`). Before 2026-12-04 the commit wrote the
checkpoint (adapter 19.6 MB, optimizer state 38 MB, tokenizer 3.5 MB) before the next step
started: about 0.33 s of a 0.64 s warm-start step on the H200. Since, the loop takes copies
and a background thread writes them while the next step runs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("extra", nargs="*", help="more train flags (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        flags = [
            "--out", str(run), "--steps", "0", "--rl-warmup-steps", "0", "--rft-tasks", "0",
            "--value-steps", "0", "--warmstart-steps", str(args.steps), "--eval-before",
            "false", "--eval-train", "false", "--eval-after-warmstart", "false", "--eval-limit", "1",
            "--quiet", *args.extra,
        ]  # fmt: skip
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "cuda_agent.runner", "train", *flags],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - started
        records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        steps = [r for r in records if r["stage"] == "warmstart"]
        state = json.loads((run / "state.json").read_text())
        config = json.loads((run / "config.json").read_text())
    step_s = sum(r["seconds"] for r in steps)
    train_s = state["train_seconds"]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    import torch

    report = {
        "benchmark": "warmstart_commit",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": os.environ.get("CUDA_AGENT_COMMIT") or commit,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "command": "python benchmarks/warmstart_commit.py OUT.json " + " ".join(sys.argv[2:]),
        "model": config["model"],
        "lora_rank": config["lora_rank"],
        "steps": len(steps),
        "step_s_per_step": step_s / len(steps),
        "train_s_per_step": train_s / len(steps),
        "commit_s_per_step": (train_s - step_s) / len(steps),
        "wall_s": wall,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
