"""Each worker's home directory (its working and temporary files) is removed with the worker:
when the sandbox closes, and when a worker dies or is killed mid-job. Workers are killed, never
asked to exit, so the parent removes what a worker cannot (long runs restart workers often)."""

from __future__ import annotations

import os
from pathlib import Path

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks

CRASHES = """
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

crash = cpu_kernel("void crash(float* out, long n) { *(volatile float*)0 = out[0]; }", "crash")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        crash(out, x.numel())
        return out
"""


def _homes(sandbox: Sandbox) -> list[Path]:
    lanes = sandbox._lanes.lanes
    workers = [w for lane in lanes for w in (lane.candidate, lane.reference)]
    return [Path(w.home) for w in workers if w.home]


def test_homes_go_with_their_workers() -> None:
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    with Sandbox(SandboxConfig(backend="cpu", workers=1, trials=1)) as sandbox:
        assert sandbox.evaluate(relu, relu.solutions["cpu"], measure_time=False).status == "ok"
        before = _homes(sandbox)
        assert before and all(home.is_dir() for home in before)
        assert all(os.access(home, os.W_OK) for home in before)
        crashed = sandbox.evaluate(relu, CRASHES, measure_time=False)
        assert crashed.status == "runtime_error", crashed.message
        gone = [home for home in before if not home.exists()]
        assert gone, "the crashed candidate worker's home is still there"
        # The next job gets a fresh worker, with a fresh home.
        assert sandbox.evaluate(relu, relu.solutions["cpu"], measure_time=False).status == "ok"
        during = _homes(sandbox)
        assert all(home.is_dir() for home in during) and set(during) != set(before)
    assert not [home for home in [*before, *during] if home.exists()]
