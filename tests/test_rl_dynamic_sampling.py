"""Dynamic sampling (DAPO): the RL stages leave out groups whose turn rewards are all equal."""

from __future__ import annotations

from cuda_agent.agent import Episode, Turn
from cuda_agent.runner.stages.rl import informative


def _episode(group: int, *rewards: float) -> Episode:
    turns = tuple(
        Turn(i, (1,), (2, 3), (-1.0, -1.0), "", "stop", "c", None, r, "")
        for i, r in enumerate(rewards)
    )
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
