"""Issue 19's pool benchmark (`benchmarks/gpu/pool_scaling.py`) on the CPU: one pool per size,
every evaluation ok, and the per-device check of timing intervals, which must be able to fail."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu" / "pool_scaling.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pool_scaling", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _iv(device: str, start: float, end: float) -> dict[str, object]:
    return {"device": device, "start_s": start, "end_s": end}


def test_the_overlap_check_finds_shared_devices_only() -> None:
    overlaps = _module().overlaps
    apart = [_iv("cuda:0", 0, 1), _iv("cuda:1", 0.5, 1.5), _iv("cuda:0", 1, 2)]
    assert overlaps(apart) == []  # touching is not overlapping; other devices do not count
    nested = [_iv("cuda:0", 0, 10), _iv("cuda:0", 1, 2), _iv("cuda:0", 3, 4)]
    found = overlaps(nested)
    assert [(f["first"]["start_s"], f["second"]["start_s"]) for f in found] == [(0, 1), (0, 3)]


def test_slot_i_is_put_on_the_ith_visible_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The device each interval is put on is the one the pool starts the worker with."""
    from cuda_agent.kernel_sandbox import SandboxConfig
    from cuda_agent.kernel_sandbox._parent.pool import Worker

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    original = Worker._env
    with _module().watching("cuda") as log:
        for index in range(3):
            for role in ("candidate", "reference"):
                Worker(SandboxConfig(backend="cuda"), index, role)._env()  # type: ignore[arg-type]
    assert log.devices == {
        ("candidate", "0"): "cuda:3", ("reference", "0"): "cuda:3",
        ("candidate", "1"): "cuda:5", ("reference", "1"): "cuda:5",
        ("candidate", "2"): "cuda:3", ("reference", "2"): "cuda:3",
    }  # fmt: skip
    assert Worker._env is original  # the benchmark's watch is undone


@pytest.mark.slow
def test_pool_scaling_runs_on_the_cpu_with_one_and_two_workers(tmp_path: Path) -> None:
    out = tmp_path / "pool.json"
    tasks = ["relu", "add_mul", "silu"]
    cmd = [sys.executable, str(SCRIPT), str(out), "--backend", "cpu", "--workers", "1,2",
           "--tasks", ",".join(tasks), "--rounds", "2", "--timeout-s", "120"]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    for key in ("date", "machine", "torch", "commit", "command", "backend", "speedup"):
        assert key in report
    assert report["backend"] == "cpu" and set(report["runs"]) == {"1", "2"}
    assert report["all_ok"] and report["no_overlap"]
    assert report["speedup"]["1"] == 1.0 and report["speedup"]["2"] > 0
    for n, run in report["runs"].items():
        assert "error" not in run, run
        assert run["workers"] == int(n) and run["evaluations"] == 2 * len(tasks)
        assert run["statuses"] == {"ok": 2 * len(tasks)} and run["evals_per_min"] > 0
        assert run["devices"] == ["cpu"]  # the host is one device: its lanes share one gate
        timings = [iv for iv in run["intervals"] if iv["what"] == "timing"]
        # One timing phase per evaluation (the warm pass's and the timed passes'), each on
        # the device of the worker that ran it.
        assert len(timings) == 3 * len(tasks) and run["timed_pass_timings"] == 2 * len(tasks)
        assert sorted({iv["task"] for iv in timings}) == sorted(tasks)
        for iv in timings:
            assert iv["device"] == "cpu" and iv["end_s"] > iv["start_s"]
    assert {iv["worker"] for iv in report["runs"]["2"]["intervals"]} == {"0.0", "0.1"}
