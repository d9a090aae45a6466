"""Resident memory of a `cuda-agent train` run, the trainer apart from its sandbox workers.

    python benchmarks/train_memory.py --out-json mem.json -- --out /tmp/run [train flags...]

Runs `cuda-agent train` with the flags after `--`, samples every `--every` seconds the resident
set of the trainer process and of each of its descendants (sandbox workers, compile workers),
and tags each sample with the stage the run's progress last printed. Writes the peak of the
trainer alone, the peak of the whole tree, the stage each peak fell in, and a timeline.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

STAGE = re.compile(r"\b(baselines|warmstart|rl_warmup|rft|value|rl|eval[\w/-]*)\b")


def _rss(proc: psutil.Process) -> int:
    try:
        return int(proc.memory_info().rss)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("--out-json", default="train_memory.json")
    parser.add_argument("train_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    train_args = [a for a in args.train_args if a != "--"]
    command = [sys.executable, "-m", "cuda_agent.runner", "train", *train_args]
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    stage = ["start"]
    lines: list[str] = []

    def follow() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            sys.stdout.write(line)
            lines.append(line)
            found = STAGE.findall(line)
            if found:
                stage[0] = found[-1]

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    trainer = psutil.Process(child.pid)
    started = time.monotonic()
    timeline = []
    peak_trainer = (0, "", 0.0)
    peak_tree = (0, "", 0.0)
    while child.poll() is None:
        try:
            children = trainer.children(recursive=True)
        except psutil.NoSuchProcess:
            break
        own = _rss(trainer)
        tree = own + sum(_rss(c) for c in children)
        at = round(time.monotonic() - started, 1)
        timeline.append(
            {"t": at, "stage": stage[0], "trainer_mb": own >> 20, "tree_mb": tree >> 20}
        )
        if own > peak_trainer[0]:
            peak_trainer = (own, stage[0], at)
        if tree > peak_tree[0]:
            peak_tree = (tree, stage[0], at)
        time.sleep(args.every)
    reader.join(timeout=5)
    record = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, "
        f"{psutil.virtual_memory().total >> 30} GiB",
        "command": " ".join(["cuda-agent train", *train_args]),
        "commit": os.environ.get("CUDA_AGENT_COMMIT", ""),
        "returncode": child.returncode,
        "wall_s": round(time.monotonic() - started, 1),
        "peak_trainer_mb": peak_trainer[0] >> 20,
        "peak_trainer_stage": peak_trainer[1],
        "peak_trainer_at_s": peak_trainer[2],
        "peak_tree_mb": peak_tree[0] >> 20,
        "peak_tree_stage": peak_tree[1],
        "peak_tree_at_s": peak_tree[2],
        "timeline": timeline,
    }
    Path(args.out_json).write_text(json.dumps(record, indent=1))
    print(json.dumps({k: v for k, v in record.items() if k != "timeline"}, indent=1))


if __name__ == "__main__":
    main()
