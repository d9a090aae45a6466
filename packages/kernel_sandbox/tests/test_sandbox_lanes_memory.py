"""Lanes and GPU memory: a job that ran out of memory beside other lanes runs again with the
device to itself, and its candidate worker may then use the whole device (its share, a quarter
of the GPU with eight lanes, is lifted for that job alone).

On the H200 (2026-12-03) eight lanes judged 4 to 5 of 12 honest training compositions
(GB-sized inputs) ``runtime_error`` while one lane judged all 12 ``ok``: the rerun alone still
ran under the candidate's share, beside the other lanes' reference workers' reserves.
"""

from __future__ import annotations

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.kernel_sandbox._shared.protocol import JobConfig
from cuda_agent.kernel_sandbox._worker import _gpu_share

RELU = next(t for t in builtin_tasks() if t.name == "relu")

OUT_OF_MEMORY_ONCE = """

import os
import pathlib

MARK = pathlib.Path(os.environ["CUDA_AGENT_CACHE"]) / "out-of-memory-once"
_forward = ModelNew.forward


def forward(self, x):
    if not MARK.exists():  # the first run: as if the other lanes held the memory
        MARK.write_text("1")
        raise RuntimeError("CUDA out of memory. Tried to allocate 4.00 GiB")
    return _forward(self, x)


ModelNew.forward = forward
"""


def test_the_rerun_alone_is_told_it_has_the_device_to_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    config = SandboxConfig(
        backend="cpu", lanes_per_gpu=2, static_checks=False, repeats=10, timing_budget_s=0.3
    )
    seen: list[bool] = []
    with Sandbox(config) as sandbox:
        real_run = sandbox._run

        def run(task, job, lane, measure_time, caller_sizes=False):
            seen.append(job.config.device_alone)
            return real_run(task, job, lane, measure_time, caller_sizes)

        monkeypatch.setattr(sandbox, "_run", run)
        result = sandbox.evaluate(RELU, RELU.solutions["cpu"] + OUT_OF_MEMORY_ONCE)
    assert result.status == "ok", result.message
    assert "rerun_alone" in result.extra
    assert seen == [False, True]  # the first run shares the device; the rerun has it alone


def test_device_alone_travels_to_the_worker():
    fields = {name: 0 for name in JobConfig.__dataclass_fields__}
    fields.update(
        backend="cuda",
        device="cuda:0",
        dtype_tolerances={},
        allowed_torch_ops=(),
        task_digest="d",
        distribution="normal",
        compile_baseline=None,
    )
    shared = JobConfig(**fields)
    assert not JobConfig.from_json(shared.to_json()).device_alone
    alone = JobConfig(**{**fields, "device_alone": True})
    assert JobConfig.from_json(alone.to_json()).device_alone


@pytest.mark.parametrize(
    ("role", "lanes", "share"),
    [("candidate", 1, 1.0), ("candidate", 2, 0.5), ("candidate", 8, 0.25), ("reference", 8, 1.0)],
)
def test_only_candidate_workers_beside_other_lanes_are_capped(role, lanes, share):
    assert _gpu_share(role, lanes) == share
