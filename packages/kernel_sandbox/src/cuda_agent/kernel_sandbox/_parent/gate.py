"""The timing gate of one device (the parent): correctness work in parallel, timing alone.

Every lane of a device asks the gate before device work. Correctness work (loading a candidate,
its trials, the reference's verdicts) is a *reader*: any number at once. A timing (a candidate's,
or a reference worker's ``torch.compile`` baseline) is a *writer*: it starts only when no reader
and no other writer holds the gate, and holds it alone until it ends.

The gate batches timings. A timing that arrives while checks run does not stop them at once:
for up to ``gather_s`` (or until no check is running) other lanes go on checking, and those
that reach their own timing join the queue. Then the gate closes to new readers, waits for
the readers inside to leave (each holds it for one section, tens of milliseconds), and every
timing queued at that moment runs, one after the other: one drain of the readers serves the
whole batch (measured on the H200: a drain cost a timing about 0.19 s when every timing
drained the readers alone). Readers that arrived while the gate was closed enter together
when that batch is done, before any timing that arrived later. So a reader waits for at most
one batch, and a timing for at most ``gather_s``, one drain and its batch: neither starves.
Gathering pays although a drain is short: while the gate drains, every lane that ends its
section waits, so a drain costs all the lanes, not only the timings queued. On the H200
(2026-12-06, 8 lanes, the built-in suite) gathering for 0.25 s judged 514 a minute; for no
time, 342 (86 drains instead of 30, the readers waiting 85 s instead of 31); for what a drain
had lately cost (about 0.045 s), 473.

A reader that holds the gate for long breaks the promise of a short drain: a candidate that
hangs in its trials, or a slow one, holds its section until the deadline (seconds), and behind
the closed gate every other lane would wait with the timings. So when a drain has waited
``stall_s`` for readers that were inside when the gate closed, the gate lets readers in again
(a *side door*: correctness work beside correctness work, never beside a timing) until those
readers have left; then it closes once more and the timings wait only for the readers that
came in meanwhile. Guests (below) go in by the side door too. The side door opens once a
batch, so a timing waits for at most two drains (were every check slow, it would otherwise
wait drain after drain). The timings still wait for the slow reader, as they must: it may be
using the device.

A *guest* is device work of the gate's own process that is no lane's: the trainer's policy
sampling on the GPU the sandbox times on (``Sandbox.device_work``). It may run beside any
correctness work, but never beside a timing: a timing waits until the guests inside have left
(the gate stays open to readers meanwhile: a guest holds it for seconds, not for one section),
and a guest waits while a batch of timings runs or is due (queued past ``gather_s``), and enters
with the readers when that batch is done. So a guest waits for at most one batch, and a timing
for the guests that entered before its batch fell due. A guest also goes in by the side door
(above): the trainer's sampling goes on while a hanging candidate holds the timings up, and the
timings wait for it too. A thread inside as a guest may enter again (nested work of its own)
without waiting.

``enabled=False`` lets everything through at once: a control for the benchmark that must show
the overlaps the gate prevents (``_shared.trace``).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Literal

Hold = Literal["none", "read", "write"]
HOLDS: tuple[Hold, ...] = ("none", "read", "write")


class TimingGate:
    """A fair readers-writer gate for one device that batches its writers and keeps them off
    its guests (module docstring); ``seconds_waited`` sums what readers, writers and guests
    spent waiting, ``batches`` counts the write phases (``timings / batches``: the mean
    batch), ``guests`` the guests let in."""

    def __init__(self, enabled: bool = True, gather_s: float = 0.25, stall_s: float = 1.0) -> None:
        self.enabled = enabled
        self.gather_s = gather_s
        self.stall_s = stall_s
        self._cond = threading.Condition()
        self._readers = 0  # lanes inside a correctness section
        self._inside: dict[object, None] = {}  # their keys, in order of entry
        self._waiting_keys: list[object] = []  # the keys of the readers waiting
        self._draining: set[object] = set()  # readers inside when the gate closed
        self._closed_at = 0.0
        self._side_door = False  # readers enter past a stalled drain (module docstring)
        self._side_door_used = False  # it opened for the coming batch (it opens once a batch)
        self._side_admissions = 0  # counts side-door openings (waiting readers wake on it)
        self._writer: int | None = None  # the ticket of the lane timing now
        self._queue: deque[int] = deque()  # waiting writers' tickets, in order of arrival
        self._tickets = itertools.count()
        self._batch_end = -1  # the write phase serves the tickets up to this one
        self._phase: Literal["read", "write"] = "read"
        self._closed = False  # no new reader until the coming batch is done
        self._gather_until: float | None = None  # when the coming batch stops gathering
        self._readers_waiting = 0
        self._read_phases = 0  # counts read phases opened after a write phase
        self._guests = 0  # device work of this process beside the lanes (module docstring)
        self._guests_waiting = 0
        self._guest_threads: dict[int, int] = {}  # a guest's thread -> how deep it is inside
        self.seconds_waited = {"read": 0.0, "write": 0.0, "guest": 0.0}
        self.timings = 0
        self.batches = 0
        self.guests = 0  # guests let in
        self.side_door = 0  # readers let in past a stalled drain
        # Where the device's time went between timings: gathering a batch (readers go on,
        # the timings queued wait), draining the readers (the gate closed, new readers wait),
        # and the batches themselves (the device held for timing).
        self.phase_seconds = {"gather": 0.0, "drain": 0.0, "write": 0.0}
        self._gather_from: float | None = None
        self._drain_from: float | None = None
        self._write_from: float | None = None

    def stats(self) -> dict[str, float]:
        """Timings let through, their batches, readers let in by the side door, the seconds
        lanes waited to read and to time, and guests to enter, and the seconds the gate spent
        gathering batches, draining readers and holding the device for batches."""
        return {"timings": self.timings, "batches": self.batches, "side_door": self.side_door,
                "read_wait_s": self.seconds_waited["read"],
                "write_wait_s": self.seconds_waited["write"], "guests": self.guests,
                "guest_wait_s": self.seconds_waited["guest"],
                "gather_s": self.phase_seconds["gather"],
                "drain_s": self.phase_seconds["drain"],
                "write_phase_s": self.phase_seconds["write"]}  # fmt: skip

    # ------------------------------------------------------------------------------ readers
    def acquire_read(self, key: object = None) -> float:
        """Enter as a reader (``key``: who, for ``release_read``; a lane's ``LaneHold``);
        returns the seconds waited."""
        started = time.perf_counter()
        key = object() if key is None else key
        with self._cond:
            if not self.enabled or (
                self._phase == "read" and (not self._closed or self._side_door)
            ):
                self._readers += 1
                self._inside[key] = None
                self.side_door += self._closed and self.enabled
                return 0.0
            self._readers_waiting += 1
            self._waiting_keys.append(key)
            phase, side = self._read_phases, self._side_admissions
            # admitted, and counted, when a read phase opens or the side door does
            self._cond.wait_for(lambda: self._read_phases != phase or self._side_admissions != side)
            waited = time.perf_counter() - started
            self.seconds_waited["read"] += waited
            return waited

    def release_read(self, key: object = None) -> None:
        """Leave as the reader ``key`` (None: the one inside longest, for callers that
        entered without a key)."""
        with self._cond:
            if self._readers <= 0:
                raise RuntimeError("release_read without a reader inside")
            if key is None or key not in self._inside:
                key = next(iter(self._inside), None)
            self._inside.pop(key, None)
            self._readers -= 1
            self._draining.discard(key)
            if self._side_door and not self._draining:
                self._close()  # the slow readers left: the timings wait for the rest only
            self._advance()

    def _close(self) -> None:
        """With the lock held: no new reader until the coming batch is done; the timings wait
        for the readers inside now."""
        self._closed, self._side_door = True, False
        self._closed_at = time.monotonic()
        if self._gather_from is not None:
            self.phase_seconds["gather"] += self._closed_at - self._gather_from
            self._gather_from = None
        if self._drain_from is None:
            self._drain_from = self._closed_at
        self._draining = set(self._inside)
        self._cond.notify_all()  # waiting timings reckon their patience from now

    def _open_side_door(self) -> None:
        """With the lock held: the drain has stalled on slow readers; let readers in."""
        self._side_door = self._side_door_used = True
        self.side_door += self._readers_waiting
        self._admit_waiting_readers()
        self._guests += self._guests_waiting  # the policy's sampling, say, goes on too
        self.guests += self._guests_waiting
        self._guests_waiting = 0
        self._side_admissions += 1
        self._cond.notify_all()

    def _admit_waiting_readers(self) -> None:
        self._readers += self._readers_waiting
        self._inside.update(dict.fromkeys(self._waiting_keys))
        self._readers_waiting, self._waiting_keys = 0, []

    # ------------------------------------------------------------------------------ writers
    def acquire_write(self) -> float:
        """Enter as the writer (alone on the device); returns the seconds waited."""
        started = time.perf_counter()
        with self._cond:
            ticket = next(self._tickets)
            self.timings += 1
            if not self.enabled:
                return 0.0
            self._queue.append(ticket)
            if self._gather_until is None:
                self._gather_until = time.monotonic() + self.gather_s
                self._gather_from = time.monotonic()
            self._advance()
            while self._writer != ticket:
                timeout = None
                if self._phase == "read" and not self._closed and self._gather_until is not None:
                    timeout = self._gather_until - time.monotonic()
                    if timeout <= 0 and self._guests:
                        timeout = None  # readers go on while the guests finish (they notify)
                    elif timeout <= 0:
                        self._close()  # gathered long enough: drain the readers
                        self._advance()
                        continue
                elif (
                    self._phase == "read"
                    and self._closed
                    and self._draining
                    and not (self._side_door or self._side_door_used)
                ):
                    timeout = self._closed_at + self.stall_s - time.monotonic()
                    if timeout <= 0:
                        self._open_side_door()  # the drain stalled on slow readers
                        continue
                self._cond.wait(timeout)
            waited = time.perf_counter() - started
            self.seconds_waited["write"] += waited
            return waited

    def release_write(self) -> None:
        with self._cond:
            if not self.enabled:
                return
            if self._writer is None:
                raise RuntimeError("release_write without a writer inside")
            self._writer = None
            self._advance()

    # ------------------------------------------------------------------------------ guests
    def acquire_guest(self) -> float:
        """Enter as a guest (module docstring); returns the seconds waited. A thread already
        inside as a guest enters again at once (its work nested in its own: waiting there
        for a timing that waits for it would never end)."""
        started = time.perf_counter()
        me = threading.get_ident()
        with self._cond:
            if me in self._guest_threads:
                self._guest_threads[me] += 1
                return 0.0
            if not self._guest_may_enter():
                # admitted with the readers when the read phase opens (``_open_read_phase``)
                # or the side door does (``_open_side_door``)
                self._guests_waiting += 1
                phase, side = self._read_phases, self._side_admissions
                self._cond.wait_for(
                    lambda: self._read_phases != phase or self._side_admissions != side
                )
            else:
                self._guests += 1
                self.guests += 1
            self._guest_threads[me] = 1
            waited = time.perf_counter() - started
            self.seconds_waited["guest"] += waited
            return waited

    def release_guest(self) -> None:
        me = threading.get_ident()
        with self._cond:
            if self._guest_threads.get(me, 0) <= 0:
                raise RuntimeError("release_guest without a guest inside on this thread")
            self._guest_threads[me] -= 1
            if self._guest_threads[me]:
                return  # still inside: a nested entry ended
            del self._guest_threads[me]
            self._guests -= 1
            self._advance()
            self._cond.notify_all()  # a timing may be waiting for the guests to leave

    @contextlib.contextmanager
    def guest(self) -> Iterator[None]:
        """The body as a guest (``acquire_guest`` / ``release_guest``)."""
        self.acquire_guest()
        try:
            yield
        finally:
            self.release_guest()

    def _guest_may_enter(self) -> bool:
        """With the lock held: no timing runs, none is due (queued past its gathering), or the
        side door is open (a drain stalled on slow checks: no timing can start before they
        leave, so the guest's work goes on beside them)."""
        if not self.enabled:
            return True
        due = bool(self._queue) and (
            self._gather_until is None or time.monotonic() >= self._gather_until
        )
        return self._phase == "read" and (self._side_door or (not self._closed and not due))

    # ------------------------------------------------------------------------------ phases
    def _advance(self) -> None:
        """With the lock held: when nobody is inside, admit the next party."""
        if not self.enabled or self._writer is not None or self._readers:
            return
        if self._phase == "write":
            if self._queue and self._queue[0] <= self._batch_end:
                self._admit_writer()  # the batch goes on
                return
            self._open_read_phase()  # the batch is done: the readers who waited for it
            if self._queue:  # timings that arrived during the batch gather from now
                self._gather_until = time.monotonic() + self.gather_s
                self._gather_from = time.monotonic()
            if self._readers or not self._queue:
                return
        if self._queue and not self._guests:  # no reader inside: the GPU is idle, time now
            self._new_batch()

    def _new_batch(self) -> None:
        self._phase = "write"
        self._close()
        now = time.monotonic()
        if self._drain_from is not None:
            self.phase_seconds["drain"] += now - self._drain_from
            self._drain_from = None
        self._write_from = now
        self._gather_until = None
        self._batch_end = self._queue[-1]
        self.batches += 1
        self._admit_writer()

    def _admit_writer(self) -> None:
        self._writer = self._queue.popleft()
        self._cond.notify_all()

    def _open_read_phase(self) -> None:
        if self._write_from is not None:
            self.phase_seconds["write"] += time.monotonic() - self._write_from
            self._write_from = None
        self._phase = "read"
        self._closed, self._side_door, self._side_door_used = False, False, False
        self._draining = set()
        self._admit_waiting_readers()
        self._guests += self._guests_waiting  # (no timing is due now: it gathers afresh)
        self.guests += self._guests_waiting
        self._guests_waiting = 0
        self._read_phases += 1
        self._cond.notify_all()


def guest_gate(gates: list[TimingGate], backend: str, device: str) -> TimingGate | None:
    """The gate of the pool's device that the caller's torch ``device`` (``"cpu"``, ``"cuda"``,
    ``"cuda:K"``) is, or None where the pool does not time there. The pool's devices are the
    caller's visible GPUs in order (a worker of device K sees the caller's ``cuda:K``); on the
    CPU backend the host is its one device."""
    kind, _, index = device.partition(":")
    if kind != backend or (index and not index.isdigit()):
        return None
    k = int(index or 0)
    return gates[k] if k < len(gates) else None


class LaneHold:
    """What one lane holds of its device's gate: nothing, a read or the write. Both workers of
    the lane go through it; the lane's job releases whatever is left when it ends (a worker
    that died inside a section never says so)."""

    def __init__(self, gate: TimingGate | None) -> None:
        self.gate = gate
        self.mode: Hold = "none"
        self.pinned = False  # inside ``alone``: the write is kept whatever is asked

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """Hold the device alone (the write) for a whole job: its workers' requests are
        granted without letting go (a job that ran out of memory beside other lanes runs
        again so)."""
        self.hold("write")
        self.pinned = True
        try:
            yield
        finally:
            self.pinned = False
            self.release()

    def hold(self, mode: Hold) -> float:
        """Hold ``mode`` now (releasing what was held before); returns the seconds waited."""
        if mode == self.mode or self.pinned:
            return 0.0
        self.release()
        if self.gate is None or mode == "none":
            self.mode = mode
            return 0.0
        waited = self.gate.acquire_read(self) if mode == "read" else self.gate.acquire_write()
        self.mode = mode
        return waited

    def release(self) -> None:
        mode, self.mode = self.mode, "none"
        if self.gate is None:
            return
        if mode == "read":
            self.gate.release_read(self)
        elif mode == "write":
            self.gate.release_write()
