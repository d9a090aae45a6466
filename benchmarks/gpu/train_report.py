"""Summarise a finished ``cuda-agent train`` run as the figures JSON of benchmarks/gpu/train.sh.

    python benchmarks/gpu/train_report.py RUN_DIR OUT.json --wall-s S [--label default]

Fields: model, gpu, torch, commit, wall_s, mean_reward_before/after, frac_correct_after,
frac_truncated_after, max_new_tokens, per-stage seconds, the RL steps' rewards and truncation.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--wall-s", type=float, required=True)
    parser.add_argument("--label", default="default")
    parser.add_argument("--command", default="")
    args = parser.parse_args()
    summary = json.loads((args.run_dir / "summary.json").read_text())
    config = json.loads((args.run_dir / "config.json").read_text())
    records = [json.loads(x) for x in (args.run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = {r["stage"]: r for r in records if r["stage"].startswith("eval")}
    rl = [r for r in records if r["stage"] == "rl"]
    warm = [r for r in records if r["stage"] == "warmstart"]
    # The device's copy of the tree may carry an older .git: the caller names the commit.
    commit = (
        os.environ.get("CUDA_AGENT_COMMIT")
        or subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    )
    report = {
        "benchmark": f"train_{args.label}",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": args.command,
        "commit": commit or None,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "model": Path(config["model"]).name,
        "max_new_tokens": config["max_new_tokens"],
        "warmstart_solutions": config.get("warmstart_solutions"),
        "wall_s": args.wall_s,
        "mean_reward_before": summary["mean_reward_before"],
        "mean_reward_after": summary["mean_reward_after"],
        "frac_correct_before": summary["frac_correct_before"],
        "frac_correct_after": summary["frac_correct_after"],
        "frac_truncated_before": evals["eval_before"]["frac_truncated"],
        "frac_truncated_after": evals["eval_after"]["frac_truncated"],
        "frac_parsed_after": evals["eval_after"]["frac_parsed"],
        "per_task_after": evals["eval_after"]["per_task"],
        "feedback_after": evals["eval_after"]["feedback"],
        "eval_seconds": {k: v.get("seconds") for k, v in evals.items()},
        "warmstart_last_nll": warm[-1]["nll"] if warm else None,
        "warmstart_s": sum(r["seconds"] for r in warm),
        "rl_steps": [
            {
                k: r[k]
                for k in (
                    "step",
                    "mean_reward",
                    "frac_correct",
                    "frac_truncated",
                    "seconds",
                    "rollout_seconds",
                    "trained_sequences",
                )
            }
            for r in rl
        ],
        "tasks": "the built-in starter suite (trained and evaluated on the same tasks)",
    }
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps({k: report[k] for k in list(report)[:17]}, indent=2))


if __name__ == "__main__":
    main()
