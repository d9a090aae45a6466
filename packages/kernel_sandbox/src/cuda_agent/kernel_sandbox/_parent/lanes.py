"""The pool's lanes (the parent): a candidate worker and a reference worker on one device, and
which job gets which idle lane.

Every lane of a device shares that device's ``TimingGate``. Jobs go to lanes with task
affinity: a lane's workers keep the inputs and expected outputs of the tasks it ran lately
(within their memory budget) and the last task's reference model, so a job goes to an idle
lane that ran its task lately when there is one (the most recent first), and the waiting jobs
of the tasks a freed lane ran lately get it first; otherwise tasks are spread, one lane each,
so that a task's first visit is paid once. The job that has waited longest is never passed
over more times than there are lanes.

A job may also need its device to itself (``exclusive``): the rerun of a job that ran out of
memory beside other lanes. The timing gate keeps other lanes' *work* off the device, but not
their *memory*: a lane between two sections still holds its inputs and outputs (on the H200,
2026-12-03, the rerun under the gate alone failed again on 4 GiB-input tasks with other lanes'
workers holding 20 to 42 GiB each). So the device's idle lanes are held back, and the job
waits until every other lane of its device has finished its job (its workers then give their
memory back) or waits for exclusivity itself; one exclusive job per device at a time.

Jobs are also admitted to a device by their memory, so that running out of it is the exception
(on the H200, 2026-12-04, 9 to 22 of an RL step's 43 to 61 evaluations of 4 GiB-input tasks ran
out of memory beside other lanes and ran again alone). Each finished job tells the pool what it
needed on its device: its candidate worker's peak of allocated GPU memory plus its reference
worker's (``extra["peak_gpu_bytes"]``, ``extra["reference_peak_gpu_bytes"]``), and the device's
memory (``extra["gpu_total_bytes"]``). A task's *footprint* is the most any of its jobs needed
(a candidate that allocates much makes its task heavier: fewer of its jobs run at once, nothing
else). A job is handed a lane only when the footprints of the jobs running on that device and
its own fit in ``MEMORY_SHARE`` of the device's memory, or when nothing runs there (so every job
runs, however large). Before any job of a task has run, its ``torch.compile`` baseline (measured
ahead, or kept on disk from an earlier run) stands in for it: the measurement's peak (the task's
inputs and two outputs) counts once for the reference worker, which draws the same inputs and
computes the same forward, and twice for the candidate worker, which holds more beside them (its
output, the exchange of it, the guards around what it allocates): ``baseline_extra``. Too much
costs a little concurrency; too little costs more, since in an RL step the jobs of a task start
together, before the first has finished, and each that runs out of its memory runs again with
the device drained. A task known by neither counts as 0 (its first visit teaches the pool, and
an out-of-memory job still runs again alone).

A candidate worker beside other lanes may allocate only its share of the GPU (a quarter with
eight lanes: a candidate that takes all it can runs out of its own memory, not its
neighbours'). A job admitted by memory may need more: on the H200 (2026-12-04) 40% of an RL
run's evaluations of 4 GiB-input compositions, whose candidate workers need up to 48 GiB, ran
out of their 35 GiB share beside other lanes and ran again alone, although admission had found
room for them. So each job is told how much its candidate worker may allocate (``room_share``):
``HEADROOM`` times what the task's candidate workers needed so far (its footprint less its
reference worker's need), within the room it was admitted into (the device's admissible memory
less the footprints of the jobs running beside it and its own reference worker's need), where
that is more than the worker's share. A candidate that takes all it can then overshoots its
footprint by at most half of it, which the memory admission keeps aside covers; a task whose
candidates need more than was known runs out, runs again alone, and its footprint grows.

A job that does not fit waits; one passed over ``len(lanes)`` times is served before any other,
so large jobs do not starve behind small ones.
On the CPU backend nothing reports device memory, and admission is by lanes alone.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from .gate import LaneHold, TimingGate
from .pool import Worker

RECENT = 8  # tasks a lane remembers for affinity
MEMORY_SHARE = 0.85  # of a device's memory that the footprints of its running jobs may fill
HEADROOM = 1.5  # a candidate worker may allocate this times what its task's candidates needed


def footprint(extra: dict[str, object]) -> tuple[int, int] | None:
    """(bytes a job needed on its device, the device's bytes) from a verdict's ``extra``, or
    ``None`` when it did not run on a GPU (or did not get as far as reporting it)."""
    total = _reported(extra, "gpu_total_bytes")
    if not total:
        return None
    used = _reported(extra, "peak_gpu_bytes") + _reported(extra, "reference_peak_gpu_bytes")
    return min(used, total), total


def _reported(extra: dict[str, object], key: str) -> int:
    """A byte count a verdict reported under ``key``: a positive int, else 0."""
    value = extra.get(key)
    return value if isinstance(value, int) and value > 0 else 0


def baseline_extra(peak_gpu_bytes: int, gpu_total_bytes: int) -> dict[str, object]:
    """A job's memory as ``footprint`` reads it, estimated from its task's baseline measurement
    (``BaselineReport``'s two fields) before any of its jobs has run (module docstring)."""
    return {
        "peak_gpu_bytes": 2 * peak_gpu_bytes,
        "reference_peak_gpu_bytes": peak_gpu_bytes,
        "gpu_total_bytes": gpu_total_bytes,
    }


@dataclass(eq=False)
class Lane:
    """A candidate worker, its reference worker, the file their trial outputs go through, and
    the lane's hold on its device's gate."""

    device: int
    number: int  # within its device
    candidate: Worker
    reference: Worker
    exchange: int  # descriptor of the in-memory exchange file both workers inherit
    hold: LaneHold
    recent: list[str] = field(default_factory=list)  # tasks it ran lately, the last first

    def affinity(self, task: str) -> int:
        """How well this lane suits a job on ``task``: higher for a task it ran more lately."""
        return RECENT - self.recent.index(task) if task in self.recent else 0

    def ran(self, task: str) -> None:
        self.recent = [task, *(t for t in self.recent if t != task)][:RECENT]

    def __post_init__(self) -> None:
        for worker in (self.candidate, self.reference):
            worker.pass_fds = (self.exchange,)
            worker.gate = self.hold
            worker.lane = self.name

    @property
    def name(self) -> str:
        return f"{self.device}.{self.number}"

    def kill(self) -> None:
        self.candidate.kill()
        self.reference.kill()
        with contextlib.suppress(OSError):
            os.close(self.exchange)


@dataclass(eq=False)
class _Waiter:
    task: str
    lane: Lane | None = None
    passed_over: int = 0


@dataclass
class LanePool:
    """Idle lanes handed to waiting jobs (``take`` / ``put``), with task affinity."""

    lanes: list[Lane]
    gates: list[TimingGate]
    _idle: list[Lane] = field(default_factory=list)
    _waiters: list[_Waiter] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _exclusive: dict[int, Lane] = field(default_factory=dict)  # device -> the lane that has it
    _parked: set[Lane] = field(default_factory=set)  # lanes waiting for their device to themselves
    footprints: dict[str, int] = field(default_factory=dict)  # task -> bytes (module docstring)
    reference_needs: dict[str, int] = field(default_factory=dict)  # task -> its reference's bytes
    capacity: dict[int, int] = field(default_factory=dict)  # device -> bytes its jobs may hold
    totals: dict[int, int] = field(default_factory=dict)  # device -> its memory, bytes
    _running: dict[Lane, int] = field(default_factory=dict)  # busy lane -> its job's footprint

    def __post_init__(self) -> None:
        self._idle = list(self.lanes)

    def take(self, task: str) -> Lane:
        """An idle lane for a job on ``task`` (a task digest), waiting for one if need be."""
        me = _Waiter(task)
        with self._cond:
            self._waiters.append(me)
            self._dispatch()
            self._cond.wait_for(lambda: me.lane is not None)
        assert me.lane is not None
        return me.lane

    def observe(self, task: str, device: int, extra: dict[str, object]) -> None:
        """What a finished job of ``task`` on ``device`` needed (its verdict's ``extra``)."""
        found = footprint(extra)
        if found is None:
            return
        used, total = found
        reference = min(_reported(extra, "reference_peak_gpu_bytes"), total)
        with self._cond:
            self.capacity[device] = int(MEMORY_SHARE * total)
            self.totals[device] = total
            self.footprints[task] = max(used, self.footprints.get(task, 0))
            self.reference_needs[task] = max(reference, self.reference_needs.get(task, 0))

    def room_share(self, lane: Lane, task: str) -> float:
        """The share of its device's memory that ``lane``'s candidate worker may allocate for
        the job on ``task`` it was just handed (module docstring); 0.0 where the device's memory
        is not known yet (the worker keeps its own share)."""
        with self._cond:
            capacity, total = self.capacity.get(lane.device), self.totals.get(lane.device)
            if not capacity or not total:
                return 0.0
            others = sum(
                b for x, b in self._running.items() if x.device == lane.device and x is not lane
            )
            reference = self.reference_needs.get(task, 0)
            need = self.footprints.get(task, 0) - reference
            room = min(capacity - others - reference, int(HEADROOM * need))
            return max(room, 0) / total

    def _fits(self, lane: Lane, task: str) -> bool:
        """With the lock held: whether a job on ``task`` may start on ``lane``'s device now."""
        capacity = self.capacity.get(lane.device)
        if capacity is None:
            return True
        running = [b for x, b in self._running.items() if x.device == lane.device]
        return not running or sum(running) + self.footprints.get(task, 0) <= capacity

    def put(self, lane: Lane) -> None:
        """``lane`` is idle again (its hold on the gate released)."""
        lane.hold.release()
        with self._cond:
            self._running.pop(lane, None)
            self._idle.append(lane)
            self._dispatch()
            self._cond.notify_all()  # an exclusive job may be waiting for this lane

    @contextlib.contextmanager
    def exclusive(self, lane: Lane) -> Iterator[None]:
        """Run the body with ``lane``'s device to itself (module docstring): no other lane of
        the device is handed a job, and every other one has finished its job (or is waiting
        for exclusivity too: two such jobs never wait for each other). The caller holds
        ``lane`` (from ``take``) throughout."""
        device = lane.device
        with self._cond:
            self._parked.add(lane)
            self._cond.notify_all()
            self._cond.wait_for(lambda: device not in self._exclusive)
            self._parked.discard(lane)
            self._exclusive[device] = lane
            self._cond.wait_for(
                lambda: all(
                    x is lane or x in self._idle or x in self._parked
                    for x in self.lanes
                    if x.device == device
                )
            )
        try:
            yield
        finally:
            with self._cond:
                del self._exclusive[device]
                self._dispatch()
                self._cond.notify_all()

    def _dispatch(self) -> None:
        """With the lock held: pair idle lanes with waiting jobs, same task first (not the
        lanes of a device an exclusive job has)."""
        held_back = [x for x in self._idle if x.device in self._exclusive]
        self._idle = [x for x in self._idle if x.device not in self._exclusive]
        try:
            self._pair()
        finally:
            self._idle += held_back

    def _pair(self) -> None:
        while self._idle and self._waiters:
            head = self._waiters[0]
            strict = head.passed_over >= len(self.lanes)  # the longest waiter goes first
            pair = None
            if not strict:
                scored = [
                    (lane.affinity(w.task), -k, lane, w)
                    for k, w in enumerate(self._waiters[: len(self.lanes)])
                    for lane in self._idle
                    if self._fits(lane, w.task)
                ]
                best = max(scored, key=lambda x: (x[0], x[1]), default=None)
                if best is not None and best[0] > 0:
                    pair = (best[2], best[3])
            if pair is None:
                # No lane ran a waiting task lately: spread the tasks, one lane each (a task's
                # first visit draws its inputs and computes its expected outputs): the first
                # waiter whose task no lane runs now (else the longest waiter), on the idle
                # lane the other waiters need least; only where its memory fits.
                running = {x.recent[0] for x in self.lanes if x not in self._idle and x.recent}
                window = [head] if strict else self._waiters[: 8 * len(self.lanes)]
                fitting = [w for w in window if any(self._fits(x, w.task) for x in self._idle)]
                if not fitting:
                    break  # they wait for memory: the next put() pairs again
                waiter = next((w for w in fitting if w.task not in running), fitting[0])
                others = [w.task for w in self._waiters if w is not waiter]
                lane = min(
                    (x for x in self._idle if self._fits(x, waiter.task)),
                    key=lambda x: sum(x.affinity(t) for t in others),
                )
                pair = (lane, waiter)
            lane, waiter = pair
            if waiter is not head:
                head.passed_over += 1
            self._idle.remove(lane)
            self._waiters.remove(waiter)
            self._running[lane] = self.footprints.get(waiter.task, 0)
            lane.ran(waiter.task)
            waiter.lane = lane
        self._cond.notify_all()

    def kill(self) -> None:
        for lane in self.lanes:
            lane.kill()
