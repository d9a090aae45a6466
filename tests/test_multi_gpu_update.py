"""The update on several processes (torchrun, gloo, the CPU): shares of unequal size and a
bound tripped on one process's share only. What a user of `torchrun ... cuda-agent` needs:
no process waits for ever in another's collectives, every process skips together, and the
update (and a supervised step) is the one a single process makes on the whole batch
(`runner/trainer/collective.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "dist_update_worker.py"


def _run(tmp_path: Path, world: int, mode: str) -> dict:
    out = tmp_path / f"{mode}_{world}.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node", str(world), str(WORKER), str(out), mode]  # fmt: skip
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["shard", "replica"])
def test_two_processes_with_unequal_shares_make_the_one_process_update(
    tmp_path: Path, mode: str
) -> None:
    one, two = _run(tmp_path, 1, mode), _run(tmp_path, 2, mode)
    assert two["world"] == 2 and one["world"] == 1
    assert two["free"]["updates"] == one["free"]["updates"] == 1
    # The whole batch's gradient: the token mean over all six episodes, not the mean of
    # the two shares' means (4 and 2 episodes, of different lengths).
    assert two["free"]["grad_norm"] == pytest.approx(one["free"]["grad_norm"], rel=1e-4)
    assert one["weights"].keys() == two["weights"].keys() and one["weights"]
    for name, values in one["weights"].items():
        assert two["weights"][name] == pytest.approx(values, abs=1e-5), name
    # The supervised step (warm start, rft) too: one token mean over both shares.
    assert two["supervised"]["tokens"] == one["supervised"]["tokens"]
    assert two["supervised"]["nll"] == pytest.approx(one["supervised"]["nll"], rel=1e-4)
    assert two["supervised"]["grad_norm"] == pytest.approx(one["supervised"]["grad_norm"], rel=1e-4)
    for name, values in one["sft_weights"].items():
        assert two["sft_weights"][name] == pytest.approx(values, abs=1e-5), name
    # Process 1's share alone was out of bounds: both skipped (and neither hung).
    assert two["guarded"]["updates"] == 0 and two["guarded"]["skipped_updates"] == 1
    assert "another process" in two["guarded"]["skip_reasons"][0]
    assert one["guarded"]["updates"] == 1  # one process, no shift: nothing out of bounds
    # Two passes over the batch (--ppo-epochs 2): the passes line up across the processes.
    assert two["epochs"]["updates"] == one["epochs"]["updates"] == 2
    assert two["epochs"]["clip_fraction"] > 0 and one["epochs"]["clip_fraction"] > 0  # (own share)
    for name, values in one["epochs_weights"].items():
        assert two["epochs_weights"][name] == pytest.approx(values, abs=1e-5), name
