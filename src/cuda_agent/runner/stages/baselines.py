"""The baselines stage, before the first evaluation: the ``torch.compile`` baseline of every
task the run will judge (``judged``: the evaluations' tasks, and the training tasks when a
stage samples and judges them) measured ahead (``Sandbox.measure_baselines``: in parallel
lanes, each timing alone on its device, kept on disk per task, sizes, GPU and torch version),
so that no RL step waits for one. A killed run resumes it where it stopped (kept baselines are
not measured again); on the CPU backend, where ``torch.compile`` is not timed, it has nothing
to do and records nothing. Under several processes each measures its part of the tasks on its
own sandbox (its GPU) into the shared cache; the counts are every process's.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from cuda_agent.kernel_sandbox import Task

from .. import distributed as D
from ..config import TrainConfig
from ..context import Run

STAGE = "baselines"


def judged(
    config: TrainConfig, train_tasks: Sequence[Task], evals: Iterable[tuple[str, Sequence[Task]]]
) -> list[Task]:
    """The tasks whose answers the run sends to the sandbox, each once, in order: every
    evaluation's, and the training tasks when a stage after the warm start runs (RL, its
    warm-up, RFT, or the value stage, which collects RFT's episodes when that stage is off:
    ``TrainConfig.stage_units``). A run that only fine-tunes on solutions judges no training
    task (on the H200 the 216 training tasks' baselines took 148 s of a warm-start-only run
    that never used them)."""
    samples = any(n for stage, n in config.stage_units().items() if stage != "warmstart")
    groups = [tasks for _, tasks in evals] + ([train_tasks] if samples else [])
    unique = {t.name: t for tasks in groups for t in tasks}
    return list(unique.values())


def run(ctx: Run, tasks: Sequence[Task]) -> None:
    if STAGE in ctx.state.finished_stages:
        return
    with ctx.unit(STAGE, "the baselines"):  # a deadline stops the invocation before it
        _measure(ctx, tasks)


def _measure(ctx: Run, tasks: Sequence[Task]) -> None:
    started = time.perf_counter()
    mine = D.share(tasks)
    statuses = [s for part in D.gather(ctx.sandbox.measure_baselines(mine) if mine else [])
                for s in part]  # fmt: skip
    counts = {k: sum(s.status == k for s in statuses) for k in ("measured", "kept", "failed")}
    if any(s.status != "off" for s in statuses):
        seconds = time.perf_counter() - started
        ctx.log(
            f"baselines: {counts['measured']} measured, {counts['kept']} kept, "
            f"{counts['failed']} failed, in {seconds:.0f} s"
        )
        failed = [s.task for s in statuses if s.status == "failed"]
        ctx.finish_stage(STAGE, {**counts, "seconds": seconds, "failed_tasks": failed})
    else:
        ctx.finish_stage(STAGE)
