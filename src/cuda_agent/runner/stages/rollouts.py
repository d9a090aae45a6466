"""Episodes for a stage, and what they say: the one place the RL stages call the agent.

Under several processes (``distributed.py``) a stage's tasks are split (``collect_split``):
each process collects its part on its own sandbox, and the whole batch's episodes are
gathered for the record."""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from cuda_agent.agent import (
    AgentConfig,
    Episode,
    RolloutBatch,
    SamplingParams,
    Turn,
    best_outcome,
    run_episodes,
)
from cuda_agent.kernel_sandbox import EvalResult, Task
from cuda_agent.kernel_sandbox.result import first_line
from cuda_agent.reward import (
    MilestoneValues,
    faster_than,
    log_speedup_reward,
    milestone_reward,
    pass_rate,
)
from cuda_agent.rl_core import signal_weights, weighted_pick

from .. import distributed as D
from ..context import Run


def pick_tasks(
    ctx: Run,
    stage: str,
    step: int,
    count: int,
    signal: Mapping[str, Sequence[bool]] | None = None,
    exclude: Collection[str] = (),
) -> list[Task]:
    """``count`` training tasks for ``step`` of ``stage``, the same on a resumed run: a seeded
    uniform draw, or with ``signal`` (each task's past groups, True where their rewards
    differed: ``TrainConfig.curriculum = "signal"``) a seeded draw weighted by
    ``rl_core.signal_weights``; never one named in ``exclude`` (RuntimeError when that
    leaves none)."""
    tasks = [t for t in ctx.train_tasks if t.name not in exclude]
    if not tasks:
        raise RuntimeError(
            f"{stage} step {step + 1}: no training task is left to draw: the sandbox cannot "
            f"judge any of them ({', '.join(sorted(exclude))}); each step's record says why "
            "(unjudged_reasons)"
        )
    histories = None if signal is None else [signal.get(t.name, ()) for t in tasks]
    chosen = pick_indices(len(tasks), count, f"{ctx.config.seed}/{stage}/{step}", histories)
    return [tasks[i] for i in chosen]


def pick_indices(
    total: int, count: int, key: str, histories: Sequence[Sequence[bool]] | None = None
) -> list[int]:
    """``pick_tasks``' draw: ``count`` of ``total`` indices from a generator seeded by ``key``,
    uniform, or weighted by ``rl_core.signal_weights(histories)``."""
    rng = random.Random(key)
    if histories is None:
        return rng.sample(range(total), min(count, total))
    uniforms = [1.0 - rng.random() for _ in range(total)]  # in (0, 1]
    return weighted_pick(signal_weights(histories), uniforms, count)


# A malformed answer's reward under log_speedup: its failure value (a failed evaluation's)
LOG_SPEEDUP_FAILURE = -2.0


def scoring(reward: str) -> tuple[Callable[[EvalResult], float], float]:
    """The turn reward function ``TrainConfig.rl_reward`` names, and the reward of a malformed
    answer under it (the function's failure value)."""
    if reward == "log_speedup":
        return partial(log_speedup_reward, failure=LOG_SPEEDUP_FAILURE), LOG_SPEEDUP_FAILURE
    if reward == "milestone":
        return milestone_reward, MilestoneValues().fail
    raise ValueError(f"unknown reward {reward!r}: milestone or log_speedup")


def collect(
    ctx: Run,
    tasks: Sequence[Task],
    samples: int,
    turns: int,
    seed: int,
    temperature: float | None = None,
    reward: str = "milestone",
) -> RolloutBatch:
    """Episodes of ``tasks`` with the policy's current weights, each turn scored by the reward
    ``reward`` names (``scoring``)."""
    config = ctx.config
    sampling = SamplingParams(
        n=samples,
        max_new_tokens=config.max_new_tokens,
        temperature=config.temperature if temperature is None else temperature,
        seed=seed,
    )
    agent = AgentConfig(max_turns=turns, history=config.history,
                        share_verdicts=config.share_verdicts,
                        quiet_timing=config.quiet_timing)  # fmt: skip
    reward_fn, malformed = scoring(reward)
    if ctx.rollouts is not None:  # on Ray actors, with the policy's current weights
        return ctx.rollouts.collect(ctx.policy, tasks, sampling, agent, reward_fn, malformed)
    ctx.policy.eval()
    return run_episodes(
        ctx.policy, ctx.sandbox, tasks, sampling, agent,
        reward_fn=reward_fn, malformed_reward=malformed,
    )  # fmt: skip


@dataclasses.dataclass
class SplitBatch:
    """A step's episodes over the processes: ``mine`` this process's (its groups numbered from
    0, as ``collate`` wants them), ``parts`` every process's batch in rank order, and
    ``episodes`` all of them in task order, groups numbered over the whole step."""

    mine: RolloutBatch
    parts: list[RolloutBatch]
    episodes: list[Episode]


def collect_split(
    ctx: Run,
    tasks: Sequence[Task],
    samples: int,
    turns: int,
    seed: int,
    temperature: float | None = None,
    reward: str = "milestone",
) -> SplitBatch:
    """``collect`` over the processes: each one collects its contiguous part of ``tasks``
    (``distributed.share``, with the same seed: one process's batch of the same tasks is the
    same), and the parts are gathered. With Ray rollouts, rank 0 collects every task on the
    actors (which have its weights: the policy is replicated) and each process takes its part."""
    start, end = D.bounds(len(tasks))
    if D.world_size() == 1:
        batch = collect(ctx, tasks, samples, turns, seed, temperature, reward)
        return SplitBatch(batch, [batch], list(batch.episodes))
    if ctx.config.ray_rollout_workers:  # (rank 0 holds the actors)
        whole = D.broadcast(
            collect(ctx, tasks, samples, turns, seed, temperature, reward) if D.is_main() else None
        )
        assert whole is not None
        mine = [
            dataclasses.replace(e, group=e.group - start)
            for e in whole.episodes
            if start <= e.group < end
        ]
        return SplitBatch(dataclasses.replace(whole, episodes=mine), [whole], whole.episodes)
    batch = collect(ctx, list(tasks[start:end]), samples, turns, seed, temperature, reward)
    parts = D.gather(batch)
    offsets = D.gather(start)
    episodes = [
        dataclasses.replace(e, group=e.group + offset)
        for part, offset in zip(parts, offsets, strict=True)
        for e in part.episodes
    ]
    return SplitBatch(batch, parts, episodes)


def merged_throughput(parts: Sequence[RolloutBatch], seconds: float) -> dict[str, Any]:
    """``throughput`` of the processes' batches together: tokens and evaluations summed, the
    times the longest process's, every sandbox window (one host's monotonic clock)."""
    if len(parts) == 1:
        return throughput(parts[0], seconds)
    each = [throughput(p, seconds) for p in parts]
    tokens = sum(t["tokens"] for t in each)
    busy = max(t["sandbox_s"] for t in each)
    evaluations = sum(t["evaluations"] for t in each)
    programs = sum(t["sandbox_jobs"] for t in each)
    return {
        "tokens": tokens,
        "tokens_per_s": tokens / seconds if seconds > 0 else 0.0,
        "sampling_s": max(t["sampling_s"] for t in each),
        "evaluation_s": max(t["evaluation_s"] for t in each),
        "sandbox_s": busy,
        "evaluations": evaluations,
        "evaluations_per_min": evaluations_per_min(evaluations, busy),
        "sandbox_jobs": programs,
        "sandbox_jobs_per_min": evaluations_per_min(programs, busy),
        "sandbox_windows": sorted(w for t in each for w in t["sandbox_windows"]),
    }


def episode_stats(episodes: Sequence[Episode]) -> dict[str, Any]:
    """Rewards, correctness, speed and lengths of a batch of episodes. Each episode's best turn
    (``best_outcome``) is a benchmark row: ``pass_rate`` and ``fast_1`` (correct and speedup > 1,
    KernelBench's fast_p at p = 1) are ``cuda_agent.reward.metrics``' over those rows."""
    n = max(1, len(episodes))
    rows = [best_outcome(e) for e in episodes]
    speedups = [r.speedup_vs_eager for r in rows if r.correct and r.speedup_vs_eager]
    turns = [t for e in episodes for t in e.turns]
    return {
        "mean_reward": statistics.fmean(e.best_reward or 0.0 for e in episodes)
        if episodes
        else 0.0,
        "mean_turn_reward": statistics.fmean(t.reward for t in turns) if turns else 0.0,
        "pass_rate": pass_rate(rows),
        "fast_1": faster_than(rows, "eager", 1.0),
        "frac_parsed": sum(t.candidate is not None for t in turns) / max(1, len(turns)),
        "frac_truncated": sum(t.finish_reason == "length" for t in turns) / max(1, len(turns)),
        "frac_looped": sum(t.finish_reason == "repetition" for t in turns) / max(1, len(turns)),
        "mean_speedup_vs_eager": statistics.fmean(speedups) if speedups else None,
        "mean_response_tokens": statistics.fmean(len(t.response_ids) for t in turns)
        if turns
        else 0.0,
        "turns_per_episode": len(turns) / n,
        "stop_reasons": {
            r: sum(e.stop_reason == r for e in episodes)
            for r in sorted({e.stop_reason for e in episodes})
        },
        # every judged turn's verdict, and the jobs the sandbox ran again alone (out of memory
        # beside other lanes): a step whose answers all fail says here whether it was the model
        "verdicts": _count(t.result.status for t in turns if t.result is not None),
        "reruns_alone": sum(
            "rerun_alone" in t.result.extra and "shared_verdict" not in t.result.extra
            for t in turns
            if t.result is not None
        ),
        # the seconds the step's jobs waited for their lane's worker to start again after a
        # fault killed it (an answer that crashes costs the next job a worker's start), and at
        # their device's timing gate (a timing waits for the checks inside, a check for the
        # timings due: an answer that hangs in its checks holds up every timing)
        "worker_start_s": _job_seconds(turns, "worker_start"),
        "gate_wait_s": _job_seconds(turns, "gate_wait"),
        # the share of judged answers that were not a copy of another answer to the same task
        # in the same turn (1: every sample its own program; 1/group size: a collapsed policy)
        "distinct_answers": distinct_answers(turns),
        "unjudged_reasons": unjudged_reasons(episodes),
    }


def _job_seconds(turns: Sequence[Any], part: str) -> float:
    """The seconds of ``part`` of the turns' jobs (their verdicts' ``extra["seconds"]``),
    a verdict shared with an identical answer left out (its job counted once)."""
    total = 0.0
    for turn in turns:
        extra = turn.result.extra if turn.result is not None else {}
        seconds = extra.get("seconds")
        value = seconds.get(part) if isinstance(seconds, dict) else None
        if isinstance(value, (int, float)) and "shared_verdict" not in extra:
            total += float(value)
    return total


def unjudged_reasons(episodes: Sequence[Episode]) -> dict[str, str]:
    """Per task with an ``unjudged`` verdict (the sandbox could not judge it: the reference
    failed, or the task was refused), the first line of the first such verdict's message and
    how it was judged again, where it was. (On the H100, 2026-12-05, every answer to
    ``syn_00109_amax_tanh`` was unjudged in the 4 of 38 RL steps that took it, and the step
    records did not say why.)"""
    out: dict[str, str] = {}
    for e in episodes:
        for t in e.turns:
            r = t.result
            if r is None or r.status != "unjudged" or e.task in out:
                continue
            line = first_line(r.message, 200)
            again = r.extra.get("judged_again")
            out[e.task] = f"{line} ({again})" if again else line
    return out


def distinct_answers(turns: Sequence[Turn]) -> float | None:
    """The judged turns whose verdict was their own (not ``shared_verdict``), as a share of the
    judged turns; None when none was judged."""
    judged = [t.result for t in turns if t.result is not None]
    if not judged:
        return None
    return sum("shared_verdict" not in r.extra for r in judged) / len(judged)


def _count(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def throughput(batch: RolloutBatch, seconds: float) -> dict[str, Any]:
    """Tokens per second; where the batch's time went: ``sampling_s``, ``evaluation_s`` (waited
    for verdicts while nothing sampled), ``sandbox_s`` (the sandbox had answers to judge); the
    ``evaluations`` and their rate over the sandbox's time (``evaluations_per_min``); the
    programs the sandbox judged (``sandbox_jobs``: identical answers share one) and their rate;
    and each
    ``evaluate_many`` call's ``sandbox_windows`` (monotonic seconds), for benchmarks."""
    tokens = sum(e.n_tokens for e in batch.episodes)
    busy = batch.seconds.get("sandbox", 0.0)
    return {
        "tokens": tokens,
        "tokens_per_s": tokens / seconds if seconds > 0 else 0.0,
        "sampling_s": batch.seconds.get("sampling", 0.0),
        "evaluation_s": batch.seconds.get("evaluation", 0.0),
        "sandbox_s": busy,
        "evaluations": batch.evaluations,
        "evaluations_per_min": evaluations_per_min(batch.evaluations, busy),
        "sandbox_jobs": batch.sandbox_jobs,
        "sandbox_jobs_per_min": evaluations_per_min(batch.sandbox_jobs, busy),
        "sandbox_windows": [list(w) for w in batch.sandbox_windows],
    }


def evaluations_per_min(evaluations: int | float, sandbox_s: float) -> float:
    """Answers judged per minute of the sandbox's busy time (0 when it was never busy)."""
    return 60.0 * evaluations / sandbox_s if sandbox_s > 0 else 0.0


def decode_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What the policy's decoder did between two ``Policy.decode_stats`` readings, as a step
    record's ``decode_*`` fields: calls, new shapes, and the seconds of new shapes' first
    steps and of every call's first step (on CUDA, compiling and recording the decoding step
    is most of those). Rollouts on Ray actors decode elsewhere: zeros here."""
    return {f"decode_{k}": after[k] - before.get(k, 0) for k in after}
