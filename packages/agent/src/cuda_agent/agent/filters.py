"""Which collected episodes rejection fine-tuning learns from, and why the others are dropped.

The reference system's trajectory filter: keep an episode whose best turn earned a reward
above 0 (a correct kernel at least, with the milestone reward); drop, whatever its reward,

- ``looping``: it repeated itself: it ended ``repeated`` (the same code twice in a row), or
  two turns in a row got the same failure (the same status and message);
- ``malformed``: a turn's answer held no usable action (a malformed tool call, no code);
- ``budget``: it was cut by the token budget, or an answer by the answer budget;
- ``error``: the policy or the harness failed;
- ``no_reward``: its best reward is not above ``min_reward``.

Reasons are checked in that order and each dropped episode counts under its first reason.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .episode import Episode

REASONS = ("looping", "malformed", "budget", "error", "no_reward")


@dataclass(frozen=True)
class FilterReport:
    kept: list[Episode]
    dropped: dict[str, int]  # reason -> episodes dropped for it (every reason listed)

    def as_dict(self) -> dict[str, int]:
        return {"collected": len(self.kept) + sum(self.dropped.values()),
                "kept": len(self.kept), **{f"dropped_{k}": v for k, v in self.dropped.items()}}  # fmt: skip


def drop_reason(episode: Episode, min_reward: float = 0.0) -> str | None:
    """Why ``episode`` is not learned from, or None when it is kept."""
    turns = episode.turns
    failures = [
        (t.result.status, t.result.message)
        if t.result is not None and not t.result.correct
        else None
        for t in turns
    ]
    repeated_failure = any(a is not None and a == b for a, b in itertools.pairwise(failures))
    looped = any(t.finish_reason == "repetition" for t in turns)  # the policy ended it
    if episode.stop_reason == "repeated" or repeated_failure or looped:
        return "looping"
    if any(t.action == "malformed" for t in turns):
        return "malformed"
    if episode.stop_reason == "token_budget" or any(t.finish_reason == "length" for t in turns):
        return "budget"
    if episode.stop_reason == "error":
        return "error"
    best = episode.best_reward
    if best is None or best <= min_reward:
        return "no_reward"
    return None


def rejection_filter(episodes: Sequence[Episode], min_reward: float = 0.0) -> FilterReport:
    kept: list[Episode] = []
    dropped: Counter[str] = Counter({r: 0 for r in REASONS})
    for episode in episodes:
        reason = drop_reason(episode, min_reward)
        if reason is None:
            kept.append(episode)
        else:
            dropped[reason] += 1
    return FilterReport(kept, {r: dropped[r] for r in REASONS})
