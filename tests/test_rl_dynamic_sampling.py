"""What the RL stages leave out of an update: groups whose turn rewards are all equal (DAPO's
dynamic sampling), and episodes with a turn the sandbox could not judge (``unjudged``)."""

from __future__ import annotations

from cuda_agent.agent import Episode, Turn
from cuda_agent.kernel_sandbox import EvalResult
from cuda_agent.runner.stages.rl import informative, judged


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
