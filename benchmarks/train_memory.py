"""Resident memory of a `cuda-agent train` run, the trainer apart from its sandbox workers.

    python benchmarks/train_memory.py --out-json mem.json -- --out /tmp/run [train flags...]
    python benchmarks/train_memory.py --in-process --out-json mem.json -- --out /tmp/run ...

Default (subprocess): runs `cuda-agent train` with the flags after `--` as a child, samples
every `--every` seconds the trainer's `VmRSS` and `VmHWM` (its kernel-kept peak resident set,
exact between samples) from `/proc/PID/status`, and the resident set of each of its
descendants (sandbox workers, compile workers); each sample is tagged with the stage the run's
progress last printed. Writes the trainer's `VmHWM` at the end (the run's peak), the stage in
which it last rose, the largest sampled `VmRSS` of each stage (a sample may miss a short
peak: `VmHWM` does not), the peak of the whole tree, and a timeline.

`--in-process`: runs `train` in this process, with each stage function (and, in the RL
stages, the episode collection and the update apart) wrapped to mark where it starts and ends.
At each mark the peak resident set is read and reset (`echo 5 > /proc/self/clear_refs`), so
each part's own peak is exact: `parts` lists them in order (`hwm_mb`, the part's peak;
`rss_start_mb`/`rss_end_mb`, the resident set around it). The run's peak is the largest of
them. The wrapping changes nothing in what the run computes.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

STAGE = re.compile(
    r"\b(baselines|warmstart|rl_warmup|rft|value|rl|\w+_(?:before|warmstart|after))\b"
)


def status_kb(pid: int | str = "self") -> dict[str, int]:
    """VmRSS, VmHWM (and the rest of /proc/PID/status's kB fields) of a process, in KiB."""
    out: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB":
            out[key] = int(parts[0])
    return out


def reset_peak(pid: int | str = "self") -> bool:
    """Reset the kernel's peak resident set (VmHWM) of a process to its current one."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _rss(proc: psutil.Process) -> int:
    try:
        return int(proc.memory_info().rss)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0


def _header(train_args: list[str], program: str = "cuda-agent train") -> dict[str, Any]:
    commit = os.environ.get("CUDA_AGENT_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            ).stdout.strip()
        except OSError:
            commit = ""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, "
        f"{psutil.virtual_memory().total >> 30} GiB",
        "command": " ".join([program, *train_args]),
        "commit": commit,
        "env": {
            k: os.environ[k] for k in ("MALLOC_ARENA_MAX", "OMP_NUM_THREADS") if k in os.environ
        },
    }


def subprocess_run(train_args: list[str], every: float) -> dict[str, Any]:
    command = [sys.executable, "-m", "cuda_agent.runner", "train", *train_args]
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    stage = ["start"]

    def follow() -> None:
        assert child.stdout is not None
        for line in child.stdout:  # universal newlines: tqdm's \r updates are lines too
            sys.stdout.write(line)
            found = STAGE.findall(line)
            if found:
                stage[0] = found[-1]

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    trainer = psutil.Process(child.pid)
    started = time.monotonic()
    timeline = []
    hwm_kb, hwm_stage, hwm_at = 0, "", 0.0
    peak_tree = (0, "", 0.0)
    while child.poll() is None:
        status = status_kb(child.pid)
        try:
            children = trainer.children(recursive=True)
        except psutil.NoSuchProcess:
            break
        at = round(time.monotonic() - started, 1)
        if status.get("VmHWM", 0) > hwm_kb:
            hwm_kb, hwm_stage, hwm_at = status["VmHWM"], stage[0], at
        own = status.get("VmRSS", 0) << 10
        tree = own + sum(_rss(c) for c in children)
        timeline.append(
            {
                "t": at,
                "stage": stage[0],
                "trainer_rss_mb": own >> 20,
                "trainer_hwm_mb": hwm_kb >> 10,
                "tree_mb": tree >> 20,
            }
        )
        if tree > peak_tree[0]:
            peak_tree = (tree, stage[0], at)
        time.sleep(every)
    reader.join(timeout=5)
    by_stage: dict[str, int] = {}
    for sample in timeline:
        name = str(sample["stage"])
        by_stage[name] = max(by_stage.get(name, 0), int(sample["trainer_rss_mb"]))
    return {
        "returncode": child.returncode,
        "wall_s": round(time.monotonic() - started, 1),
        "trainer_vmhwm_kb": hwm_kb,
        "trainer_vmhwm_mb": hwm_kb >> 10,
        "trainer_vmhwm_gb": round(hwm_kb * 1024 / 1e9, 3),
        "trainer_vmhwm_stage": hwm_stage,
        "trainer_vmhwm_at_s": hwm_at,
        "trainer_sampled_rss_peak_mb_by_stage": by_stage,
        "peak_tree_mb": peak_tree[0] >> 20,
        "peak_tree_stage": peak_tree[1],
        "peak_tree_at_s": peak_tree[2],
        "timeline": timeline,
    }


class Parts:
    """Per-part peaks of this process: ``mark(name)`` closes the part under way (its peak read
    from VmHWM) and resets the peak for the next one."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.parts: list[dict[str, Any]] = []
        self.current = "start"
        self.rss_start = status_kb().get("VmRSS", 0)
        self.t_start = 0.0
        reset_peak()

    def mark(self, name: str) -> None:
        status = status_kb()
        at = round(time.monotonic() - self.started, 1)
        self.parts.append(
            {
                "part": self.current,
                "hwm_mb": status.get("VmHWM", 0) >> 10,
                "rss_start_mb": self.rss_start >> 10,
                "rss_end_mb": status.get("VmRSS", 0) >> 10,
                "t_start": self.t_start,
                "t_end": at,
            }
        )
        print(f"[memory] {json.dumps(self.parts[-1])}", file=sys.stderr, flush=True)
        self.current, self.rss_start, self.t_start = name, status.get("VmRSS", 0), at
        reset_peak()

    def wrap(self, owner: Any, attribute: str, name: Callable[..., str]) -> None:
        inner = getattr(owner, attribute)

        @functools.wraps(inner)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            outer = self.current.split(" | ")[0]
            here = name(*args, **kwargs)
            self.mark(here)
            try:
                return inner(*args, **kwargs)
            finally:
                self.mark(f"{outer} | after {here}")

        setattr(owner, attribute, wrapped)


def in_process_run(train_args: list[str]) -> dict[str, Any]:
    from cuda_agent.runner import cli
    from cuda_agent.runner.stages import baselines, evaluation, rft, rl, value, warmstart

    parts = Parts()
    parts.mark("setup")
    parts.wrap(baselines, "run", lambda *a, **k: "baselines")
    parts.wrap(evaluation, "run", lambda ctx, name, tasks: f"eval {name}")
    parts.wrap(warmstart, "run", lambda *a, **k: "warmstart")
    parts.wrap(rft, "run", lambda *a, **k: "rft")
    parts.wrap(value, "run", lambda *a, **k: "value")
    parts.wrap(rl, "run", lambda ctx, stage: stage)
    parts.wrap(rl, "collect_split", lambda *a, **k: f"{parts.current.split(' | ')[0]}: collect")
    parts.wrap(rl, "update", lambda *a, **k: f"{parts.current.split(' | ')[0]}: update")
    started = time.monotonic()
    code = cli.main(["train", *train_args])
    parts.mark("end")
    peak = max(parts.parts, key=lambda p: p["hwm_mb"])
    return {
        "returncode": code,
        "wall_s": round(time.monotonic() - started, 1),
        "trainer_vmhwm_mb": peak["hwm_mb"],
        "trainer_vmhwm_part": peak["part"],
        "parts": parts.parts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--every", type=float, default=0.5, help="seconds between samples")
    parser.add_argument("--in-process", action="store_true", help="per-part peaks (see above)")
    parser.add_argument("--out-json", default="train_memory.json")
    parser.add_argument("train_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    train_args = [a for a in args.train_args if a != "--"]
    record = _header(train_args)
    record["mode"] = "in-process" if args.in_process else "subprocess"
    if args.in_process:
        record.update(in_process_run(train_args))
    else:
        record.update(subprocess_run(train_args, args.every))
    Path(args.out_json).write_text(json.dumps(record, indent=1))
    print(json.dumps({k: v for k, v in record.items() if k != "timeline"}, indent=1))


if __name__ == "__main__":
    main()
