"""What every stage works with: the run's policy, critic, sandbox, task sets, metrics and state,
and the one way a stage's step is committed (checkpoint, metrics line, state).

A step is committed in this order: its metrics line is appended, its checkpoint written into a
new directory, then ``state.json`` replaced; a kill before the last write leaves the previous
state, whose ``metrics_bytes`` cuts the line again on resume, so the step is redone once. The
checkpoint and the state are written by a background thread (``checkpoint.BackgroundWriter``)
from copies taken at the commit, while the next step runs: a step is finished once its state
is written, and a kill before that redoes it as a kill during it would. (A warm-start step
takes about 0.3 s on the H200 and its checkpoint as long again: 2026-12-04.) Every other write
of the state waits for the step being written first, so states land in order.

Every step, evaluation and collection is a unit (``Run.unit``): with a deadline given to this
invocation (``deadline.py``) a unit not expected to finish before it is not started, and the
invocation stops at that boundary (``DeadlineStop``) with everything before it committed.

Under several processes (``distributed.py``) every process runs the same stages and keeps the
same state; rank 0 alone writes it (metrics, checkpoints, ``state.json``), and the decisions
that end work early (the deadline, the training budget) are agreed, so all stop together.
"""

from __future__ import annotations

import copy
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from cuda_agent.kernel_sandbox import Sandbox, Task
from cuda_agent.policy import Policy, PolicyOptimizer, ValueModel

from . import distributed as D
from .budget import write_budget
from .checkpoint import BackgroundWriter, RunState, replace_dir, save_state
from .config import TrainConfig
from .deadline import Deadline, DeadlineStop

Log = Callable[[str], None]


class StabilityError(RuntimeError):
    """An update left the configured stability bounds and the run was told to stop."""


class InitFromError(ValueError):
    """``--init-from`` names no weights this run can start from (missing, or another rank)."""


@dataclass
class Run:
    config: TrainConfig
    run_dir: Path
    policy: Policy
    sandbox: Sandbox
    train_tasks: list[Task]
    heldout_tasks: list[Task]
    metrics: Any  # RunMetrics: write(record), size(), truncate(n)
    state: RunState
    log: Log
    advance: Callable[[int], None] = lambda n: None  # the progress display
    value: ValueModel | None = None
    optimizers: dict[str, PolicyOptimizer] = field(default_factory=dict)
    rollouts: Any = None  # ray_rollouts.RayRollouts: episodes collected on Ray actors
    deadline: Deadline | None = None  # this invocation's, if any
    started: float = field(default_factory=time.perf_counter)  # this invocation's start
    writer: BackgroundWriter = field(default_factory=BackgroundWriter)  # checkpoints (rank 0)
    _step_started: float | None = field(default=None, init=False, repr=False)

    @property
    def backend(self) -> str:
        return self.sandbox.backend

    # ------------------------------------------------------------------ critic
    def critic(self) -> ValueModel:
        if self.value is None:
            self.value = ValueModel.from_policy(self.policy)
            D.synchronize(self.value.trainable_parameters())  # (several processes)
        return self.value

    def optimizer(self, name: str, lr: float, critic: bool = False) -> PolicyOptimizer:
        """The stage's optimizer, restored from the checkpoint when the stage was under way."""
        if name not in self.optimizers:
            params = self.critic().trainable_parameters() if critic else None
            if params is None:
                opt = self.policy.optimizer(lr=lr, max_grad_norm=self.config.max_grad_norm)
            else:
                opt = PolicyOptimizer(
                    params,
                    lr=lr,
                    max_grad_norm=self.config.max_grad_norm,
                    cpu=self.policy.device.type == "cpu",
                )
            path = self.run_dir / self.state.checkpoint / f"optimizer-{name}.pt"
            self.writer.wait()  # the checkpoint it may read is written
            if self.state.checkpoint and path.exists():
                opt.optimizer.load_state_dict(torch.load(path, map_location="cpu"))
            self.optimizers[name] = opt
        return self.optimizers[name]

    # ----------------------------------------------------------------- commits
    def restore(self, critic: bool = False, init: Path | None = None) -> None:
        """Load the latest checkpoint's weights (after a kill), or at a run's start the weights
        it starts from (``init``: ``config.init_from`` resolved), and build the critic when the
        run needs one (after the policy's adapter: peft loads that only alone)."""
        where = self.run_dir / self.state.checkpoint if self.state.checkpoint else None
        if where is not None:
            self.log(f"resuming from {self.state.checkpoint}")
            self.policy.load_adapter(where / "adapter")
        elif init is not None:
            self.log(f"starting from the weights in {init}")
            try:
                self.policy.load_adapter(init)
            except (ValueError, FileNotFoundError) as exc:  # another rank, or full weights
                raise InitFromError(f"--init-from {self.config.init_from}: {exc}") from exc
        if critic or (where is not None and (where / "value").exists()):
            value = self.critic()
            if where is not None and (where / "value").exists():
                value.load(where / "value")

    def synchronize(self) -> None:
        """Several processes: rank 0's trainable weights (policy, critic) on every one."""
        D.synchronize(self.policy.trainable_parameters())
        if self.value is not None:
            D.synchronize(self.value.trainable_parameters())

    # ------------------------------------------------------------------ time budget
    def out_of_time(self) -> bool:
        """Whether the training stages have spent ``config.train_budget_s`` (0: never)."""
        budget = self.config.train_budget_s
        spent = bool(budget) and self.state.train_seconds >= budget
        return D.anyone(spent) if D.world_size() > 1 and budget else spent

    def steps(self, stage: str, total: int) -> Iterator[int]:
        """The steps of ``stage`` still to do, ending early (logged) once the training budget
        is spent; each step's wall time counts towards it. Each step is a unit: the deadline
        may stop the invocation before it."""
        for step in range(self.state.steps_done(stage), total):
            if self.out_of_time():
                self.log(
                    f"{stage}: training budget of {self.config.train_budget_s:g} s spent; "
                    f"steps {step + 1} to {total} skipped"
                )
                self.state.budget_cuts[stage] = total - step
                return
            with self.unit(stage, f"{stage} step {step + 1}/{total}"):
                self._step_started = time.perf_counter()
                yield step
                self._count_step_time()

    @contextmanager
    def unit(self, kind: str, what: str) -> Iterator[None]:
        """One unit of work, ``what`` (of ``kind``: the estimates' key): not started when the
        deadline says it would not finish in time (``DeadlineStop``); its wall time, commit
        included, is noted for the next estimates (this process's and, in the state, the
        next invocations'). A unit that raises is not noted."""
        if self.deadline is not None:
            self._check_deadline(kind, what)
        started = time.perf_counter()
        yield
        seconds = time.perf_counter() - started
        if self.deadline is not None:
            self.deadline.finished(kind, seconds)
        self.state.unit_seconds[kind] = max(seconds, self.state.unit_seconds.get(kind, 0.0))

    def _check_deadline(self, kind: str, what: str) -> None:
        """``Deadline.check``, agreed: when any process would stop before the unit, all do."""
        assert self.deadline is not None
        stop: DeadlineStop | None = None
        try:
            self.deadline.check(kind, what, self.state.unit_seconds.get(kind))
        except DeadlineStop as exc:
            stop = exc
        if D.world_size() > 1 and D.anyone(stop is not None) and stop is None:
            stop = DeadlineStop(what, self.deadline.left(), self.deadline.needed(kind))
        if stop is not None:
            raise stop

    def _count_step_time(self) -> None:
        """Add the running step's wall time to the training seconds, once: at its commit (so
        the saved state holds it when the run is killed after it) or when it ends uncommitted."""
        if self._step_started is not None:
            self.state.train_seconds += time.perf_counter() - self._step_started
            self._step_started = None

    def commit_step(self, stage: str, record: dict[str, Any], step: int) -> None:
        """Record a finished step of ``stage`` and checkpoint everything it changed (rank 0
        writes: the weights and the optimizers' state are the same on every process)."""
        name = f"{stage}-{step + 1}"
        if D.is_main():
            self.metrics.write({"stage": stage, "step": step, **record})
        self.state.checkpoint = f"checkpoints/{name}"
        self.state.stage_steps[stage] = step + 1
        if stage == "rl":
            self.state.rl_steps_done = step + 1
        self._count_step_time()
        if D.is_main():
            # from copies taken now, written while the next step runs; with a critic, or a
            # policy that takes no snapshot (sharded, or no LoRA), written here and now
            background = self.value is None and self.policy.snapshots_weights
            write = self._checkpoint_write(name, background)
            if background:
                self.writer.submit(write)
            else:
                self.writer.wait()
                write()
        self.advance(1)

    def _checkpoint_write(self, name: str, snapshot: bool) -> Callable[[], None]:
        """What writes the checkpoint ``name`` and then the state that names it: with
        ``snapshot`` from copies of the weights, the optimizers' state and the state taken now
        (so that it may run later, in another thread), else from the live objects."""
        weights = self.policy.weights_snapshot() if snapshot else None
        policy, value = self.policy, self.value  # (a critic made after this is not in it)
        budget = self.config.max_new_tokens  # the run's answer budget, resolved
        optimizers = {
            key: _cpu_copy(opt.optimizer.state_dict()) if snapshot else opt.optimizer.state_dict()
            for key, opt in self.optimizers.items()
        }
        state = self._state_to_save()
        root = self.run_dir / "checkpoints"

        def write() -> None:
            staged = root / f".{name}.partial"
            staged.mkdir(parents=True, exist_ok=True)
            if weights is None:
                policy.save(staged / "adapter")
            else:
                weights.write(staged / "adapter")
            write_budget(staged / "adapter", budget)
            if value is not None:
                value.save(staged / "value")
            for key, optimizer_state in optimizers.items():
                torch.save(optimizer_state, staged / f"optimizer-{key}.pt")
            replace_dir(staged, root / name)
            save_state(self.run_dir, state)
            self._prune(state.checkpoint)

        return write

    def finish_stage(self, stage: str, record: dict[str, Any] | None = None) -> None:
        if record is not None and D.is_main():
            self.metrics.write({"stage": stage, **record})
        self.state.finished_stages.append(stage)
        self.optimizers.clear()  # the next stage starts its own
        self.save()

    def save(self) -> None:
        """Write the state (rank 0; the other processes keep the same state unwritten), after
        the checkpoint being written, if any."""
        if not D.is_main():
            return
        state = self._state_to_save()
        self.writer.wait()
        save_state(self.run_dir, state)

    def _state_to_save(self) -> RunState:
        """A copy of the state as it is now, this invocation's record brought up to date."""
        self.state.metrics_bytes = self.metrics.size()
        if self.state.sessions:  # this invocation's record, up to now
            self.state.sessions[-1].update(
                seconds=round(time.perf_counter() - self.started, 3),
                stage_steps=dict(self.state.stage_steps),
            )
        return copy.deepcopy(self.state)

    def end_session(self, end: str, **details: Any) -> None:
        """Close this invocation's record (``end``: "finished" or "deadline") and save."""
        if self.state.sessions:
            self.state.sessions[-1].update(end=end, **details)
        self.save()

    def prune(self) -> None:
        """Every checkpoint but the committed one, and half-written (dot) directories, go."""
        if D.is_main():
            self.writer.wait()
            self._prune(self.state.checkpoint)

    def _prune(self, keep: str) -> None:
        root = self.run_dir / "checkpoints"
        if not root.exists():
            return
        for path in root.iterdir():
            if f"checkpoints/{path.name}" != keep:
                shutil.rmtree(path, ignore_errors=True)


def _cpu_copy(value: Any) -> Any:
    """``value`` (an optimizer's state dict) with every tensor copied to the CPU: what a later
    step changes in place does not reach it."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _cpu_copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_cpu_copy(v) for v in value)
    return value
