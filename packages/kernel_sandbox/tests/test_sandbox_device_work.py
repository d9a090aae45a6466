"""Device work of the caller beside the sandbox (``Sandbox.device_work``: the trainer's policy
sampling on the GPU the sandbox times on): no timing runs beside it, correctness work goes on,
and neither side starves. The gate's guests are checked with threads; the sandbox's with its
workers' own trace of their device work (``CUDA_AGENT_TRACE``) on the CPU backend, whose one
device is the host."""

from __future__ import annotations

import random
import threading
import time

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.kernel_sandbox._parent.gate import LaneHold, TimingGate, guest_gate
from cuda_agent.kernel_sandbox._shared.trace import ENV as TRACE_ENV
from cuda_agent.kernel_sandbox._shared.trace import read_spans


def _enter(gate: TimingGate, mode: str, log: list[str], name: str) -> threading.Thread:
    acquire = {"read": gate.acquire_read, "write": gate.acquire_write, "guest": gate.acquire_guest}

    def run() -> None:
        acquire[mode]()
        log.append(name)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _settle() -> None:
    time.sleep(0.05)  # let the threads reach their wait (ordering only; nothing is timed)


def test_a_timing_waits_for_the_guest_while_checks_go_on():
    gate, log = TimingGate(gather_s=0.0), []  # a timing is due at once
    _enter(gate, "guest", log, "g").join(5)
    w = _enter(gate, "write", log, "w")
    _settle()
    _enter(gate, "read", log, "r1").join(5)  # the gate stays open to checks meanwhile
    assert log == ["g", "r1"]
    gate.release_read()
    _settle()
    assert "w" not in log  # no reader inside, but the guest is
    gate.release_guest()
    w.join(5)
    assert log == ["g", "r1", "w"]
    gate.release_write()


def test_a_guest_waits_for_a_batch_under_way_or_due_and_then_enters():
    gate, log = TimingGate(gather_s=0.0), []
    _enter(gate, "read", log, "r").join(5)
    w = _enter(gate, "write", log, "w")  # due at once: the gate closes, the reader drains
    _settle()
    g = _enter(gate, "guest", log, "g")
    _settle()
    assert log == ["r"]  # the timing is due: the guest waits for its batch
    gate.release_read()
    w.join(5)
    _settle()
    assert log == ["r", "w"]  # the batch runs without the guest
    gate.release_write()
    g.join(5)
    assert log == ["r", "w", "g"] and gate.guests == 1
    gate.release_guest()


def test_a_guest_enters_while_a_timing_still_gathers():
    gate, log = TimingGate(gather_s=30.0), []
    _enter(gate, "read", log, "r").join(5)
    w = _enter(gate, "write", log, "w")  # gathering: the check goes on, and so may a guest
    _settle()
    _enter(gate, "guest", log, "g").join(5)
    gate.release_read()
    _settle()
    assert log == ["r", "g"]  # no check left, but a guest: the timing does not start
    gate.release_guest()
    w.join(5)
    assert log[-1] == "w"
    gate.release_write()


def test_under_random_traffic_no_timing_runs_beside_a_guest_and_everyone_gets_through():
    gate = TimingGate(gather_s=0.002)
    inside = {"read": 0, "write": 0, "guest": 0}
    violations: list[str] = []
    lock = threading.Lock()

    def check(mode: str) -> None:
        with lock:
            inside[mode] += 1
            if inside["write"] > 1 or (inside["write"] and (inside["read"] or inside["guest"])):
                violations.append(str(inside))

    def leave(mode: str) -> None:
        with lock:
            inside[mode] -= 1

    def lane(seed: int) -> None:
        rng = random.Random(seed)
        hold = LaneHold(gate)
        for _ in range(150):
            mode = "write" if rng.random() < 0.3 else "read"
            hold.hold(mode)
            check(mode)
            time.sleep(rng.random() * 1e-4)
            leave(mode)
            hold.hold("none")

    def sampler(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(40):
            with gate.guest():
                check("guest")
                time.sleep(rng.random() * 2e-3)  # a guest holds longer than a section
                leave("guest")

    threads = [threading.Thread(target=lane, args=(i,), daemon=True) for i in range(5)]
    threads += [threading.Thread(target=sampler, args=(100 + i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)  # a deadlock would leave a thread alive: a liveness check, not a timing
    assert not any(t.is_alive() for t in threads), "a lane or a guest never got through"
    assert violations == []
    assert gate.timings > 0 and gate.guests == 80


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
