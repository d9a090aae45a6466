"""Lanes: several per device check candidates at once, and the timing gate lets one time alone.

The gate's guarantee is checked from outside it: every worker writes a trace of its sections of
device work (``_shared.trace``), and no timing may overlap another process's section on the same
device. The control, with the gate off, must find such overlaps, so the check can fail. Faults
stay in their lane: the red-team suite's faulty candidates, judged beside honest ones, get the
verdicts the one-lane pool gives them, and their neighbours stay ``ok``.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import tomllib
from pathlib import Path

import pytest

from cuda_agent.kernel_sandbox import Deadlines, Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.kernel_sandbox._parent.gate import LaneHold, TimingGate
from cuda_agent.kernel_sandbox._shared.protocol import JobConfig
from cuda_agent.kernel_sandbox._shared.trace import read_spans, timing_overlaps
from cuda_agent.kernel_sandbox._worker import _gpu_share
from cuda_agent.kernel_sandbox.config import auto_lanes

GiB = 1 << 30
REDTEAM = Path(__file__).resolve().parents[1] / "redteam"
CASES = tomllib.loads((REDTEAM / "cases.toml").read_text())["case"]
TASKS = {t.name: t for t in builtin_tasks()}


# ------------------------------------------------------------------------------ the gate
def _enter(gate: TimingGate, mode: str, log: list[str], name: str) -> threading.Thread:
    acquire = {"read": gate.acquire_read, "write": gate.acquire_write}

    def run() -> None:
        acquire[mode]()
        log.append(name)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _settle() -> None:
    time.sleep(0.05)  # let the threads reach their wait (ordering only; nothing is timed)


def test_readers_share_the_gate_and_a_writer_waits_for_them():
    gate, log = TimingGate(), []
    _enter(gate, "read", log, "r1").join()
    _enter(gate, "read", log, "r2").join()
    assert log == ["r1", "r2"]  # both inside at once
    writer = _enter(gate, "write", log, "w")
    _settle()
    assert log == ["r1", "r2"]
    gate.release_read()
    _settle()
    assert "w" not in log  # one reader still inside
    gate.release_read()
    writer.join(5)
    assert log[-1] == "w"


def test_a_waiting_writer_stops_new_readers_and_queued_timings_run_back_to_back():
    gate, log = TimingGate(gather_s=0.0), []  # no gathering: the writer closes the gate at once
    _enter(gate, "read", log, "r1").join()
    w1 = _enter(gate, "write", log, "w1")
    _settle()
    r2 = _enter(gate, "read", log, "r2")  # behind w1: the writer is not starved
    _settle()
    w2 = _enter(gate, "write", log, "w2")
    _settle()
    assert log == ["r1"]
    gate.release_read()  # the readers drained: w1 and w2 (queued then) form one batch
    w1.join(5)
    assert log == ["r1", "w1"]
    w3 = _enter(gate, "write", log, "w3")  # arrives during the batch: after the readers
    _settle()
    gate.release_write()
    w2.join(5)
    assert log == ["r1", "w1", "w2"]  # back to back, though r2 waits
    gate.release_write()
    r2.join(5)
    assert log == ["r1", "w1", "w2", "r2"]  # the reader is not starved by w3
    _settle()
    assert "w3" not in log
    gate.release_read()
    w3.join(5)
    assert log[-1] == "w3"


def test_a_timing_gathers_others_while_checks_go_on_then_they_run_as_one_batch():
    gate, log = TimingGate(gather_s=30.0), []
    _enter(gate, "read", log, "r1").join()
    w1 = _enter(gate, "write", log, "w1")
    _settle()
    _enter(gate, "read", log, "r2").join(5)  # checks go on while the timing gathers
    w2 = _enter(gate, "write", log, "w2")
    _settle()
    assert log == ["r1", "r2"]
    gate.release_read()
    gate.release_read()  # no check left: the batch starts without waiting out the gathering
    w1.join(5)
    assert log == ["r1", "r2", "w1"]
    gate.release_write()
    w2.join(5)
    assert log[-1] == "w2" and gate.batches == 1  # one batch: one drain served both
    gate.release_write()


def test_a_timing_closes_the_gate_once_it_has_gathered_long_enough():
    gate, log = TimingGate(gather_s=0.1), []
    _enter(gate, "read", log, "r1").join()
    w = _enter(gate, "write", log, "w")
    time.sleep(0.3)  # past the gathering: new readers wait for the timing
    r2 = _enter(gate, "read", log, "r2")
    _settle()
    assert log == ["r1"]
    gate.release_read()
    w.join(5)
    assert log == ["r1", "w"]
    gate.release_write()
    r2.join(5)
    assert log == ["r1", "w", "r2"]


def test_the_gate_says_how_long_it_gathered_drained_and_held_the_device_for_timings():
    gate, log = TimingGate(gather_s=0.2), []
    _enter(gate, "read", log, "r1").join()
    w = _enter(gate, "write", log, "w")
    time.sleep(0.4)  # it gathers 0.2 s, then drains (the reader is still inside)
    gate.release_read()
    w.join(5)
    time.sleep(0.1)  # the batch holds the device
    gate.release_write()
    stats = gate.stats()
    assert log == ["r1", "w"] and stats["batches"] == 1
    assert stats["gather_s"] >= 0.2 and stats["drain_s"] >= 0.1 and stats["write_phase_s"] >= 0.1
    # a phase ends when the next begins: gathering, draining and the batch do not overlap
    assert stats["gather_s"] + stats["drain_s"] <= stats["write_wait_s"] + 1e-3


def test_a_drain_stalled_on_a_slow_reader_lets_readers_in_but_never_a_timing():
    # A candidate hanging in its trials holds its section until the deadline: the other lanes'
    # checks go on beside it (the side door), the timing waits for it and for them.
    gate, log = TimingGate(gather_s=0.0, stall_s=0.2), []
    slow, r2, r3, r4 = object(), object(), object(), object()
    gate.acquire_read(slow)
    w = _enter(gate, "write", log, "w")  # closes the gate at once
    _settle()
    t2 = threading.Thread(target=lambda: (gate.acquire_read(r2), log.append("r2")), daemon=True)
    t2.start()
    _settle()
    assert log == []  # within the patience: a reader waits for the timing, as before
    t2.join(5)  # the drain stalled: the side door lets it in
    assert log == ["r2"] and gate.side_door == 1
    gate.release_read(r2)
    gate.acquire_read(r3)  # the door is open while the slow reader is inside
    _settle()
    assert log == ["r2"]  # but the timing waits for the slow reader, and for r3
    gate.release_read(slow)  # the slow reader left: the gate closes again
    t4 = threading.Thread(target=lambda: (gate.acquire_read(r4), log.append("r4")), daemon=True)
    t4.start()
    _settle()
    assert log == ["r2"]  # r4 waits; the timing waits for r3 only
    gate.release_read(r3)
    w.join(5)
    assert log == ["r2", "w"]
    gate.release_write()
    t4.join(5)
    assert log == ["r2", "w", "r4"] and gate.side_door == 2
    gate.release_read(r4)
    assert gate.stats()["side_door"] == 2


def test_a_guest_goes_in_by_the_side_door_and_the_timing_waits_for_it_too():
    # The trainer's sampling (a guest) is not held up for a whole hang: once the drain has
    # stalled it goes on beside the checks; the timing then waits for it as for them.
    gate, log = TimingGate(gather_s=0.0, stall_s=0.2), []
    slow = object()
    gate.acquire_read(slow)
    w = _enter(gate, "write", log, "w")
    _settle()
    early = _Guest(gate, log, "early")  # the gate is closed: it waits
    _settle()
    assert log == []
    assert early.inside(log, "early")  # the drain stalled: in by the side door
    late = _Guest(gate, log, "late")  # the door is open: in at once
    assert late.inside(log, "late")
    gate.release_read(slow)
    _settle()
    assert "w" not in log  # the guests are still inside
    early.leave()
    late.leave()
    w.join(5)
    assert log[-1] == "w"
    gate.release_write()


def test_the_side_door_opens_once_a_batch_so_a_timing_waits_for_two_drains_at_most():
    gate, log = TimingGate(gather_s=0.0, stall_s=0.1), []
    slow, second, late = object(), object(), object()
    gate.acquire_read(slow)
    w = _enter(gate, "write", log, "w")
    time.sleep(0.3)  # the drain stalled: the side door is open
    gate.acquire_read(second)  # in by the side door; it will be slow too
    gate.release_read(slow)  # the gate closes again: the timing waits for `second` alone
    t = threading.Thread(target=lambda: (gate.acquire_read(late), log.append("late")), daemon=True)
    t.start()
    time.sleep(0.3)  # past the patience again, but the door stays shut this batch
    assert log == [] and gate.side_door == 1
    gate.release_read(second)
    w.join(5)
    assert log == ["w"]
    gate.release_write()
    t.join(5)
    assert log == ["w", "late"]
    gate.release_read(late)


@pytest.mark.parametrize("stall_s", [1.0, 0.0005], ids=["patient", "side door often"])
def test_under_random_traffic_a_timing_is_always_alone_and_everyone_gets_through(stall_s):
    # (impatient: a timing closes the gate at once, and drains stall past 0.5 ms)
    gate = (
        TimingGate(stall_s=stall_s)
        if stall_s >= 0.01
        else TimingGate(gather_s=0.0, stall_s=stall_s)
    )
    inside = {"read": 0, "write": 0}
    violations: list[str] = []
    lock = threading.Lock()

    def lane(seed: int) -> None:
        import random

        rng = random.Random(seed)
        hold = LaneHold(gate)
        for _ in range(200):
            mode = "write" if rng.random() < 0.3 else "read"
            hold.hold(mode)
            with lock:
                inside[mode] += 1
                if inside["write"] > 1 or (inside["write"] and inside["read"]):
                    violations.append(str(inside))
            slow = mode == "read" and rng.random() < 0.02  # now and then a slow check
            time.sleep(rng.random() * (2e-2 if slow else 1e-4))
            with lock:
                inside[mode] -= 1
            hold.hold("none")

    threads = [threading.Thread(target=lane, args=(i,), daemon=True) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)  # a deadlock would leave a thread alive: a liveness check, not a timing
    assert not any(t.is_alive() for t in threads), "a lane never got through the gate"
    assert violations == []
    assert gate.timings > 0
    if stall_s < 0.01:  # (slow checks held drains far past the patience)
        assert gate.side_door > 0


# ------------------------------------------------------------------ the gate's guests
class _Guest:
    """A thread that enters ``gate`` as a guest (a guest leaves on the thread that entered),
    logs ``name``, and stays inside until ``leave()``."""

    def __init__(self, gate: TimingGate, log: list[str], name: str) -> None:
        self._go = threading.Event()

        def run() -> None:
            gate.acquire_guest()
            log.append(name)
            self._go.wait(30)
            gate.release_guest()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def inside(self, log: list[str], name: str) -> bool:
        for _ in range(100):
            if name in log:
                return True
            time.sleep(0.01)
        return False

    def leave(self) -> None:
        self._go.set()
        self.thread.join(5)


def test_a_timing_waits_for_the_guest_while_checks_go_on():
    gate, log = TimingGate(gather_s=0.0), []  # a timing is due at once
    g = _Guest(gate, log, "g")
    assert g.inside(log, "g")
    w = _enter(gate, "write", log, "w")
    _settle()
    _enter(gate, "read", log, "r1").join(5)  # the gate stays open to checks meanwhile
    assert log == ["g", "r1"]
    gate.release_read()
    _settle()
    assert "w" not in log  # no reader inside, but the guest is
    g.leave()
    w.join(5)
    assert log == ["g", "r1", "w"]
    gate.release_write()


def test_a_guest_waits_for_a_batch_under_way_or_due_and_then_enters():
    gate, log = TimingGate(gather_s=0.0), []
    _enter(gate, "read", log, "r").join(5)
    w = _enter(gate, "write", log, "w")  # due at once: the gate closes, the reader drains
    _settle()
    g = _Guest(gate, log, "g")
    _settle()
    assert log == ["r"]  # the timing is due: the guest waits for its batch
    gate.release_read()
    w.join(5)
    _settle()
    assert log == ["r", "w"]  # the batch runs without the guest
    gate.release_write()
    assert g.inside(log, "g")
    assert log == ["r", "w", "g"] and gate.guests == 1
    g.leave()


def test_a_guest_enters_while_a_timing_still_gathers():
    gate, log = TimingGate(gather_s=30.0), []
    _enter(gate, "read", log, "r").join(5)
    w = _enter(gate, "write", log, "w")  # gathering: the check goes on, and so may a guest
    _settle()
    g = _Guest(gate, log, "g")
    assert g.inside(log, "g")
    gate.release_read()
    _settle()
    assert log == ["r", "g"]  # no check left, but a guest: the timing does not start
    g.leave()
    w.join(5)
    assert log[-1] == "w"
    gate.release_write()


def test_a_guest_behind_a_batch_enters_when_it_ends_before_the_next_batch():
    gate, log = TimingGate(gather_s=0.0), []
    _enter(gate, "write", log, "w1").join(5)  # a batch under way
    g = _Guest(gate, log, "g")
    _settle()
    w2 = _enter(gate, "write", log, "w2")  # arrives during the batch: the next batch
    _settle()
    assert log == ["w1"]
    gate.release_write()  # the batch ends: the guest enters before the next one starts
    assert g.inside(log, "g")
    _settle()
    assert log == ["w1", "g"]
    g.leave()
    w2.join(5)
    assert log == ["w1", "g", "w2"]
    gate.release_write()


def test_a_guest_may_enter_again_inside_itself_though_a_timing_waits():
    gate, log = TimingGate(gather_s=0.0), []
    gate.acquire_guest()
    w = _enter(gate, "write", log, "w")  # due at once, waits for the guest
    _settle()
    assert gate.acquire_guest() == 0.0  # nested on the same thread: no wait, no deadlock
    gate.release_guest()
    _settle()
    assert log == []  # still inside once
    gate.release_guest()
    w.join(5)
    assert log == ["w"]
    gate.release_write()
    with pytest.raises(RuntimeError, match="without a guest inside"):
        gate.release_guest()


@pytest.mark.parametrize("stall_s", [1.0, 0.0005], ids=["patient", "side door often"])
def test_under_random_traffic_no_timing_runs_beside_a_guest_and_everyone_gets_through(stall_s):
    gate = TimingGate(gather_s=0.002, stall_s=stall_s)
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
        import random

        rng = random.Random(seed)
        hold = LaneHold(gate)
        for _ in range(150):
            mode = "write" if rng.random() < 0.3 else "read"
            hold.hold(mode)
            check(mode)
            slow = mode == "read" and rng.random() < 0.02  # now and then a slow check
            time.sleep(rng.random() * (2e-2 if slow else 1e-4))
            leave(mode)
            hold.hold("none")

    def sampler(seed: int) -> None:
        import random

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


def test_the_control_gate_lets_everything_through():
    gate, log = TimingGate(enabled=False), []
    _enter(gate, "read", log, "r").join()
    _enter(gate, "write", log, "w1").join(5)
    _enter(gate, "write", log, "w2").join(5)
    assert log == ["r", "w1", "w2"]


# -------------------------------------------------------------------------- configuration
def test_auto_lanes_follow_cores_and_memory():
    # One H200 host: 16 cores, 128 GiB, 139 GiB of GPU memory -> the cap of 8.
    assert auto_lanes(16, 128 * GiB, 139 * GiB, gpus=1) == 8
    assert auto_lanes(16, 128 * GiB, 139 * GiB, gpus=2) == 6  # (16 - 4) cores / 2 GPUs
    # One H100 host (81,559 MiB): 8 lanes, which judged the suite 49% faster than 4 there.
    assert auto_lanes(16, 128 * GiB, 81559 * 2**20, gpus=1) == 8
    assert auto_lanes(2, 24 * GiB, 80 * GiB, gpus=1) == 2
    assert auto_lanes(64, 24 * GiB, 139 * GiB, gpus=1) == 4  # host memory: 24 / 6
    assert auto_lanes(64, 512 * GiB, 24 * GiB, gpus=1) == 3  # a 24 GB GPU: 8 GiB a lane
    assert auto_lanes(64, 512 * GiB, 12 * GiB, gpus=1) == 1
    assert auto_lanes(1, 0, 8 * GiB, gpus=1) == 1


def test_on_the_cpu_the_host_is_one_device_and_workers_still_asks_for_lanes():
    assert SandboxConfig(backend="cpu", workers=3).resolved().lanes_per_gpu == 3
    resolved = SandboxConfig(backend="cpu", lanes_per_gpu=2).resolved()
    assert (resolved.workers, resolved.lanes_per_gpu) == (1, 2)
    with pytest.raises(ValueError, match="lanes_per_gpu"):
        SandboxConfig(lanes_per_gpu=0)


def test_automatic_worker_threads_split_the_cores_and_honour_omp_num_threads(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert SandboxConfig(backend="cpu", workers=2).resolved().threads_per_worker == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the caller's limit caps the share
    assert SandboxConfig(backend="cpu", workers=2).resolved().threads_per_worker == 3
    assert SandboxConfig(backend="cpu", workers=8).resolved().threads_per_worker == 1
    fixed = SandboxConfig(backend="cpu", workers=2, threads_per_worker=6)
    assert fixed.resolved().threads_per_worker == 6  # an explicit count is kept
    for unusable in ("", "0", "auto"):
        monkeypatch.setenv("OMP_NUM_THREADS", unusable)
        assert SandboxConfig(backend="cpu", workers=2).resolved().threads_per_worker == 4


# ------------------------------------------------------------------- lanes on the CPU backend
def _lanes_config(**kw) -> SandboxConfig:
    return SandboxConfig(**{"backend": "cpu", "repeats": 10, "timing_budget_s": 0.3, **kw})


def _run_traced(tmp_path: Path, monkeypatch, name: str, jobs, **kw):
    trace = tmp_path / name
    monkeypatch.setenv("CUDA_AGENT_TRACE", str(trace))
    with Sandbox(_lanes_config(**kw)) as sandbox:
        results = sandbox.evaluate_many(jobs)
    return results, read_spans(trace)


@pytest.mark.slow
def test_lanes_keep_every_timing_alone_and_give_the_one_lane_verdicts(tmp_path, monkeypatch):
    tasks = builtin_tasks("starter")
    wrong = TASKS["relu"].solutions["cpu"].replace("0.f ? x[i] : 0.f", "0.f ? x[i] : 1.f")
    jobs = [(t, t.solutions["cpu"]) for t in tasks] + [(TASKS["relu"], wrong)]
    one, _ = _run_traced(tmp_path, monkeypatch, "one", jobs, lanes_per_gpu=1)
    many, spans = _run_traced(tmp_path, monkeypatch, "lanes", jobs, lanes_per_gpu=3)
    assert [r.status for r in many] == [r.status for r in one]
    assert [r.status for r in many] == ["ok"] * len(tasks) + ["incorrect"]
    assert len({r.extra["lane"] for r in many}) == 3  # the lanes were used
    timings = [s for s in spans if s.timing]
    assert len(timings) == len(tasks)
    assert {s.kind for s in spans} >= {"load", "check", "verdict", "timing"}
    assert timing_overlaps(spans) == []


@pytest.mark.slow
def test_with_the_gate_off_the_trace_finds_overlaps(tmp_path, monkeypatch):
    """The control: the check above can fail."""
    tasks = builtin_tasks("starter")
    jobs = [(t, t.solutions["cpu"]) for t in tasks]
    results, spans = _run_traced(
        tmp_path, monkeypatch, "off", jobs, lanes_per_gpu=3, timing_gate=False
    )
    assert all(r.status == "ok" for r in results)
    assert timing_overlaps(spans), "three lanes timing at will never overlapped"


@pytest.mark.slow
def test_faults_stay_in_their_lane(tmp_path):
    """Every red-team fault and cheat, judged in a three-lane pool beside honest candidates:
    each gets the verdict the one-lane pool gives it (``test_redteam``), every honest one is
    ``ok``."""
    cases = [
        c
        for c in CASES
        if "cpu" in c.get("backends", ["cpu"])
        and c.get("kind") != "property"
        and not c.get("isolate")
        and c["name"] not in ("network",)  # needs the test's listener
    ]
    relu = TASKS["relu"]
    jobs = []
    for case in cases:
        text = (REDTEAM / "cases" / f"{case['name']}.py").read_text()
        text = text.replace("__TARGET__", str(tmp_path / "planted.txt"))
        jobs += [(TASKS[case["task"]], text), (relu, relu.solutions["cpu"])]
    deadlines = Deadlines(load=60.0, correctness=10.0, timing=20.0)
    with Sandbox(_lanes_config(lanes_per_gpu=3, deadlines=deadlines)) as sandbox:
        results = sandbox.evaluate_many(jobs)
    for case, verdict, honest in zip(cases, results[::2], results[1::2], strict=True):
        assert verdict.status == case["status"], f"{case['name']}: {verdict.message}"
        assert set(case.get("flags", [])) <= set(verdict.flags), case["name"]
        assert honest.status == "ok", f"beside {case['name']}: {honest.message}"
    assert not (tmp_path / "planted.txt").exists()


IDENTITY = """
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clone()  # wrong wherever x < 0
"""


def test_a_hanging_candidate_stalls_the_timings_but_not_the_other_lanes_checks():
    # Lane 1 hangs in its trials until the deadline; lane 2 reaches its timing, which must
    # wait for the hang (it may be using the device); lane 3's wrong answers, which need no
    # timing, are judged meanwhile (the gate's side door), not after the hang's deadline.
    relu = TASKS["relu"]
    hang = (REDTEAM / "cases" / "infinite_loop_python.py").read_text()
    done: list[str] = []
    deadlines = Deadlines(load=60.0, correctness=8.0, timing=20.0)
    config = _lanes_config(lanes_per_gpu=3, static_checks=False, deadlines=deadlines)
    with Sandbox(config) as sandbox:

        def judge(name: str, source: str, expected: str) -> threading.Thread:
            def run() -> None:
                result = sandbox.evaluate(relu, source)
                done.append(name if result.status == expected else f"{name}: {result.message}")

            thread = threading.Thread(target=run, daemon=True)
            thread.start()
            return thread

        sandbox.evaluate(relu, relu.solutions["cpu"])  # every lane's workers up, baselines in
        threads = [judge("hang", hang, "timeout")]
        time.sleep(1.0)  # the hang is in its trials
        threads.append(judge("timed", relu.solutions["cpu"], "ok"))
        time.sleep(1.0)  # the timing has closed the gate and waits
        for i in range(3):
            threads.append(judge(f"wrong{i}", IDENTITY, "incorrect"))
            threads[-1].join(60)
        for thread in threads:
            thread.join(60)
        stats = sandbox.gate_stats()[0]
    assert done.index("wrong2") < done.index("hang") < done.index("timed"), done
    assert stats["side_door"] >= 1


@pytest.mark.slow
def test_baselines_are_measured_ahead_and_then_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    tasks = [TASKS["relu"], TASKS["add_mul"]]
    config = _lanes_config(lanes_per_gpu=2, time_compile=True, repeats=5)
    seen = []
    with Sandbox(config) as sandbox:
        first = sandbox.measure_baselines(tasks, progress=seen.append)
        again = sandbox.measure_baselines(tasks)
        result = sandbox.evaluate(TASKS["relu"], TASKS["relu"].solutions["cpu"])
    assert [s.status for s in first] == ["measured", "measured"], first
    assert sorted(s.task for s in seen) == sorted(t.name for t in tasks)
    assert [s.status for s in again] == ["kept", "kept"]
    assert len(list((tmp_path / "baselines").glob("*.json"))) == 2
    assert result.status == "ok" and result.extra["compile_baseline"] == "cached"
    with Sandbox(_lanes_config(lanes_per_gpu=1)) as off:  # no torch.compile timing on the CPU
        assert [s.status for s in off.measure_baselines(tasks)] == ["off", "off"]
    # A kept baseline tells the lanes what its task needs on the device before any job has run
    # (on the CPU nothing is measured there: the files are given a GPU's figures here).
    assert sandbox._lanes.footprints == {}
    for path in (tmp_path / "baselines").glob("*.json"):
        kept = json.loads(path.read_text())
        path.write_text(json.dumps({**kept, "peak_gpu_bytes": 30, "gpu_total_bytes": 100}))
    with Sandbox(config) as later:
        assert [s.status for s in later.measure_baselines(tasks)] == ["kept", "kept"]
        # the reference worker about the measurement's peak, the candidate worker twice it
        assert later._lanes.footprints == {t.digest: 90 for t in tasks}
        assert later._lanes.reference_needs == {t.digest: 30 for t in tasks}
        assert set(later._lanes.capacity.values()) == {85}


@pytest.mark.slow
def test_a_baseline_that_cannot_be_measured_says_why(tmp_path, monkeypatch):
    """A reference that fails when timed is a ``failed`` status naming its error (it once came
    back empty: three KernelBench tasks "failed" on the H200 with no reason)."""
    from cuda_agent.kernel_sandbox import load_task

    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    source = TASKS["relu"].source.replace(
        "return torch.relu(x)", "raise ValueError('this reference is broken')"
    )
    assert "this reference is broken" in source
    (tmp_path / "broken.py").write_text(source)
    broken = load_task(tmp_path / "broken.py")
    config = _lanes_config(lanes_per_gpu=2, time_compile=True, repeats=5)
    with Sandbox(config) as sandbox:
        statuses = sandbox.measure_baselines([broken, TASKS["relu"]])
    assert [s.status for s in statuses] == ["failed", "measured"]
    assert statuses[0].message == "ValueError: this reference is broken"
    assert statuses[1].message == ""


@pytest.mark.slow
def test_a_baseline_out_of_memory_beside_other_lanes_is_measured_again_alone(tmp_path, monkeypatch):
    """On the H200 (2026-12-05) eight KernelBench level-1 baselines measured at once ran two of
    them out of memory: a first-time task's footprint is unknown, so admission could not keep
    them apart. Such a baseline is measured again with the device alone; with one lane there is
    no one else's memory to blame, and it stays failed."""
    from cuda_agent.kernel_sandbox import load_task

    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    once = (
        "import os, pathlib\n"
        "MARK = pathlib.Path(os.environ['CUDA_AGENT_CACHE']) / 'reference-out-of-memory-once'\n"
    )
    source = once + TASKS["relu"].source.replace(
        "return torch.relu(x)",
        "if not MARK.exists():\n"
        "            MARK.write_text('1')\n"
        "            raise RuntimeError('CUDA out of memory. Tried to allocate 6.00 GiB')\n"
        "        return torch.relu(x)",
    )
    assert "Tried to allocate" in source
    (tmp_path / "big.py").write_text(source)
    big = load_task(tmp_path / "big.py")
    config = _lanes_config(lanes_per_gpu=2, time_compile=True, repeats=5)
    with Sandbox(config) as sandbox:
        statuses = sandbox.measure_baselines([big, TASKS["add_mul"]])
        stats = sandbox.gate_stats()
    assert [s.status for s in statuses] == ["measured", "measured"], statuses
    assert statuses[0].message.startswith("measured alone, after running out of memory")
    assert "Tried to allocate 6.00 GiB" in statuses[0].message
    assert statuses[1].message == ""
    assert stats[0]["timings"] >= 2
    (tmp_path / "reference-out-of-memory-once").unlink()
    shutil.rmtree(tmp_path / "baselines")
    with Sandbox(_lanes_config(lanes_per_gpu=1, time_compile=True, repeats=5)) as one:
        (alone,) = one.measure_baselines([big])
    assert alone.status == "failed" and "out of memory" in alone.message


def test_a_baseline_report_carries_what_it_needed_on_the_gpu():
    from cuda_agent.kernel_sandbox._shared.protocol import BaselineReport

    times = {"eager_ms": 1.0, "eager_spread_ms": 0.1, "compile_ms": 0.5, "compile_spread_ms": 0.0}
    report = BaselineReport.parse({**times, "peak_gpu_bytes": 7, "gpu_total_bytes": 99})
    assert report is not None and (report.peak_gpu_bytes, report.gpu_total_bytes) == (7, 99)
    assert BaselineReport.parse(report.to_json()) == report
    old = BaselineReport.parse(times)  # kept on disk before the fields were
    assert old is not None and (old.peak_gpu_bytes, old.gpu_total_bytes) == (0, 0)
    bad = BaselineReport.parse({**times, "peak_gpu_bytes": -1, "gpu_total_bytes": "x"})
    assert bad is not None and (bad.peak_gpu_bytes, bad.gpu_total_bytes) == (0, 0)


def test_the_baselines_command_refuses_a_missing_directory(tmp_path, capsys):
    from cuda_agent.kernel_sandbox.cli import main

    assert main(["baselines", str(tmp_path / "nowhere"), "--backend", "cpu"]) == 2
    assert "kernel-sandbox:" in capsys.readouterr().err


def test_jobs_go_to_the_lanes_that_ran_their_task_and_new_tasks_spread():
    import os

    from cuda_agent.kernel_sandbox._parent.lanes import Lane, LanePool
    from cuda_agent.kernel_sandbox._parent.pool import Worker

    config = SandboxConfig(backend="cpu", lanes_per_gpu=2).resolved()
    lanes = [  # workers that are never started: only the pool's bookkeeping is exercised
        Lane(0, n, Worker(config, 0, "candidate"), Worker(config, 0, "reference"),
             os.open(os.devnull, os.O_RDONLY), LaneHold(None))
        for n in range(2)
    ]  # fmt: skip
    pool = LanePool(lanes, [TimingGate()])
    first = pool.take("a")
    second = pool.take("a")  # no lane ran "a" yet, nothing else waits: the other lane
    assert {first.number, second.number} == {0, 1}
    pool.put(first)
    pool.put(second)
    got: list[tuple[str, int]] = []

    def job(task: str) -> None:
        taken = pool.take(task)
        got.append((task, taken.number))

    # Both lanes idle and both ran "a"; a job on "b" and one on "a": each a lane.
    ta, tb = threading.Thread(target=job, args=("a",)), threading.Thread(target=job, args=("b",))
    ta.start(), tb.start()
    ta.join(5), tb.join(5)
    assert sorted(t for t, _ in got) == ["a", "b"]
    b_lane = next(n for t, n in got if t == "b")
    a_lane = next(n for t, n in got if t == "a")
    pool.put(lanes[b_lane])
    pool.put(lanes[a_lane])
    # A later job on "b" goes to the lane that ran "b".
    assert pool.take("b").number == b_lane
    pool.kill()


def _bookkeeping_pool(devices: list[int]):
    """A LanePool of lanes whose workers are never started (one lane per entry of
    ``devices``, on that device): only the pool's bookkeeping is exercised."""
    import os

    from cuda_agent.kernel_sandbox._parent.lanes import Lane, LanePool
    from cuda_agent.kernel_sandbox._parent.pool import Worker

    config = SandboxConfig(backend="cpu", lanes_per_gpu=2).resolved()
    lanes = [
        Lane(d, n, Worker(config, d, "candidate"), Worker(config, d, "reference"),
             os.open(os.devnull, os.O_RDONLY), LaneHold(None))
        for n, d in enumerate(devices)
    ]  # fmt: skip
    return LanePool(lanes, [TimingGate() for _ in set(devices)]), lanes


def _in_thread(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


# The rerun of a job out of memory beside other lanes needs the device's memory, not only its
# gate: on the H200 (2026-12-03) 8 or 9 of 24 honest compositions still failed their rerun
# under the gate alone, other lanes' workers holding 20 to 42 GiB between their sections.
def test_an_exclusive_job_waits_for_its_device_s_other_jobs_and_holds_its_idle_lanes_back():
    pool, (a, b, c, d) = _bookkeeping_pool([0, 0, 0, 1])
    assert pool.take("t1") is a and pool.take("t2") is b  # c (device 0) and d (1) idle
    events: list[str] = []

    def exclusive() -> None:
        with pool.exclusive(a):
            events.append("alone")
            _settle()
            events.append("done")

    got: dict[str, object] = {}

    def job(task: str) -> None:
        got[task] = pool.take(task)
        events.append(task)

    runner = _in_thread(exclusive)
    _settle()
    assert events == []  # b still runs its job on device 0
    _in_thread(job, "x").join(5)
    assert got["x"] is d  # another device's lane is still handed out
    later = _in_thread(job, "y")
    _settle()
    assert "y" not in got  # c is idle but held back for the exclusive job
    pool.put(b)
    runner.join(5)
    later.join(5)
    assert events[:3] == ["x", "alone", "done"] and events[3] == "y"
    assert got["y"] in (b, c)  # handed out once the exclusive job is over
    pool.kill()


def test_two_jobs_asking_for_the_same_device_alone_do_not_wait_for_each_other():
    pool, (a, b) = _bookkeeping_pool([0, 0])
    pool.take("t1"), pool.take("t2")
    inside: list[int] = []
    overlapped: list[bool] = []

    def exclusive(lane) -> None:
        with pool.exclusive(lane):
            overlapped.append(bool(inside))
            inside.append(lane.number)
            _settle()
            inside.remove(lane.number)
        pool.put(lane)

    threads = [_in_thread(exclusive, a), _in_thread(exclusive, b)]
    for thread in threads:
        thread.join(5)
    assert not any(t.is_alive() for t in threads)
    assert overlapped == [False, False]  # one after the other
    pool.kill()


# Admission by memory: on the H200 (2026-12-04) 9 to 22 of an RL step's 43 to 61 evaluations of
# 4 GiB-input tasks ran out of memory beside other lanes and ran again alone.
def _gpu_extra(candidate: int, reference: int, total: int = 100) -> dict[str, object]:
    return {"peak_gpu_bytes": candidate, "reference_peak_gpu_bytes": reference,
            "gpu_total_bytes": total}  # fmt: skip


def test_a_jobs_footprint_is_both_workers_peaks_on_its_device():
    from cuda_agent.kernel_sandbox._parent.lanes import footprint
    from cuda_agent.kernel_sandbox._shared.protocol import CheckVerdict

    assert footprint(_gpu_extra(30, 25)) == (55, 100)
    assert footprint(_gpu_extra(300, 25)) == (100, 100)  # never more than the device
    assert footprint({"peak_gpu_bytes": 30}) is None  # not on a GPU: nothing learnt
    assert footprint({**_gpu_extra(30, 25), "peak_gpu_bytes": "lots"}) == (25, 100)
    for sent, read in ((123, 123), (-5, 0), (float("inf"), 0), ("9", 0), (None, 0)):
        verdict = CheckVerdict.parse({"passed": True, "peak_gpu_bytes": sent})
        assert verdict.peak_gpu_bytes == read and verdict.passed
        held = CheckVerdict.parse({"passed": True, "held_gpu_bytes": sent})
        assert held.held_gpu_bytes == read and held.peak_gpu_bytes == 0
        assert CheckVerdict.parse(held.to_json()) == held


def test_jobs_start_on_a_device_only_while_their_footprints_fit():
    pool, (a, b, c) = _bookkeeping_pool([0, 0, 0])
    pool.observe("big", 0, _gpu_extra(40, 20))  # 60 of 100; the jobs may hold 85
    got: dict[str, object] = {}

    def job(name: str, task: str) -> None:
        got[name] = pool.take(task)

    first = pool.take("big")
    assert first in (a, b, c)
    second = _in_thread(job, "big2", "big")
    _settle()
    assert "big2" not in got  # two lanes idle, but 60 + 60 does not fit
    _in_thread(job, "new", "unseen").join(5)  # a task not seen yet counts as 0
    assert "new" in got and "big2" not in got
    pool.put(got["new"])
    _settle()
    assert "big2" not in got
    pool.put(first)
    second.join(5)
    assert "big2" in got  # the first big job is done: it fits now
    pool.kill()


def test_a_large_job_is_not_starved_by_small_ones_that_fit():
    pool, _ = _bookkeeping_pool([0, 0])
    pool.observe("big", 0, _gpu_extra(50, 10))  # 60
    pool.observe("small", 0, _gpu_extra(5, 5))  # 10
    order: list[str] = []
    lanes: dict[str, object] = {}

    def job(name: str, task: str) -> None:
        lanes[name] = pool.take(task)
        order.append(name)

    first = pool.take("big")
    waiting = _in_thread(job, "big2", "big")  # 120 > 85: waits for the first
    _settle()
    for k in range(2):  # small jobs fit beside the running big one, and pass the waiting one
        _in_thread(job, f"small{k}", "small").join(5)
        pool.put(lanes[f"small{k}"])
    late = _in_thread(job, "small2", "small")
    _settle()
    assert "small2" not in order  # passed over twice (two lanes): the big job goes first now
    assert "big2" not in order  # and it still waits for the first one's memory
    pool.put(first)
    waiting.join(5)
    late.join(5)
    assert {"big2", "small2"} <= set(order)  # 60 + 10 fit: both start
    pool.kill()


OOM_ONCE = """
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


def test_a_job_out_of_memory_beside_other_lanes_runs_again_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    relu = TASKS["relu"]
    config = _lanes_config(lanes_per_gpu=2, static_checks=False)
    with Sandbox(config) as sandbox:
        result = sandbox.evaluate(relu, relu.solutions["cpu"] + OOM_ONCE)
        stats = sandbox.gate_stats()
    assert result.status == "ok", result.message
    assert "out of memory beside other lanes" in result.extra["rerun_alone"]
    assert stats[0]["timings"] >= 1
    with Sandbox(_lanes_config(lanes_per_gpu=1, static_checks=False)) as one:
        (tmp_path / "out-of-memory-once").unlink()
        alone = one.evaluate(relu, relu.solutions["cpu"] + OOM_ONCE)
    assert (
        alone.status == "runtime_error" and "rerun_alone" not in alone.extra
    )  # one lane: no one else's memory


BEYOND_THE_DEVICE = """

def forward(self, x):
    raise RuntimeError(
        "CUDA out of memory. Tried to allocate 10.00 TiB. GPU 0 has a total capacity of "
        "79.18 GiB of which 70.12 GiB is free."
    )


ModelNew.forward = forward
"""


def test_a_job_that_asks_for_more_than_the_whole_device_is_not_run_again_alone(tmp_path):
    """Alone it would fail the same: its verdict stands, says why, and no other lane waits."""
    relu = TASKS["relu"]
    with Sandbox(_lanes_config(lanes_per_gpu=2, static_checks=False)) as sandbox:
        result = sandbox.evaluate(relu, relu.solutions["cpu"] + BEYOND_THE_DEVICE)
    assert result.status == "runtime_error" and "out of memory" in result.message
    assert "rerun_alone" not in result.extra
    assert "10.00 TiB at once, more than the device's 79.2 GiB" in result.extra["no_rerun_alone"]


def test_only_a_single_request_beyond_the_device_rules_out_a_rerun():
    from cuda_agent.kernel_sandbox.result import beyond_the_device

    h100 = "Tried to allocate 6.00 GiB. GPU 0 has a total capacity of 79.18 GiB of which 1 GiB"
    assert beyond_the_device(h100) == ""  # the neighbours may hold the rest: run again alone
    assert beyond_the_device("CUDA out of memory. Tried to allocate 4.00 GiB") == ""
    assert beyond_the_device("Tried to allocate 96.00 GiB", device_bytes=80 << 30)
    assert beyond_the_device("Tried to allocate 80.00 GiB", device_bytes=80 << 30) == ""
    assert beyond_the_device("cuMemAlloc failed: out of memory", device_bytes=80 << 30) == ""
    assert beyond_the_device("Tried to allocate 1.50 TiB. GPU 0 has a total capacity of 139.80 GiB")


# The rerun alone may use the whole device: its candidate worker's share of the GPU (a quarter
# with eight lanes) is lifted for that job (on the H200, 2026-12-03, 8 lanes judged 4-5 of 12
# honest training compositions runtime_error while one lane judged all 12 ok).
def test_the_rerun_alone_is_told_it_has_the_device_to_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    config = _lanes_config(lanes_per_gpu=2, static_checks=False)
    relu = TASKS["relu"]
    seen: list[bool] = []
    rooms: list[float] = []
    with Sandbox(config) as sandbox:
        real_run = sandbox._run

        def run(task, job, lane, measure_time, caller_sizes=False):
            seen.append(job.config.device_alone)
            rooms.append(job.config.memory_share)
            return real_run(task, job, lane, measure_time, caller_sizes)

        monkeypatch.setattr(sandbox, "_run", run)
        result = sandbox.evaluate(relu, relu.solutions["cpu"] + OOM_ONCE)
    assert result.status == "ok", result.message
    assert "rerun_alone" in result.extra
    assert seen == [False, True]  # the first run shares the device; the rerun has it alone
    assert rooms == [0.0, 0.0]  # on the CPU no device memory is known: the workers' own shares


def test_a_job_may_use_the_room_it_was_admitted_into_up_to_half_again_its_need():
    from cuda_agent.kernel_sandbox._parent.lanes import HEADROOM

    pool, (a, _, _) = _bookkeeping_pool([0, 0, 0])
    assert pool.room_share(a, "big") == 0.0  # the device's memory not known yet: the default
    pool.observe("big", 0, _gpu_extra(40, 10, total=200))  # the candidate 40, its reference 10
    pool.observe("small", 0, _gpu_extra(4, 2, total=200))  # capacity 170 of 200
    first = pool.take("big")
    assert pool.room_share(first, "big") == HEADROOM * 40 / 200  # alone: half again its need
    second = pool.take("big")  # 50 + 50 fit in 170
    assert pool.room_share(second, "big") == HEADROOM * 40 / 200
    third = pool.take("small")  # 50 + 50 + 6
    assert pool.room_share(third, "small") == HEADROOM * 4 / 200
    # the room left beside the others bounds it: 170 - 50 - 6 - 10 = 104 for a big job's
    # candidate, more than 60; with a tighter device it is the room
    pool.capacity[0] = 120
    assert pool.room_share(second, "big") == (120 - 50 - 6 - 10) / 200
    pool.capacity[0] = 60
    assert pool.room_share(second, "big") == 0.0  # no room: the worker's own share
    pool.kill()


@pytest.mark.parametrize(
    ("alone", "room", "share"),
    [(False, 0.0, 0.25), (False, 0.1, 0.25), (False, 0.6, 0.6), (False, 3.0, 1.0),
     (True, 0.0, 1.0)],
)  # fmt: skip
def test_the_candidate_worker_allocates_its_share_or_its_room_or_all_when_alone(alone, room, share):
    from cuda_agent.kernel_sandbox._worker import _job_share

    assert _job_share(0.25, alone, room) == share


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
    roomy = JobConfig(**{**fields, "memory_share": 0.4})
    assert JobConfig.from_json(roomy.to_json()).memory_share == 0.4


@pytest.mark.parametrize(
    ("role", "lanes", "share"),
    [("candidate", 1, 1.0), ("candidate", 2, 0.5), ("candidate", 8, 0.25), ("reference", 8, 1.0)],
)
def test_only_candidate_workers_beside_other_lanes_are_capped(role, lanes, share):
    assert _gpu_share(role, lanes) == share


@pytest.mark.gpu
def test_more_devices_than_gpus_are_refused():
    # Device K's workers would see GPU K % n: two devices' gates on one GPU, timings beside
    # each other. More jobs at once on one GPU are lanes.
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    gpus = torch.cuda.device_count()
    with pytest.raises(ValueError, match="each device is a GPU of its own"):
        SandboxConfig(backend="cuda", workers=gpus + 1).resolved()
    assert SandboxConfig(backend="cuda", workers=gpus).resolved().workers == gpus
