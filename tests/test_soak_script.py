"""Issue 30's fault soak (`benchmarks/gpu/soak.py`) on the CPU: its fault kinds reach the
runtime, the exit kind dies inside the timing, and a small soak through the lanes pool gives no
wrong verdict and leaves no process behind."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu" / "soak.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_kind_reaches_the_runtime() -> None:
    """No fault is refused by the static checks: the soak is about runtime faults."""
    from cuda_agent.kernel_sandbox.static_checks import static_findings

    soak = _module()
    assert len(soak.kinds_for("cuda")) >= 8 and len(soak.kinds_for("cpu")) >= 5
    for kind in soak.KINDS:
        assert kind.source.is_file(), kind.name
        assert kind.status in ("runtime_error", "timeout", "ok"), kind.name
        assert static_findings(soak.kind_source(kind, 14)) == [], kind.name
    assert [k.name for k in soak.kinds_for("cpu", "segfault,python_hang")] == [
        "segfault",
        "python_hang",
    ]
    with pytest.raises(SystemExit):
        soak.kinds_for("cpu", "device_trap")  # a CUDA kind


@pytest.mark.slow
def test_exit_mid_timing_dies_inside_the_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's trace: every correctness section was done, the timing never ended."""
    from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
    from cuda_agent.kernel_sandbox._shared.trace import ENV, read_spans

    soak = _module()
    monkeypatch.setenv(ENV, str(tmp_path))
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    kind = next(k for k in soak.KINDS if k.name == "exit_mid_timing")
    config = SandboxConfig(backend="cpu", lanes_per_gpu=1, time_compile=False)
    with Sandbox(config) as sandbox:
        at = soak.exit_call(relu, sandbox.config, "cpu")
        result = sandbox.evaluate(relu, soak.kind_source(kind, at))
    assert result.status == "runtime_error" and "exited with code 3" in result.message
    kinds = [s.kind for s in read_spans(tmp_path) if s.role == "candidate"]
    assert "profile" in kinds and "timing" not in kinds  # past the checks, died while timed
    assert kinds.count("check") == sandbox.config.trials + 2  # + heavy tails, + in place


@pytest.mark.slow
def test_soak_runs_on_the_cpu_with_no_wrong_verdict_and_no_leak(tmp_path: Path) -> None:
    kinds = "segfault,exit_mid_timing,host_oom,python_hang"
    cmd = [sys.executable, str(SCRIPT), str(tmp_path), "--backend", "cpu", "--faulty", "4",
           "--honest", "2", "--tasks", "relu", "--kinds", kinds, "--deadline", "15"]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "soak.json").read_text())
    for key in ("faulty", "honest", "kinds", "wrong_verdicts", "leaked_processes",
                "gpu_mem_idle_before_mb", "gpu_mem_idle_after_mb", "evaluations_per_minute",
                "gpu", "torch", "commit", "command"):  # fmt: skip
        assert key in report, key
    assert report["complete"] and not report["stuck"]
    assert report["faulty"] == 4 and report["honest"] == 2
    assert report["kinds"] == sorted(kinds.split(","))
    assert report["wrong_verdicts"] == 0, report["wrong_verdict_examples"]
    assert report["unexpected_messages"] == 0, report["unexpected_message_examples"]
    assert report["leaked_processes"] == 0, report["leaked_examples"]
    assert report["evaluations_per_minute"] > 0
    assert report["gpu_mem_idle_before_mb"] is None  # no GPU here
    rows = [json.loads(line) for line in (tmp_path / "soak_jobs.jsonl").read_text().splitlines()]
    assert sorted(r["index"] for r in rows) == list(range(6))  # in the order verdicts came
    # the lanes' restarts after faults, as the jobs that waited for them said
    assert report["worker_starts"] == sum(bool(r["worker_start_s"]) for r in rows)
    assert report["worker_start"] == "fork"  # auto, on the CPU backend

    # A run cut with some verdicts in (not a prefix: jobs stream through the lanes) resumes
    # with the rest, each job judged once, the earlier verdicts kept.
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    kept = [r for r in rows if r["index"] in (1, 4)]
    (earlier / "soak_jobs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    (earlier / "soak.json").write_text(json.dumps({**report, "runs": [], "complete": False}))
    again = tmp_path / "again"
    done = subprocess.run([*cmd[:2], str(again), *cmd[3:], "--resume", str(earlier)], cwd=ROOT,
                          capture_output=True, text=True, timeout=280)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    resumed = [json.loads(line) for line in (again / "soak_jobs.jsonl").read_text().splitlines()]
    assert sorted(r["index"] for r in resumed) == list(range(6))
    assert [r for r in resumed if r["index"] in (1, 4)] == kept
    final = json.loads((again / "soak.json").read_text())
    assert final["complete"] and final["wrong_verdicts"] == 0 and final["leaked_processes"] == 0
    assert final["resumed_from_evaluations"] == 2
