"""Device work of the caller beside the sandbox (``Sandbox.device_work``: the trainer's policy
sampling on the GPU the sandbox times on): no timing runs beside it, correctness work goes on,
and neither side starves. The gate's guests are checked with threads in
``test_sandbox_lanes.py``; the sandbox's here, with its workers' own trace of their device work
(``CUDA_AGENT_TRACE``) on the CPU backend, whose one device is the host."""

from __future__ import annotations

import contextlib
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


def _work_beside_jobs(tmp_path, backend: str, held: bool) -> tuple[list, list, dict]:
    """Jobs keep the lanes busy while the caller works on the device three times for 1.5 s
    (held as device work or not): the workers' traced spans, the caller's windows and the
    gate's counters."""
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    config = SandboxConfig(
        backend=backend, workers=1, lanes_per_gpu=2, repeats=10, timing_budget_s=0.3
    )
    device = "cuda:0" if backend == "cuda" else "cpu"
    windows = []
    with Sandbox(config) as sandbox:
        sandbox.warm_up()
        jobs = [(relu, relu.solutions[backend])] * (24 if backend == "cpu" else 96)
        busy = threading.Thread(target=sandbox.evaluate_many, args=(jobs,), daemon=True)
        busy.start()
        time.sleep(1.0)  # the lanes are under way
        for _ in range(3):
            with sandbox.device_work(device) if held else contextlib.nullcontext():
                start = time.monotonic()
                _busy(device, 1.5)  # the caller's own work on the device
                windows.append((start, time.monotonic()))
            time.sleep(0.3)
        busy.join(600)
        stats = sandbox.gate_stats()[0]
    return read_spans(tmp_path / "trace"), windows, stats


def _busy(device: str, seconds: float) -> None:
    """Work on ``device`` for about ``seconds`` (on a GPU: kernels, finished before it returns)."""
    if device == "cpu":
        time.sleep(seconds)
        return
    import torch

    a = torch.randn(2048, 2048, device=device)
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for _ in range(20):
            a = torch.tanh(a @ a)
        torch.cuda.synchronize(device)


@pytest.mark.parametrize(
    "backend", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)], ids=["cpu", "cuda"]
)
@pytest.mark.parametrize("held", [True, False], ids=["device-work", "control"])
def test_no_timing_runs_beside_the_callers_device_work(tmp_path, monkeypatch, held, backend):
    """While jobs keep the lanes busy, the caller works on the device for a while: held as
    device work, no worker times meanwhile but checks go on; not held (the control), timings
    run beside it, so the check can fail."""
    if backend == "cuda":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA GPU")
    monkeypatch.setenv(TRACE_ENV, str(tmp_path / "trace"))
    spans, windows, stats = _work_beside_jobs(tmp_path, backend, held)
    beside = [s for w in windows for s in _overlapping(spans, w)]
    assert spans and stats["timings"] > 0
    assert any(not s.timing for s in beside), "the lanes' checks stopped"
    if held:
        assert [s for s in beside if s.timing] == []
        assert stats["guests"] == 3
    else:
        assert [s for s in beside if s.timing], "the control found no timing beside the work"
        assert stats["guests"] == 0
