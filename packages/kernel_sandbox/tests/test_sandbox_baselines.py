"""``torch.compile`` baselines: timed once by a reference worker, kept on disk per (task, sizes,
device, torch version), reused by later jobs and fresh sandboxes (CPU backend)."""

from __future__ import annotations

import json

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, Task, builtin_tasks

pytestmark = pytest.mark.slow


@pytest.fixture
def relu() -> Task:
    return next(t for t in builtin_tasks() if t.name == "relu")


def _config(**kw) -> SandboxConfig:
    return SandboxConfig(
        backend="cpu", workers=1, time_compile=True, repeats=5, timing_budget_s=0.5, **kw
    )


def test_compile_baselines_are_measured_once_and_reused(relu, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    with Sandbox(_config()) as sandbox:
        first = sandbox.evaluate(relu, relu.solutions["cpu"])
        second = sandbox.evaluate(relu, relu.solutions["cpu"])
    assert first.status == "ok" and second.status == "ok", (first.message, second.message)
    assert first.compile_time_ms is not None and first.compile_time_ms > 0
    assert first.extra.get("compile_baseline") == "cached"
    (stored,) = (tmp_path / "baselines").glob("*.json")
    baseline = json.loads(stored.read_text())
    assert baseline["compile_ms"] > 0 and baseline["eager_ms"] > 0

    # A fresh sandbox (new workers) reads the file: plant a recognisable value to see it used.
    baseline["compile_ms"] = baseline["eager_ms"] * 1000
    stored.write_text(json.dumps(baseline))
    with Sandbox(_config()) as sandbox:
        third = sandbox.evaluate(relu, relu.solutions["cpu"])
    assert third.status == "ok", third.message
    # compile time = cached compile x (eager now / eager then) = 1000 x eager now
    assert third.compile_time_ms == pytest.approx(1000 * third.eager_time_ms, rel=1e-6)


def test_without_the_cache_the_baseline_is_measured_for_every_job(relu, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    with Sandbox(_config(cache_baselines=False)) as sandbox:
        result = sandbox.evaluate(relu, relu.solutions["cpu"])
    assert result.status == "ok", result.message
    assert result.compile_time_ms is not None and result.compile_time_ms > 0
    assert result.extra["compile_baseline"] == "measured"  # by the reference worker, again
    assert not list((tmp_path / "baselines").glob("*.json"))
