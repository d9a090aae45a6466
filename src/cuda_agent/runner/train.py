"""The training run: the stages of ``runner/stages`` in order, with resume, checkpoints and
metrics owned here once.

    evaluate before (held-out, training) -> warm start -> single-turn RL warm-up
    -> trajectory collection + rejection fine-tuning -> value pre-training
    -> multi-turn agentic RL -> evaluate after (held-out, training)

Every step of every stage ends with a checkpoint and a metrics line (``Run.commit_step``), so
``--resume`` (or the same ``--out``) continues a killed run from the last finished step. The
resolved config is written into the run directory; the metrics go to ``metrics.jsonl`` and
TensorBoard (``tensorboard --logdir runs/``), and PNG curves are drawn at the end; then
``summary.json``, ``report.html`` (``report``) and a short table on the terminal.

With a ``deadline`` (``deadline.py``) an invocation stops cleanly between two units of work
(``DeadlineStop``) and the next one resumes: a run may span several invocations, each recorded
in ``state.json``'s ``sessions``; the summary's figures are the whole run's.

Launched over N processes (``torchrun --nproc-per-node N -m cuda_agent.runner train ...``,
``accelerate launch``) it is one job: each step's tasks, rows and evaluations are split over
the processes and rank 0 writes everything (``distributed.py``).
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from pathlib import Path
from typing import Any

import torch

from cuda_agent.kernel_sandbox import Deadlines, Sandbox, SandboxConfig
from cuda_agent.policy import Policy, PolicyConfig
from cuda_agent.reward import renamed_keys

from . import distributed as D
from . import machine
from .budget import inherited_budget, resolve_budget, warmstart_examples, write_budget
from .checkpoint import (
    job_log_path,
    load_state,
    replace_dir,
    trained_weights,
    write_json_atomic,
)
from .config import TrainConfig
from .context import InitFromError, Log, Run
from .deadline import Deadline, DeadlineStop
from .eval.comparison import compare_files, compare_sets, read_rows
from .metrics import NullMetrics, RunMetrics, StageProgress, plot_curves
from .report import write_report
from .report.terminal import train_table
from .run_lock import RunInUseError, RunLock
from .stages import baselines, evaluation, rft, rl, value, warmstart
from .task_sets import named_parts, task_sets

EVAL_POINTS = ("_before", "_warmstart", "_after")  # evaluation stages' name endings


def sandbox_config(config: TrainConfig) -> SandboxConfig:
    """The sandbox a run judges its answers and evaluations in: the config's backend, lanes and
    correctness deadline; several processes each take their own GPU or part of the CPU's lanes
    (``distributed.sandbox_share``)."""
    return SandboxConfig(
        backend=config.backend,
        deadlines=Deadlines(correctness=config.correctness_deadline_s),
        ray_address=config.ray_address or None,
        **D.sandbox_share(
            config.backend,
            config.ray_sandbox_workers,
            config.lanes_per_gpu or "auto",
            on_ray=bool(config.ray_address),
        ),
    )


def train(
    config: TrainConfig,
    log: Log = print,
    progress: bool = True,
    deadline: Deadline | None = None,
) -> dict[str, Any]:
    """Run (or resume) a training run; returns the summary also written to summary.json,
    writes report.html and logs the closing table (``report.terminal.train_table``).

    With a ``deadline`` it may stop before the run's end, raising ``DeadlineStop`` (its
    ``run_dir`` set) once everything done is committed; call again to continue."""
    started = time.perf_counter()
    D.check(config)
    device = D.setup(config.device)  # several processes: join them (this one's device)
    run_dir = Path(D.broadcast(str(config.out_dir())))  # (a default name is rank 0's time)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(run_dir) if D.is_main() else None  # the writer holds the directory
    refused = None
    if lock is not None:
        try:
            lock.acquire()
        except RunInUseError as exc:
            refused = str(exc)
    refused = D.broadcast(refused)  # (every process stops, none waits in a collective)
    if refused:
        raise RunInUseError(refused)
    try:
        return _train(config, run_dir, device, log, progress, deadline, started)
    finally:
        if lock is not None:
            lock.release()


def _train(
    config: TrainConfig,
    run_dir: Path,
    device: str,
    log: Log,
    progress: bool,
    deadline: Deadline | None,
    started: float,
) -> dict[str, Any]:
    """``train`` once this process holds the run directory (rank 0) or is one of its job's."""
    main = D.is_main()
    if not main:  # rank 0 speaks for the run
        log, progress = (lambda _line: None), False
    state = D.broadcast(load_state(run_dir) if main else None)  # read before rank 0 writes
    assert state is not None
    init = None
    if config.init_from and not state.checkpoint:  # read at the start only (checked first)
        try:
            init = trained_weights(config.init_from)
        except ValueError as exc:
            raise InitFromError(f"--init-from: {exc}") from exc
    train_tasks, heldout = task_sets(config)
    metrics: RunMetrics | NullMetrics = RunMetrics(run_dir) if main else NullMetrics()
    if state.metrics_bytes is not None:
        metrics.truncate(state.metrics_bytes)  # records of work that the kill left unfinished
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    # (``processes``: how many the launcher started; a run resumes under as many; ``machine``:
    # where this invocation ran, since a run's calls may land on different hosts)
    state.sessions.append(
        {"started": now, "seconds": 0.0, "end": "", "processes": D.world_size(),
         "machine": machine.describe()}
    )  # fmt: skip
    torch.manual_seed(config.seed)
    log(
        f"run directory: {run_dir}  training tasks: {len(train_tasks)}  held-out tasks: "
        f"{len(heldout)}  loading policy {config.model} ..."
    )
    policy_config = PolicyConfig(
        model=config.model,
        device=device,
        lora_rank=config.lora_rank,
        lora_alpha=config.lora_alpha,
        gradient_checkpointing=config.gradient_checkpointing,
        checkpoint_min_tokens=config.checkpoint_min_tokens,
        repetition_stop=config.repetition_stop,
        seed=config.seed,
    )
    policy = Policy.load(policy_config)
    sandbox = Sandbox(sandbox_config(config), job_log=job_log_path(run_dir))
    on_gpu = str(policy.device).startswith("cuda")
    if D.launched_world() > 1 and on_gpu and sandbox.backend == "cuda" and not config.ray_address:
        # (D.sandbox_share: this process's sandbox has its GPU alone, the policy's cuda:RANK)
        sandbox.alias_device(str(policy.device), 0)
    rollouts = None
    if config.ray_rollout_workers and main:  # several processes: rank 0 collects for all
        from .ray_rollouts import RayRollouts

        rollouts = RayRollouts(policy_config, sandbox, config.ray_rollout_workers)
    log(
        f"sandbox backend: {sandbox.backend} ({sandbox.config.workers} device(s), "
        f"{sandbox.config.lanes_per_gpu} lanes each); policy on "
        f"{policy.device} ({getattr(policy.model, 'dtype', '?')})"
    )
    examples = warmstart_examples(policy, train_tasks, sandbox.backend, config.warmstart_solutions)
    inherited = inherited_budget(config.init_from)
    budget = resolve_budget(
        config.max_new_tokens, examples, sandbox.backend, config.warmstart_steps > 0, inherited
    )
    if budget != config.max_new_tokens:
        longest = max((len(e.response_ids) for e in examples), default=0)
        source = f"the --init-from run's {inherited}, " if inherited else ""
        log(f"answer budget: {budget} tokens (auto: {source}longest warm-start answer {longest})")
        config = dataclasses.replace(config, max_new_tokens=budget)
    if main:
        write_json_atomic(run_dir / "config.json", config.to_dict())  # the resolved config

    # Without a held-out set (a task directory of the user's alone) the training tasks are
    # evaluated instead, and the summary names them as such.
    evals = [("heldout", heldout)] + (
        [("train", train_tasks)] if config.eval_train or not heldout else []
    )
    evals = [(name, tasks) for name, tasks in evals if tasks]
    points = (
        1
        + int(config.eval_before)
        + int(bool(config.eval_after_warmstart and config.warmstart_steps))
    )
    units = config.stage_units()
    display = StageProgress(points * len(evals) + sum(units.values()), enabled=progress)
    done = len([s for s in state.finished_stages if s.endswith(EVAL_POINTS)])
    display.advance(done + sum(state.stage_steps.values()))
    ctx = Run(
        config,
        run_dir,
        policy,
        sandbox,
        train_tasks,
        heldout,
        metrics,
        state,
        log,
        advance=display.advance,
        rollouts=rollouts,
        deadline=deadline,
        started=started,
    )
    ctx.save()  # this invocation's record, before any work
    ctx.restore(critic=config.needs_critic, init=init)
    ctx.synchronize()  # several processes: one set of starting weights
    ctx.prune()  # checkpoints a killed run wrote but never committed
    try:
        with sandbox:
            baselines.run(ctx, baselines.judged(config, train_tasks, evals))
            for name, tasks in evals if config.eval_before else []:
                display.stage(f"{name}_before", 1)
                evaluation.run(ctx, f"{name}_before", tasks)
            plan = {
                "warmstart": lambda: warmstart.run(ctx, examples),
                "rl_warmup": lambda: rl.run(ctx, "rl_warmup"),
                "rft": lambda: rft.run(ctx),
                "value": lambda: value.run(ctx),
                "rl": lambda: rl.run(ctx, "rl"),
            }
            for stage, stage_units in units.items():
                if stage_units and stage not in state.finished_stages:
                    display.stage(stage, stage_units)
                    plan[stage]()
                if stage == "warmstart" and stage_units and config.eval_after_warmstart:
                    for name, tasks in evals:
                        display.stage(f"{name}_warmstart", 1)
                        evaluation.run(ctx, f"{name}_warmstart", tasks)
            for name, tasks in evals:
                display.stage(f"{name}_after", 1)
                evaluation.run(ctx, f"{name}_after", tasks)
    except DeadlineStop as stop:  # everything before the unit is committed: say where it was
        ctx.end_session("deadline", stopped_before=stop.what)
        stop.run_dir = run_dir
        raise
    finally:
        ctx.writer.close()  # the last checkpoint written (its error, if any, raised)
        display.close()
        metrics.close()
        if rollouts is not None:
            rollouts.close()

    if not main:  # rank 0 writes the adapter, the curves, the summary and the report
        ctx.end_session("finished")
        return {"run_dir": str(run_dir), "rank": D.rank()}
    # written aside and moved into place: a kill while saving leaves no half-written adapter
    policy.save(run_dir / ".adapter.partial")
    write_budget(run_dir / ".adapter.partial", config.max_new_tokens)
    replace_dir(run_dir / ".adapter.partial", run_dir / "adapter")
    curves = plot_curves(run_dir / "metrics.jsonl", run_dir / "curves")
    ctx.end_session("finished")
    e = state.evaluations
    summary: dict[str, Any] = {
        "run_dir": str(run_dir),
        "backend": sandbox.backend,
        "model": config.model,
        "init_from": config.init_from or None,  # the weights the run started from
        "training_tasks": [t.name for t in train_tasks],
        "heldout_tasks": [t.name for t in heldout],
        "max_new_tokens": config.max_new_tokens,
        "seconds_this_session": time.perf_counter() - started,
        # the whole run's: the invocations it took (after deadlines or kills), their wall
        # seconds (each from its call of train(): the interpreter's start-up is not in them)
        # and the training stages' seconds, summed over them
        "invocations": len(state.sessions),
        "wall_seconds": sum(s.get("seconds", 0.0) for s in state.sessions),
        "train_seconds": state.train_seconds,
        "sessions": state.sessions,
        "budget_cuts": dict(state.budget_cuts),  # steps the training budget cut, by stage
        "adapter": str(run_dir / "adapter"),
        "curves": [str(p) for p in curves],
    }
    for name, _ in evals:
        for when in ("before", "warmstart", "after"):
            if when == "warmstart" and f"{name}_{when}" not in e:
                continue
            # a run resumed from before issue 31 recorded fast_1 as faster_than_eager
            got = renamed_keys(e.get(f"{name}_{when}", {}))
            for key in ("mean_reward", "pass_rate", "fast_1"):
                summary[f"{name}_{key}_{when}"] = got.get(key)
    for name, _ in evals:
        # paired over the same tasks: what the whole run adds, and what RL adds to the warm start
        for first in ("before", "warmstart"):
            before, after = run_dir / "eval" / f"{name}_{first}", run_dir / "eval" / f"{name}_after"
            if (before / "eval.json").is_file() and (after / "eval.json").is_file():
                summary[f"{name}_gain_after_over_{first}"] = compare_files(before, after)
                # several named held-out sets in one evaluation: each set's gain apart
                parts = (
                    named_parts(config.eval_tasks, config.kernelbench) if name == "heldout" else {}
                )
                for part, gain in compare_sets(read_rows(before), read_rows(after), parts).items():
                    sets = summary.setdefault(f"{name}_sets", {})
                    sets.setdefault(part, {})[f"gain_after_over_{first}"] = gain
    summary["report"] = str(run_dir / "report.html")
    write_json_atomic(run_dir / "summary.json", summary)
    try:  # the run is done and recorded: a failing page says so and leaves it as it is
        write_report(run_dir)
    except Exception as exc:
        log(f"report.html not written ({type(exc).__name__}: {exc}); 'cuda-agent report "
            f"{run_dir}' retries it")  # fmt: skip
    log(train_table(summary))
    return summary
