"""Episodes and turns: frozen values, with token-level views derived for training.

An episode is one task, a group id (episodes of a group start from the same prompt) and its
turns. Each turn holds the tokens placed before the policy's answer (``context_ids``: the whole
prompt for the first turn; the rendered feedback message after it, or in ``last_k`` history the
whole prompt of that turn), the answer's tokens and the sampler's log-probs, what was extracted
and how it was judged.

Views for training (``sequences``): in ``full`` history one sequence per episode, the context
and answers of every turn back to back (exactly the tokens the sampler saw and produced); in
``last_k`` history one sequence per turn, its own prompt and its answer. In each, ``loss_mask``
is 1 on tokens the policy generated and 0 on everything else, and ``turn_index`` numbers the
turns on kept tokens and is -1 elsewhere: ``rl_core.turn_index_from_loss_mask`` of the mask (each
run of generated tokens is a turn; the agent always puts a turn's context, the feedback or its
prompt, between two answers, and an answer holds at least one token).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from cuda_agent.kernel_sandbox import EvalResult
from cuda_agent.reward import TaskOutcome
from cuda_agent.rl_core import turn_index_from_loss_mask

History = Literal["full", "last_k"]


@dataclass(frozen=True)
class Turn:
    """One answer of the policy and what it earned."""

    index: int
    context_ids: tuple[int, ...]  # tokens before the answer that the policy did not generate
    response_ids: tuple[int, ...]
    sampler_logprobs: tuple[float, ...]
    text: str
    finish_reason: str
    candidate: str | dict[str, str] | None  # the code it submitted (None: nothing usable)
    result: EvalResult | None
    reward: float
    feedback: str  # the message the next turn reads (also kept for the last turn)
    action: str = "evaluate"  # evaluate, profile, submit, tool (a file tool), malformed


@dataclass(frozen=True)
class TrainingSequence:
    """One sequence to train on: tokens, which of them the policy generated, per-token turn
    numbers and sampler log-probs (0.0 outside the mask), and the rewards of its turns."""

    token_ids: list[int]
    loss_mask: list[int]
    turn_index: list[int]
    sampler_logprobs: list[float]
    turn_rewards: list[float]


@dataclass(frozen=True)
class Episode:
    task: str
    group: int
    history: History
    turns: tuple[Turn, ...]
    stop_reason: str  # target, max_turns, token_budget, malformed, repeated, submitted, error
    messages: tuple[dict[str, Any], ...] = ()  # the conversation as chat messages

    # --------------------------------------------------------------------- results
    @property
    def rewards(self) -> list[float]:
        return [t.reward for t in self.turns]

    @property
    def best_turn(self) -> int | None:
        """Index of the episode's best turn (``turn_rank``: the highest reward, among equals a
        correct one, then the fastest against eager, then the earliest)."""
        best = best_of([self])
        return None if best is None else best[1].index

    @property
    def best_reward(self) -> float | None:
        return None if self.best_turn is None else self.turns[self.best_turn].reward

    @property
    def unjudged(self) -> bool:
        """Whether the sandbox left a turn ``unjudged`` (its reference failed): that turn's
        reward is no verdict on the answer."""
        return any(t.result is not None and t.result.status == "unjudged" for t in self.turns)

    @property
    def n_tokens(self) -> int:
        """Tokens the episode's sequences hold (what its budget counts)."""
        return sum(len(t.context_ids) + len(t.response_ids) for t in self.turns)

    # ---------------------------------------------------------------- token views
    def sequences(self) -> list[TrainingSequence]:
        if self.history == "full":
            return [_sequence(self.turns)] if self.turns else []
        return [_sequence((t,)) for t in self.turns]

    def _full(self) -> TrainingSequence:
        if self.history != "full":
            raise ValueError("a last_k episode has one sequence per turn: use sequences()")
        return _sequence(self.turns)

    @property
    def token_ids(self) -> list[int]:
        return self._full().token_ids

    @property
    def loss_mask(self) -> list[int]:
        return self._full().loss_mask

    @property
    def turn_index(self) -> list[int]:
        return self._full().turn_index


def turn_rank(turn: Turn) -> tuple[float, bool, float]:
    """What makes one turn better than another, in order: its reward, then whether its kernel is
    correct, then its speedup against eager (0 for an incorrect or untimed one)."""
    r = turn.result
    correct = r is not None and r.correct
    fast = (r.speedup_vs_eager or 0.0) if r is not None and correct else 0.0
    return (turn.reward, correct, fast)


def best_of(episodes: Sequence[Episode]) -> tuple[Episode, Turn] | None:
    """The episode and turn of the best kernel over ``episodes`` (the highest ``turn_rank``,
    the earliest among equals); None when no episode has a turn. The one rule for "best turn":
    ``Episode.best_turn`` is it over one episode, an evaluated task's best kernel over its
    episodes."""
    best: tuple[Episode, Turn] | None = None
    for e in episodes:
        for t in e.turns:
            if best is None or turn_rank(t) > turn_rank(best[1]):
                best = (e, t)
    return best


def best_outcome(episode: Episode) -> TaskOutcome:
    """The episode's best turn as a benchmark row (``cuda_agent.reward.metrics``, one sample):
    whether its kernel is correct and its speedups (an episode without a verdict: not correct)."""
    best = best_of([episode])
    r = best[1].result if best is not None else None
    if r is None:
        return TaskOutcome(episode.task, False)
    return TaskOutcome(episode.task, r.correct, r.speedup_vs_eager, r.speedup_vs_compile)


def _sequence(turns: tuple[Turn, ...]) -> TrainingSequence:
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    for turn in turns:
        ids += turn.context_ids
        mask += [0] * len(turn.context_ids)
        logprobs += [0.0] * len(turn.context_ids)
        ids += turn.response_ids
        mask += [1] * len(turn.response_ids)
        logprobs += turn.sampler_logprobs
    index = turn_index_from_loss_mask(torch.tensor(mask, dtype=torch.bool)).tolist()
    return TrainingSequence(ids, mask, index, logprobs, [t.reward for t in turns])


# ------------------------------------------------------------------------- persistence
def episode_to_json(episode: Episode) -> dict[str, Any]:
    """A JSON-ready record of an episode: every token and reward, and each verdict as
    ``EvalResult.to_dict`` writes it (its one serialiser), the message cut to 2,000 characters."""

    def verdict(r: EvalResult | None) -> dict[str, Any] | None:
        return None if r is None else {**r.to_dict(), "message": r.message[:2000]}

    return {
        "task": episode.task,
        "group": episode.group,
        "history": episode.history,
        "stop_reason": episode.stop_reason,
        "turns": [
            {
                "index": t.index,
                "context_ids": list(t.context_ids),
                "response_ids": list(t.response_ids),
                "sampler_logprobs": list(t.sampler_logprobs),
                "text": t.text,
                "finish_reason": t.finish_reason,
                "candidate": t.candidate,
                "verdict": verdict(t.result),
                "reward": t.reward,
                "feedback": t.feedback,
                "action": t.action,
            }
            for t in episode.turns
        ],
    }


def episode_from_json(data: dict[str, Any]) -> Episode:
    """The episode of ``episode_to_json``; verdicts come back through ``EvalResult.from_dict``
    (records written before it kept status, message, flags and times only: they read too)."""

    def verdict(v: dict[str, Any] | None) -> EvalResult | None:
        return None if v is None else EvalResult.from_dict(v)

    turns = tuple(
        Turn(
            index=t["index"],
            context_ids=tuple(t["context_ids"]),
            response_ids=tuple(t["response_ids"]),
            sampler_logprobs=tuple(t["sampler_logprobs"]),
            text=t["text"],
            finish_reason=t["finish_reason"],
            candidate=t["candidate"],
            result=verdict(t["verdict"]),
            reward=t["reward"],
            feedback=t["feedback"],
            action=t.get("action", "evaluate"),
        )
        for t in data["turns"]
    )
    return Episode(data["task"], data["group"], data["history"], turns, data["stop_reason"])
