"""The pool's lanes (the parent): a candidate worker and a reference worker on one device, and
which job gets which idle lane.

Every lane of a device shares that device's ``TimingGate``. Jobs go to lanes with task
affinity: a lane keeps the last task's inputs, expected outputs and reference model (on a GPU,
only that task's), so a job goes to an idle lane that last ran its task when there is one, and
the waiting jobs of the task a freed lane just ran get it first. The job that has waited longest
is never passed over more times than there are lanes.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, field

from .gate import LaneHold, TimingGate
from .pool import Worker


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
    last_task: str = ""

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

    def put(self, lane: Lane) -> None:
        """``lane`` is idle again (its hold on the gate released)."""
        lane.hold.release()
        with self._cond:
            self._idle.append(lane)
            self._dispatch()

    def _dispatch(self) -> None:
        """With the lock held: pair idle lanes with waiting jobs, same task first."""
        while self._idle and self._waiters:
            head = self._waiters[0]
            pair = None
            if head.passed_over < len(self.lanes):
                pair = next(
                    (
                        (lane, w)
                        for w in self._waiters[: len(self.lanes)]
                        for lane in self._idle
                        if lane.last_task == w.task
                    ),
                    None,
                )
            if pair is None:
                # The longest waiter, on a lane no other waiter's task was last on if possible.
                wanted = {w.task for w in self._waiters[1:]}
                lane = next((x for x in self._idle if x.last_task not in wanted), self._idle[0])
                pair = (lane, head)
            lane, waiter = pair
            if waiter is not head:
                head.passed_over += 1
            self._idle.remove(lane)
            self._waiters.remove(waiter)
            lane.last_task = waiter.task
            waiter.lane = lane
        self._cond.notify_all()

    def kill(self) -> None:
        for lane in self.lanes:
            lane.kill()
