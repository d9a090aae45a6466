"""Issue 19's sharded RL step (`benchmarks/gpu/rl_step_sharded.py`) on the CPU: torchrun with
one and two processes over gloo, the policy sharded (FSDP2), a tiny model of the Qwen2 shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu" / "rl_step_sharded.py"
TINY = ["--model", "tiny", "--prompts", "2", "--samples", "2", "--prompt-tokens", "8",
        "--new-tokens", "8", "--micro-batch", "2", "--steps", "1", "--lora-rank", "4"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("world", [1, 2])
def test_a_sharded_rl_step_runs_over_gloo(tmp_path: Path, world: int) -> None:
    out = tmp_path / "rl.json"
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd = [*launcher, "--nproc-per-node", str(world), str(SCRIPT), str(out), *TINY]
    # PYTHONFAULTHANDLER: a rank that aborts prints every thread's Python stack
    env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
        "PYTHONFAULTHANDLER": "1",
    }
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[:2000] + "\n...\n" + done.stderr[-2000:]
    report = json.loads(out.read_text())
    for key in ("date", "machine", "torch", "commit", "command", "split_s", "peak_gib_per_rank"):
        assert key in report
    assert report["processes"] == world and report["sharded"]
    assert f"--nproc-per-node {world}" in report["command"]
    assert report["tokens_per_s"] > 0 and report["step_s"] > 0
    assert set(report["split_s"]) == {"sample", "score_and_collate", "update"}
    assert report["peak_gib_per_rank"] == [None] * world  # no GPU
    assert [r["rank"] for r in report["ranks"]] == list(range(world))
    # Each process sampled its share (2 prompts x 2 samples over the processes), with 8 prompt
    # tokens and 1..8 new ones each, and took part in the one update.
    for rank in report["ranks"]:
        for step in [rank["first_step"], *rank["steps"]]:
            assert step["sequences"] == 4 // world
            assert 9 * step["sequences"] <= step["tokens"] <= 16 * step["sequences"]
            assert step["updates"] == 1 and step["grad_norm"] > 0
    total = sum(r["steps"][0]["tokens"] for r in report["ranks"])
    assert report["steps"][0]["tokens"] == total
