"""Protocols: how an answer becomes an action, and an action's outcome the next message.

The driver (``driver.py``) knows a protocol only through ``Protocol``: the first messages of a
task, ``parse`` (an answer's text to an ``Action``), and ``reply`` (the message the policy reads
next). ``fenced`` is one fenced Python block per turn, the format small models manage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from typing import Protocol as TypingProtocol

from cuda_agent.kernel_sandbox import EvalResult, Task

from .feedback import feedback
from .parsing import extract_candidate
from .prompts import build_messages

ActionKind = Literal["evaluate", "submit", "malformed"]


@dataclass(frozen=True)
class Action:
    """What an answer asks for: evaluate (or submit) a candidate, or nothing usable."""

    kind: ActionKind
    candidate: str | dict[str, str] | None = None
    error: str = ""  # why a malformed answer could not be used


class Protocol(TypingProtocol):
    name: str

    def first_messages(self, task: Task, backend: str) -> list[dict[str, str]]: ...

    def parse(self, text: str) -> Action: ...

    def reply(
        self, action: Action, result: EvalResult | None, truncated_at: int | None, goal: str
    ) -> list[dict[str, str]]: ...


class Fenced:
    """One fenced Python block defining ``ModelNew`` per turn; the feedback comes back as a
    user message."""

    name = "fenced"

    def first_messages(self, task: Task, backend: str) -> list[dict[str, str]]:
        return build_messages(task, backend)

    def parse(self, text: str) -> Action:
        candidate = extract_candidate(text)
        if candidate is None:
            return Action("malformed", error="no ```python block defining class ModelNew")
        return Action("evaluate", candidate)

    def reply(
        self, action: Action, result: EvalResult | None, truncated_at: int | None, goal: str
    ) -> list[dict[str, str]]:
        verdict = feedback(result, truncated_at=truncated_at)
        if result is not None and result.correct:
            ask = (
                f"It is correct. Make it faster ({goal}). Answer with the complete improved "
                "ModelNew in one ```python block."
            )
        else:
            ask = "Fix it. Answer with the complete corrected ModelNew in one ```python block."
        return [{"role": "user", "content": f"{verdict}\n\n{ask}"}]


PROTOCOLS: dict[str, type] = {"fenced": Fenced}


def protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r}; known: {', '.join(sorted(PROTOCOLS))}")
    instance: Protocol = PROTOCOLS[name]()
    return instance
