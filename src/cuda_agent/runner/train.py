"""The training run: stages composed from the packages, with checkpoints and metrics.

    evaluate (before) -> warm start (supervised) -> RL steps (single-turn PPO) -> evaluate (after)

Every stage and every RL step ends with a checkpoint and a metrics line, so ``--resume``
continues a killed run from the last finished step.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from cuda_agent.agent import SamplingParams, Trajectory, rollout_single_turn
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, Task, builtin_tasks, load_tasks
from cuda_agent.policy import Policy, PolicyConfig, PolicyOptimizer
from cuda_agent.rl_core import (
    approx_kl_k3,
    clip_fraction,
    group_normalized_advantages,
    ppo_clipped_policy_loss,
)

from .budget import WarmStartExample, resolve_budget, warmstart_examples
from .checkpoint import (
    MetricsWriter,
    load_state,
    replace_dir,
    save_state,
    write_json_atomic,
)
from .config import TrainConfig

Log = Callable[[str], None]


# ------------------------------------------------------------------------------ helpers
def _pad(rows: Sequence[Sequence[float]], width: int) -> torch.Tensor:
    out = torch.zeros(len(rows), width)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.float32)
    return out


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def load_task_suite(config: TrainConfig) -> list[Task]:
    """``--tasks``: empty = the built-in starter suite, ``builtin`` = every built-in task,
    otherwise a task file or directory."""
    if not config.tasks:
        return builtin_tasks("starter")
    if config.tasks == "builtin":
        return builtin_tasks()
    return load_tasks(config.tasks)


# ----------------------------------------------------------------------------- evaluation
def evaluate_policy(
    policy: Policy, sandbox: Sandbox, tasks: Sequence[Task], config: TrainConfig
) -> dict[str, Any]:
    """Greedy answer per task, evaluated and rewarded: the before/after yardstick.

    The record keeps each answer's text: a wrong verdict is read against what was written.
    """
    started = time.perf_counter()
    policy.eval()
    trajectories = rollout_single_turn(
        policy,
        sandbox,
        tasks,
        SamplingParams(n=1, max_new_tokens=config.max_new_tokens, temperature=0.0),
    )
    return {
        **_rollout_stats(trajectories),
        "per_task": {t.task: t.reward for t in trajectories},
        "feedback": {t.task: t.feedback for t in trajectories},
        "answers": {t.task: t.text for t in trajectories},
        "seconds": time.perf_counter() - started,
    }


def _rollout_stats(trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    rewards = [t.reward for t in trajectories]
    results = [t.result for t in trajectories]
    speedups = [
        r.speedup_vs_eager for r in results if r is not None and r.correct and r.speedup_vs_eager
    ]
    n = max(1, len(trajectories))
    return {
        "mean_reward": statistics.fmean(rewards) if rewards else 0.0,
        "frac_parsed": sum(t.candidate is not None for t in trajectories) / n,
        "frac_compiled": sum(r is not None and r.status != "compile_error" for r in results) / n,
        "frac_correct": sum(r is not None and r.correct for r in results) / n,
        # cut by the answer budget (finish_reason "length"): a budget too small shows here
        "frac_truncated": sum(t.finish_reason == "length" for t in trajectories) / n,
        "mean_speedup_vs_eager": statistics.fmean(speedups) if speedups else None,
        "mean_response_tokens": statistics.fmean(len(t.response_ids) for t in trajectories)
        if trajectories
        else 0.0,
    }


# ----------------------------------------------------------------------------- warm start
def warm_start(
    policy: Policy,
    examples: Sequence[WarmStartExample],
    backend: str,
    config: TrainConfig,
    log: Log,
) -> list[dict[str, Any]]:
    """Supervised fine-tuning on the tasks' reference solutions (negative log-likelihood).

    The answer format is exactly what rollouts parse: one fenced Python block with ModelNew
    (``budget.answer_text``); the run's answer budget holds the longest (``budget.py``).
    """
    if not examples:
        log(f"warm start skipped: no task has a {backend} reference solution")
        return []
    optimizer = policy.optimizer(lr=config.warmstart_lr, max_grad_norm=config.max_grad_norm)
    rng = random.Random(config.seed)
    records = []
    policy.train()
    for step in range(config.warmstart_steps):
        started = time.perf_counter()
        batch = rng.sample(examples, min(config.warmstart_batch, len(examples)))
        total_tokens = sum(len(e.response_ids) for e in batch)
        loss_sum = 0.0
        for micro in _chunks(batch, config.micro_batch):
            out = policy.token_logprobs(
                [e.prompt_ids for e in micro], [e.response_ids for e in micro]
            )
            nll = -(out.logprobs * out.mask).sum() / total_tokens
            optimizer.backward(nll)
            loss_sum += nll.item()
        optimizer.step()
        record = {
            "stage": "warmstart",
            "step": step,
            "nll": loss_sum,
            "tokens": total_tokens,
            "seconds": time.perf_counter() - started,
        }
        records.append(record)
        log(f"warm start {step + 1}/{config.warmstart_steps}: nll/token {loss_sum:.3f}")
    return records


# --------------------------------------------------------------------------------- RL step
def rl_step(
    policy: Policy,
    sandbox: Sandbox,
    optimizer: PolicyOptimizer,
    tasks: Sequence[Task],
    step: int,
    config: TrainConfig,
) -> dict[str, Any]:
    """One single-turn PPO step: roll out groups, group-normalise rewards, clipped update."""
    started = time.perf_counter()
    policy.eval()
    trajectories = rollout_single_turn(
        policy,
        sandbox,
        tasks,
        SamplingParams(
            n=config.group_size,
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            seed=config.seed * 100_003 + step,
        ),
    )
    rollout_seconds = time.perf_counter() - started

    rewards_gn = torch.tensor([t.reward for t in trajectories]).view(len(tasks), config.group_size)
    advantages = group_normalized_advantages(rewards_gn).flatten().tolist()
    # Groups whose rewards are all equal carry no signal (DAPO's dynamic sampling filter):
    # skip their compute rather than train on advantages that are zero up to rounding.
    informative = (rewards_gn.max(dim=1).values > rewards_gn.min(dim=1).values).tolist()
    chosen = [
        (t, a)
        for t, a in zip(trajectories, advantages, strict=True)
        if informative[t.group] and t.response_ids
    ]
    total_tokens = sum(len(t.response_ids) for t, _ in chosen)
    loss_sum = clip_sum = kl_sum = 0.0
    grad_norm = 0.0
    policy.train()
    for micro in _chunks(chosen, config.micro_batch):
        out = policy.token_logprobs(
            [t.prompt_ids for t, _ in micro], [t.response_ids for t, _ in micro]
        )
        logprobs_bt = out.logprobs.float()
        width = logprobs_bt.shape[1]
        old = _pad([t.sampler_logprobs for t, _ in micro], width).to(logprobs_bt.device)
        adv = torch.tensor([a for _, a in micro], device=logprobs_bt.device).unsqueeze(1)
        mask = out.mask.to(out.logprobs.dtype)
        loss_bt = ppo_clipped_policy_loss(
            logprobs_bt, old, adv, eps_low=config.eps_low, eps_high=config.eps_high
        )
        loss = (loss_bt * mask).sum() / total_tokens  # token-mean over the whole batch
        optimizer.backward(loss)
        loss_sum += loss.item()
        with torch.no_grad():
            n_tok = float(mask.sum())
            clipped = clip_fraction(logprobs_bt, old, out.mask, config.eps_low, config.eps_high)
            clip_sum += float(clipped) * n_tok
            kl_sum += float((approx_kl_k3(logprobs_bt, old) * mask).sum())
    if chosen:
        grad_norm = optimizer.step()["grad_norm"]  # clipped to max_grad_norm
    return {
        "stage": "rl",
        "step": step,
        **_rollout_stats(trajectories),
        "tasks": [t.name for t in tasks],
        "trained_sequences": len(chosen),
        "trained_tokens": total_tokens,
        "loss": loss_sum,
        "clip_fraction": clip_sum / total_tokens if total_tokens else 0.0,
        "approx_kl": kl_sum / total_tokens if total_tokens else 0.0,
        "grad_norm": grad_norm,
        "rollout_seconds": rollout_seconds,
        "seconds": time.perf_counter() - started,
    }


# ------------------------------------------------------------------------------- the run
def _checkpoint(policy: Policy, optimizer: PolicyOptimizer | None, run_dir: Path, name: str) -> str:
    staged = run_dir / "checkpoints" / f".{name}.partial"
    staged.mkdir(parents=True, exist_ok=True)
    policy.save(staged / "adapter")
    if optimizer is not None:
        torch.save(optimizer.state_dict(), staged / "optimizer.pt")
    replace_dir(staged, run_dir / "checkpoints" / name)
    return f"checkpoints/{name}"


def _prune_checkpoints(run_dir: Path, committed: str) -> None:
    """Remove every RL checkpoint but the committed one, and half-written (dot) directories."""
    for path in (run_dir / "checkpoints").glob("*"):
        stale_rl = path.name.startswith("rl-") and f"checkpoints/{path.name}" != committed
        if stale_rl or path.name.startswith("."):
            shutil.rmtree(path, ignore_errors=True)


def train(config: TrainConfig, log: Log = print, progress: bool = True) -> dict[str, Any]:
    """Run (or resume) a training run; returns the summary also written to summary.json."""
    from tqdm import tqdm

    run_dir = config.out_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / "config.json", config.to_dict())
    state = load_state(run_dir)
    metrics = MetricsWriter(run_dir / "metrics.jsonl")
    if state.metrics_bytes is not None:
        metrics.truncate(state.metrics_bytes)  # records of work that the kill left unfinished
    _prune_checkpoints(run_dir, state.checkpoint)  # written by a killed run, never committed

    def commit() -> None:
        """Save the state: the work done so far and the metrics lines that record it."""
        state.metrics_bytes = metrics.size()
        save_state(run_dir, state)

    started = time.perf_counter()
    torch.manual_seed(config.seed)

    tasks = load_task_suite(config)
    log(f"run directory: {run_dir}  tasks: {len(tasks)}  loading policy {config.model} ...")
    policy = Policy.load(
        PolicyConfig(
            model=config.model,
            device=config.device,
            lora_rank=config.lora_rank,
            lora_alpha=config.lora_alpha,
            seed=config.seed,
        )
    )
    sandbox = Sandbox(SandboxConfig(backend=config.backend))  # type: ignore[arg-type]
    backend = sandbox.backend
    dtype = getattr(policy.model, "dtype", "?")  # the base weights; LoRA may keep fp32
    log(
        f"sandbox backend: {backend} ({sandbox.config.workers} workers); "
        f"policy on {policy.device} ({dtype})"
    )
    examples = warmstart_examples(policy, tasks, backend, config.warmstart_solutions)
    budget = resolve_budget(config.max_new_tokens, examples, backend, config.warmstart_steps > 0)
    if budget != config.max_new_tokens:
        longest = max((len(e.response_ids) for e in examples), default=0)
        log(f"answer budget: {budget} tokens (auto; longest warm-start answer {longest})")
        config = dataclasses.replace(config, max_new_tokens=budget)
        write_json_atomic(run_dir / "config.json", config.to_dict())  # the resolved config
    if state.checkpoint:
        log(f"resuming from {state.checkpoint} (RL steps done: {state.rl_steps_done})")
        policy.load_adapter(run_dir / state.checkpoint / "adapter")
    optimizer = policy.optimizer(lr=config.lr, max_grad_norm=config.max_grad_norm)
    opt_path = run_dir / state.checkpoint / "optimizer.pt"
    if state.checkpoint and "rl" in state.checkpoint and opt_path.exists():
        optimizer.load_state_dict(torch.load(opt_path, map_location="cpu"))

    eval_tasks = tasks[: config.eval_tasks] if config.eval_tasks else tasks
    total = 2 + (1 if config.warmstart_steps else 0) + config.steps
    bar = tqdm(total=total, desc="cuda-agent train", disable=not progress, unit="stage")
    bar.update(len(state.finished_stages) + state.rl_steps_done)
    try:
        with sandbox:
            if "eval_before" not in state.finished_stages:
                state.eval_before = evaluate_policy(policy, sandbox, eval_tasks, config)
                metrics.write({"stage": "eval_before", **state.eval_before})
                state.finished_stages.append("eval_before")
                commit()
                bar.update()
            log(f"mean reward before training: {state.eval_before['mean_reward']:.3f}")  # type: ignore[index]

            if config.warmstart_steps and "warmstart" not in state.finished_stages:
                for record in warm_start(policy, examples, backend, config, log):
                    metrics.write(record)
                state.checkpoint = _checkpoint(policy, None, run_dir, "warmstart")
                state.finished_stages.append("warmstart")
                commit()
                bar.update()

            rng = random.Random(config.seed)
            order = [rng.sample(range(len(tasks)), len(tasks)) for _ in range(config.steps)]
            for step in range(state.rl_steps_done, config.steps):
                picked = [tasks[i] for i in order[step][: config.tasks_per_step]]
                record = rl_step(policy, sandbox, optimizer, picked, step, config)
                metrics.write(record)
                # A new directory per step: until the state is committed, the last committed
                # checkpoint stays as it was (a kill in between redoes this step from it).
                state.checkpoint = _checkpoint(policy, optimizer, run_dir, f"rl-{step + 1}")
                state.rl_steps_done = step + 1
                commit()
                _prune_checkpoints(run_dir, state.checkpoint)
                bar.update()
                log(
                    f"RL step {step + 1}/{config.steps}: mean reward {record['mean_reward']:.3f}, "
                    f"correct {record['frac_correct']:.0%}, loss {record['loss']:.4f}"
                )

            eval_after = evaluate_policy(policy, sandbox, eval_tasks, config)
            metrics.write({"stage": "eval_after", **eval_after})
            bar.update()
    finally:
        bar.close()

    policy.save(run_dir / "adapter")
    before = state.eval_before or {}
    summary = {
        "run_dir": str(run_dir),
        "backend": backend,
        "model": config.model,
        "tasks": len(tasks),
        "rl_steps": config.steps,
        "mean_reward_before": before.get("mean_reward"),
        "mean_reward_after": eval_after["mean_reward"],
        "frac_correct_before": before.get("frac_correct"),
        "frac_correct_after": eval_after["frac_correct"],
        "frac_truncated_before": before.get("frac_truncated"),
        "frac_truncated_after": eval_after["frac_truncated"],
        "max_new_tokens": config.max_new_tokens,
        "seconds_this_session": time.perf_counter() - started,
        "adapter": str(run_dir / "adapter"),
    }
    write_json_atomic(run_dir / "summary.json", summary)
    log(json.dumps(summary, indent=2))
    return summary
