"""What the RL stages leave out of an update: groups whose turn rewards are all equal (DAPO's
dynamic sampling), and episodes with a turn the sandbox could not judge (``unjudged``); and the
curriculum that takes tasks whose groups carried a signal more often (``--curriculum signal``)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cuda_agent.agent import Episode, Turn
from cuda_agent.kernel_sandbox import EvalResult
from cuda_agent.rl_core import signal_weights
from cuda_agent.runner.stages.rl import informative, judged, signal_history, with_signal
from cuda_agent.runner.stages.rollouts import pick_indices


def _episode(group: int, *rewards: float, statuses: tuple[str, ...] = ()) -> Episode:
    results = [EvalResult(status=s) for s in statuses]  # type: ignore[arg-type]
    turns = tuple(
        Turn(i, (1,), (2, 3), (-1.0, -1.0), "", "stop", "c",
             results[i] if i < len(results) else None, r, "")
        for i, r in enumerate(rewards)
    )  # fmt: skip
    return Episode(f"task{group}", group, "full", turns, "max_turns")


def test_uniform_groups_are_dropped_and_the_rest_renumbered():
    episodes = [
        _episode(0, -1.0, -1.0), _episode(0, -1.0),  # every turn -1: no signal
        _episode(1, -1.0, 0.5), _episode(1, -1.0, -1.0),  # a later turn differs
        _episode(2, 1.0), _episode(2, 2.0),  # two episodes differ
        _episode(3, 0.0), _episode(3, 0.0),
    ]  # fmt: skip
    kept, dropped = informative(episodes)
    assert dropped == 2
    assert [(e.task, e.group) for e in kept] == [
        ("task1", 0), ("task1", 0), ("task2", 1), ("task2", 1),
    ]  # fmt: skip


def test_nothing_to_keep():
    assert informative([]) == ([], 0)
    kept, dropped = informative([_episode(0, 1.0), _episode(0, 1.0)])
    assert kept == [] and dropped == 1


def test_episodes_with_an_unjudged_turn_are_left_out_and_groups_renumbered():
    """An ``unjudged`` turn's -1 is no verdict (the reference failed): its episode is not
    trained on; its group keeps the judged members, a group left empty goes."""
    episodes = [
        _episode(0, -1.0, statuses=("unjudged",)),  # its group's only episode
        _episode(1, -1.0, 1.0, statuses=("runtime_error", "ok")),
        _episode(1, -1.0, -1.0, statuses=("ok", "unjudged")),  # a later turn unjudged
        _episode(1, 2.0, statuses=("ok",)),
        _episode(2, -1.0, statuses=("incorrect",)),
    ]
    kept, left_out = judged(episodes)
    assert left_out == 2
    assert [(e.task, e.group, e.rewards) for e in kept] == [
        ("task1", 0, [-1.0, 1.0]), ("task1", 0, [2.0]), ("task2", 1, [-1.0]),
    ]  # fmt: skip
    assert judged([]) == ([], 0)


# ------------------------------------------------------------------------- the curriculum
def test_the_tasks_whose_group_carried_a_signal_are_named_in_the_steps_order():
    episodes = [
        _episode(0, -1.0, -1.0), _episode(0, -1.0),
        _episode(1, -1.0, 0.5), _episode(1, -1.0, -1.0),
        _episode(2, 1.0), _episode(2, 2.0),
    ]  # fmt: skip
    assert with_signal(episodes, ["task2", "task0", "task1"]) == ["task2", "task1"]
    assert with_signal([], ["task0"]) == []


def test_a_uniform_pick_is_the_seeded_draw_it_always_was():
    import random

    for key in ("0/rl/0", "3/rl_warmup/17"):
        assert pick_indices(47, 4, key) == random.Random(key).sample(range(47), 4)


def test_the_signal_curriculum_takes_tasks_whose_groups_differed_more_often():
    # task 0: its last groups all alike; 1: never tried; 2: its last groups all differed
    histories = [[False] * 6, [], [True] * 6]
    counts = [0, 0, 0]
    for step in range(3000):
        for i in pick_indices(3, 1, f"0/rl/{step}", histories):
            counts[i] += 1
    weights = signal_weights(histories)
    assert counts[0] < counts[1] < counts[2]
    for c, w in zip(counts, weights, strict=True):
        assert c / 3000 == pytest.approx(w / sum(weights), abs=0.03)
    # the same key, the same pick (a resumed run); every task distinct
    picked = pick_indices(3, 2, "0/rl/5", histories)
    assert picked == pick_indices(3, 2, "0/rl/5", histories) and len(set(picked)) == 2


def test_the_history_is_read_back_from_the_runs_committed_steps(tmp_path):
    records = [
        {"stage": "rl_warmup", "step": 0, "tasks": ["a"], "informative_tasks": ["a"]},
        {"stage": "rl", "step": 0, "tasks": ["a", "b"], "informative_tasks": ["b"]},
        {"stage": "rl", "step": 1, "tasks": ["b", "c"], "informative_tasks": []},
        {"stage": "rl", "step": 2, "tasks": ["a"]},  # a run from before the field: not counted
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert signal_history(path, "rl") == {"a": [False], "b": [True, False], "c": [False]}
    assert signal_history(path, "rl_warmup") == {"a": [True]}
    assert signal_history(tmp_path / "none.jsonl", "rl") == {}


def test_a_step_record_says_why_a_task_went_unjudged():
    from dataclasses import replace

    from cuda_agent.runner.stages.rollouts import episode_stats, unjudged_reasons

    failed = EvalResult(
        status="unjudged",
        message="the reference failed its check 2: CUDA out of memory\nTraceback ...",
        extra={"judged_again": "the reference failed alone too: CUDA out of memory"},
    )
    first = _episode(0, 0.0, statuses=("unjudged",))
    first = replace(first, turns=(replace(first.turns[0], result=failed),))
    episodes = [first, _episode(0, 0.0, statuses=("unjudged",)), _episode(1, 1.0, statuses=("ok",))]
    reasons = unjudged_reasons(episodes)
    assert reasons == {
        "task0": "the reference failed its check 2: CUDA out of memory "
        "(the reference failed alone too: CUDA out of memory)"
    }
    assert episode_stats(episodes)["unjudged_reasons"] == reasons
    assert unjudged_reasons([_episode(1, 1.0, statuses=("ok",))]) == {}


def test_a_step_record_sums_the_waits_for_restarted_workers_and_at_the_gate():
    # An answer that crashes its worker costs the next job the worker's start (11.6 s on an
    # H100 with fresh interpreters): the step says how much of its time went there, counting
    # a verdict shared by identical answers once.
    from dataclasses import replace

    from cuda_agent.runner.stages.rollouts import episode_stats

    def judged(seconds: dict[str, float], **extra: object) -> Episode:
        episode = _episode(0, 1.0, statuses=("ok",))
        result = EvalResult(status="ok", extra={"seconds": seconds, **extra})
        return replace(episode, turns=(replace(episode.turns[0], result=result),))

    episodes = [
        judged({"worker_start": 0.7, "worker_start_spawn": 0.01, "gate_wait": 2.0}),
        judged({"worker_start": 0.7, "gate_wait": 2.0}, shared_verdict=True),  # counted once
        judged({"candidate": 0.2, "gate_wait": 60.0}),  # behind an answer hanging in its checks
        judged({"worker_start": 11.5}),
    ]
    stats = episode_stats(episodes)
    assert stats["worker_start_s"] == pytest.approx(12.2)
    assert stats["gate_wait_s"] == pytest.approx(62.0)
    assert episode_stats(episodes[2:3])["worker_start_s"] == 0.0


def _unjudged(task: str, group: int, **extra: object) -> Episode:
    from dataclasses import replace

    episode = _episode(group, 0.0, statuses=("unjudged",))
    result = EvalResult(status="unjudged", message="the reference failed", extra=dict(extra))
    return replace(episode, task=task, turns=(replace(episode.turns[0], result=result),))


def test_a_task_the_sandbox_cannot_judge_is_found_and_left_out_of_later_draws(tmp_path):
    from types import SimpleNamespace

    from cuda_agent.runner.stages.rl import unjudgeable, unjudgeable_history
    from cuda_agent.runner.stages.rollouts import pick_tasks

    alone = "the reference failed alone too: CUDA out of memory"
    episodes = [
        _unjudged("refused", 0, task_refused=True), _unjudged("refused", 0, task_refused=True),
        _unjudged("too_big", 1, judged_again=alone), _unjudged("too_big", 1, judged_again=alone),
        # the reference failed beside the candidate only once: the answer's turn, not the task
        _unjudged("flaky", 2, judged_again=alone), _unjudged("flaky", 2),
        _unjudged("mixed", 3, task_refused=True), _episode(3, 1.0, statuses=("ok",)),
    ]  # fmt: skip
    episodes[-1] = dataclasses.replace(episodes[-1], task="mixed")
    assert unjudgeable(episodes) == ["refused", "too_big"]
    assert unjudgeable([_episode(0, 1.0, statuses=("ok",))]) == []

    metrics = tmp_path / "metrics.jsonl"
    assert unjudgeable_history(metrics) == set()
    records = [{"stage": "rl_warmup", "step": 0, "unjudgeable_tasks": ["refused"]},
               {"stage": "rl", "step": 0, "unjudgeable_tasks": []},
               {"stage": "rl", "step": 1, "unjudgeable_tasks": ["too_big"]},
               {"stage": "baselines"}]  # fmt: skip
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    gone = unjudgeable_history(metrics)
    assert gone == {"refused", "too_big"}  # from every RL stage: the warm-up's count for RL

    names = ["refused", "too_big", "a", "b", "c"]
    ctx = SimpleNamespace(train_tasks=[SimpleNamespace(name=n) for n in names],
                          config=SimpleNamespace(seed=0))  # fmt: skip
    for step in range(20):
        picked = [t.name for t in pick_tasks(ctx, "rl", step, 3, exclude=gone)]  # type: ignore[arg-type]
        assert sorted(picked) == ["a", "b", "c"]
    with pytest.raises(RuntimeError, match="no training task is left"):
        pick_tasks(ctx, "rl", 0, 3, exclude=set(names))  # type: ignore[arg-type]
