"""Device work of the caller beside the sandbox (``Sandbox.device_work``: the trainer's policy
sampling on the GPU the sandbox times on): no timing runs beside it, correctness work goes on,
and neither side starves. The gate's guests are checked with threads in
``test_sandbox_lanes.py``; the sandbox's here, with its workers' own trace of their device work
(``CUDA_AGENT_TRACE``) on the CPU backend, whose one device is the host."""

from __future__ import annotations

import threading
import time

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.kernel_sandbox._parent.gate import TimingGate, guest_gate
from cuda_agent.kernel_sandbox._shared.trace import ENV as TRACE_ENV
from cuda_agent.kernel_sandbox._shared.trace import read_spans


def test_the_callers_device_names_the_gate_it_holds():
    gates = [TimingGate(), TimingGate()]
    assert guest_gate(gates, "cuda", "cuda:1") is gates[1]
    assert guest_gate(gates, "cuda", "cuda") is gates[0]
    assert guest_gate(gates, "cpu", "cpu") is gates[0]
    for backend, device in (
        ("cuda", "cpu"),
        ("cpu", "cuda:0"),
        ("cuda", "cuda:2"),
        ("cuda", "mps"),
    ):
        assert guest_gate(gates, backend, device) is None


def test_a_device_named_by_an_alias_holds_its_gate():
    # A data-parallel process: its sandbox's one device is the caller's cuda:1.
    with Sandbox(SandboxConfig(backend="cpu", workers=1)) as sandbox:
        with sandbox.device_work("cuda:1"):  # not the sandbox's device: nothing held
            pass
        assert sandbox.gate_stats()[0]["guests"] == 0
        sandbox.alias_device("cuda:1", 0)
        with sandbox.device_work("cuda:1"):
            pass
        assert sandbox.gate_stats()[0]["guests"] == 1
        with pytest.raises(ValueError, match="1 device"):
            sandbox.alias_device("cuda:2", 1)


def _overlapping(spans, window: tuple[float, float]) -> list:
    start, end = window
    return [s for s in spans if s.start < end and start < s.end]


@pytest.mark.parametrize("held", [True, False], ids=["device-work", "control"])
def test_no_timing_runs_beside_the_callers_device_work(tmp_path, monkeypatch, held):
    """While jobs keep the lanes busy, the caller works on the host for a while: held as
    device work, no worker times meanwhile but checks go on; not held (the control), timings
    run beside it, so the check can fail."""
    monkeypatch.setenv(TRACE_ENV, str(tmp_path / "trace"))
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    config = SandboxConfig(
        backend="cpu", workers=2, lanes_per_gpu=2, repeats=10, timing_budget_s=0.3
    )
    windows = []
    with Sandbox(config) as sandbox:
        sandbox.warm_up()
        jobs = [(relu, relu.solutions["cpu"])] * 24
        busy = threading.Thread(target=sandbox.evaluate_many, args=(jobs,), daemon=True)
        busy.start()
        time.sleep(1.0)  # the lanes are under way
        for _ in range(3):
            with sandbox.device_work("cpu") if held else _nothing():
                start = time.monotonic()
                time.sleep(1.5)  # the caller's own work on the device
                windows.append((start, time.monotonic()))
            time.sleep(0.3)
        busy.join(600)
        stats = sandbox.gate_stats()[0]
    spans = read_spans(tmp_path / "trace")
    beside = [s for w in windows for s in _overlapping(spans, w)]
    assert spans and stats["timings"] > 0
    assert any(not s.timing for s in beside), "the lanes' checks stopped"
    if held:
        assert [s for s in beside if s.timing] == []
        assert stats["guests"] == 3
    else:
        assert [s for s in beside if s.timing], "the control found no timing beside the work"
        assert stats["guests"] == 0


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
