"""RL stages: the single-turn warm-up (``rl_warmup``) and multi-turn agentic RL (``rl``).

Each step: ``tasks_per_step`` training tasks, ``group_size`` episodes each (one turn in the
warm-up, up to ``turns`` in ``rl``), collated (``agent.collate``) and trained on by
``update.update`` with the stage's typed update (``TrainConfig.update_config(stage)``): group
advantages with turn-level credit (``grpo``, ``dr_grpo``, ``rloo``) or PPO with the critic
(``gae``).

Under several processes each collects its part of the step's tasks and updates on its
episodes (``collect_split``); the record is the whole step's (``distributed``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from cuda_agent.agent import Episode, collate
from cuda_agent.rl_core import informative_groups

from .. import distributed as D
from ..context import Run
from ..metrics import read_records
from ..trainer.update import update
from ..trainer.update_config import GaeAdvantage, UpdateConfig
from .rollouts import collect_split, decode_delta, episode_stats, merged_throughput, pick_tasks


def run(ctx: Run, stage: str) -> None:
    config = ctx.config
    warmup = stage == "rl_warmup"
    steps = config.rl_warmup_steps if warmup else config.steps
    settings = config.update_config("rl_warmup" if warmup else "rl")
    turns = 1 if warmup else config.turns
    optimizer = ctx.optimizer(stage, config.lr)
    critic = critic_optimizer = None
    if isinstance(settings.advantage, GaeAdvantage):  # needs_critic
        critic = ctx.critic()
        critic_optimizer = ctx.optimizer(
            f"{stage}-critic", settings.advantage.critic_lr, critic=True
        )
    # each task's past groups of this stage, True where their rewards differed (the records'
    # "informative_tasks"): the curriculum's history, read back on a resumed run
    signal = None
    if config.curriculum == "signal":  # (rank 0 reads the run's metrics; every process gets it)
        found = signal_history(ctx.run_dir / "metrics.jsonl", stage) if D.is_main() else None
        signal = D.broadcast(found)
    # tasks the sandbox cannot judge (``unjudgeable``), found by this run's earlier RL steps
    # and left out of the draws from then on
    gone = D.broadcast(unjudgeable_history(ctx.run_dir / "metrics.jsonl") if D.is_main() else set())
    for step in ctx.steps(stage, steps):
        started = time.perf_counter()
        tasks = pick_tasks(ctx, stage, step, config.tasks_per_step, signal, exclude=gone)
        seed = config.seed * 100_003 + step + (50_000 if warmup else 0)
        memory = ctx.policy.release_memory()  # the sandbox's workers share the GPU
        decoding = ctx.policy.decode_stats()
        rollouts = collect_split(
            ctx, tasks, config.group_size, turns, seed, reward=config.rl_reward
        )
        rollout_s = time.perf_counter() - started
        decoding = decode_delta(decoding, ctx.policy.decode_stats())
        episodes = rollouts.mine.episodes
        record = {"tasks": [t.name for t in tasks], **episode_stats(rollouts.episodes)}
        informative_tasks = with_signal(rollouts.episodes, [t.name for t in tasks])
        record["informative_tasks"] = informative_tasks
        if signal is not None:
            for task in tasks:
                signal.setdefault(task.name, []).append(task.name in informative_tasks)
        record["policy_gpu_bytes"] = memory  # what the trainer held during the rollouts
        episodes, unjudged = judged(episodes)
        record["unjudged_episodes"] = sum(D.gather(unjudged))
        record["unjudgeable_tasks"] = unjudgeable(rollouts.episodes)
        for name in record["unjudgeable_tasks"]:
            gone.add(name)
            ctx.log(f"{stage}: {name} is left out of the next steps' draws: the sandbox cannot "
                    f"judge it ({record['unjudged_reasons'].get(name, '')})")  # fmt: skip
        if config.drop_uniform_groups:
            episodes, dropped = informative(episodes)
            record["dropped_groups"] = sum(D.gather(dropped))
        batch = collate(episodes)
        rows = D.gather(len(batch))
        if (
            any(rows)
            and not all(rows)
            and (config.drop_uniform_groups or record["unjudged_episodes"])
        ):
            # a process whose groups all carried no signal (or were all unjudged): the update
            # needs rows on every process, so this step updates nothing anywhere (said in the
            # record)
            rows = [0] * len(rows)
            record["skip_reasons"] = ["a process had no informative, judged group"]
        elif any(rows) and not all(rows):  # (every process has whole tasks: check())
            raise RuntimeError(
                f"{stage} step {step + 1}: a process's episodes hold no generated token "
                f"(rows per process: {rows}); the update needs some on every process"
            )
        if all(rows):
            mine = update(
                ctx.policy,
                optimizer,
                batch,
                settings,
                critic,
                critic_optimizer,
                ctx.log,
            )
            if D.world_size() > 1:
                micro = _micro_batches(len(batch), settings)
                mine = D.merge_update_records(D.gather(mine), D.gather(micro))
            record.update(mine)
        seconds = time.perf_counter() - started
        record.update(merged_throughput(rollouts.parts, seconds), rollout_s=rollout_s,
                      seconds=seconds)  # fmt: skip
        if D.world_size() > 1:  # every process's decoder
            decoding = {k: sum(d[k] for d in D.gather(decoding)) for k in decoding}
        record.update(decoding)
        ctx.commit_step(stage, record, step)
        ctx.log(
            f"{stage} step {step + 1}/{steps}: mean reward {record['mean_reward']:.3f}, "
            f"pass {record['pass_rate']:.0%}, turns/episode {record['turns_per_episode']:.2f}"
            + _distinct(record.get("distinct_answers"))
        )
    ctx.finish_stage(stage)


def _distinct(share: float | None) -> str:
    """The log line's note of a policy whose samples agree (below half of them distinct)."""
    if share is None or share >= 0.5:
        return ""
    return f", distinct answers {share:.0%} (samples agree: their groups carry no signal)"


def judged(episodes: Sequence[Episode]) -> tuple[list[Episode], int]:
    """The episodes none of whose turns the sandbox left ``unjudged`` (its reference failed, so
    the turn's -1 is no verdict on the answer: trained on, it would push the policy away from
    answers that may be right), their groups numbered from 0 again as ``collate`` wants them,
    and how many were left out. A group keeps its judged members."""
    kept = [e for e in episodes if not e.unjudged]
    return _renumbered(kept), len(episodes) - len(kept)


def with_signal(episodes: Sequence[Episode], tasks: Sequence[str]) -> list[str]:
    """The names among ``tasks`` whose group's turn rewards were not all equal (every
    episode of the step, judged or not: whether the task's group could teach anything)."""
    found = {members[0].task for members, signal in _groups(episodes) if signal}
    return [name for name in tasks if name in found]


def signal_history(metrics: Path, stage: str) -> dict[str, list[bool]]:
    """Each training task's groups in ``stage``'s steps recorded in ``metrics``
    (``metrics.jsonl``, cut back to the committed steps on resume), in order, True where the
    group carried a signal (the records' ``informative_tasks``)."""
    history: dict[str, list[bool]] = {}
    for record in read_records(metrics):
        if record.get("stage") != stage or "informative_tasks" not in record:
            continue
        for name in record.get("tasks", []):
            history.setdefault(name, []).append(name in record["informative_tasks"])
    return history


def unjudgeable(episodes: Sequence[Episode]) -> list[str]:
    """The tasks (in order of appearance) none of whose judged turns got a verdict, for the
    task's own reason: refused by the trivial-answer rule (``task_refused``), or its
    reference failed with the device to itself (``judged_again``: "the reference failed
    alone too"). Drawn again, such a task costs a group's sampling and judging and teaches
    nothing (its unjudged episodes are never trained on: ``judged``)."""
    turns: dict[str, list[bool]] = {}
    for e in episodes:
        for t in e.turns:
            if t.result is not None:
                extra = t.result.extra
                own = t.result.status == "unjudged" and (
                    bool(extra.get("task_refused"))
                    or str(extra.get("judged_again", "")).startswith("the reference failed alone")
                )
                turns.setdefault(e.task, []).append(own)
    return [name for name, own in turns.items() if own and all(own)]


def unjudgeable_history(metrics: Path) -> set[str]:
    """The tasks the RL steps recorded in ``metrics`` (cut back to the committed steps on
    resume) found ``unjudgeable`` (the records' ``unjudgeable_tasks``)."""
    return {name for r in read_records(metrics) for name in r.get("unjudgeable_tasks", ())}


def informative(episodes: Sequence[Episode]) -> tuple[list[Episode], int]:
    """The episodes of the groups whose turn rewards are not all equal (``_groups``), their
    groups numbered from 0 again as ``collate`` wants them, and the number of groups dropped."""
    groups = _groups(episodes)
    kept = [members for members, signal in groups if signal]
    return _renumbered([e for members in kept for e in members]), len(groups) - len(kept)


def _groups(episodes: Sequence[Episode]) -> list[tuple[list[Episode], bool]]:
    """Each group's episodes, in order of first appearance, and whether its turn rewards are
    not all equal (``rl_core.informative_groups``; a group without a reward: equal)."""
    groups: dict[int, list[Episode]] = {}
    for episode in episodes:
        groups.setdefault(episode.group, []).append(episode)
    rewards = [[r for e in members for r in e.rewards] or [0.0] for members in groups.values()]
    if not rewards:
        return []
    width = max(len(r) for r in rewards)
    # padded with each group's first reward, which moves neither its max nor its min
    padded = torch.tensor([r + [r[0]] * (width - len(r)) for r in rewards], dtype=torch.float64)
    keep = informative_groups(padded).tolist()
    return list(zip(groups.values(), keep, strict=True))


def _renumbered(episodes: Sequence[Episode]) -> list[Episode]:
    """``episodes`` with their groups numbered 0, 1, ... in order of first appearance, as
    ``collate`` wants them after groups or members were left out."""
    numbers = {g: n for n, g in enumerate(dict.fromkeys(e.group for e in episodes))}
    return [dataclasses.replace(e, group=numbers[e.group]) for e in episodes]


def _micro_batches(rows: int, settings: UpdateConfig) -> int:
    """The micro-batches ``update`` runs on ``rows`` rows (its ratio statistics' count): each
    pass's mini-batches in micro-batches, every pass alike."""
    per_update = max(1, -(-rows // settings.updates_per_batch))
    parts = [min(per_update, rows - i) for i in range(0, rows, per_update)]
    return settings.epochs * sum(-(-n // settings.micro_batch) for n in parts)
