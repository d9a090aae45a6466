"""Which tokens end an answer: read from the chat template, not from the tokenizer's eos.

A chat model ends its turn with the token its chat template closes an assistant message with
(``<|im_end|>`` in ChatML). The tokenizer's ``eos_token`` need not be that token, and for one
model file it is not even stable: SmolLM2-135M-Instruct loaded from its GGUF file gets
``eos_token = "<|im_end|>"`` under transformers 5.25 but ``"<|im_start|>"`` (the token that
*opens* a turn) under 5.17. A warm start that appended ``eos_token_id`` to its targets then
taught, on one machine, to end answers by opening a new turn, and the same adapter on the
other machine never stopped.

So the end of an answer is found by rendering the template:

- ``end_of_turn``: the first token after an assistant message's content
  (``[user, assistant(MARK)]`` rendered without a generation prompt; the text after ``MARK``),
  if it is a special token;
- ``turn_start``: the first token of the generation prompt (what the template puts before an
  assistant's answer), if it is a special token. An answer that emits it has begun another
  turn, so sampling stops there too.

Either is ``None`` when the template has no chat template or no special token at that place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_MARK = "\u2063cuda-agent-answer\u2063"  # text no template or model writes by itself


@dataclass(frozen=True)
class TurnTokens:
    end_of_turn: int | None
    turn_start: int | None


def _special_ids(tokenizer: Any) -> frozenset[int]:
    special = {int(i) for i in (getattr(tokenizer, "all_special_ids", None) or [])}
    for token_id, added in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
        if getattr(added, "special", False):
            special.add(int(token_id))
    return frozenset(special)


def _first_special(tokenizer: Any, text: str, special: frozenset[int]) -> int | None:
    ids = tokenizer.encode(text, add_special_tokens=False) if text else []
    return int(ids[0]) if ids and int(ids[0]) in special else None


def turn_tokens(tokenizer: Any) -> TurnTokens:
    """The template's end-of-turn and turn-start tokens (module docstring)."""
    if not getattr(tokenizer, "chat_template", None):
        return TurnTokens(None, None)
    special = _special_ids(tokenizer)
    user = [{"role": "user", "content": "hi"}]
    try:
        closed = str(
            tokenizer.apply_chat_template(
                [*user, {"role": "assistant", "content": _MARK}],
                add_generation_prompt=False,
                tokenize=False,
            )
        )
        asked = str(tokenizer.apply_chat_template(user, add_generation_prompt=True, tokenize=False))
        plain = str(
            tokenizer.apply_chat_template(user, add_generation_prompt=False, tokenize=False)
        )
    except Exception:  # a template that needs other roles or fields: no opinion
        return TurnTokens(None, None)
    end = None
    if _MARK in closed:
        end = _first_special(tokenizer, closed[closed.rindex(_MARK) + len(_MARK) :], special)
    start = None
    if asked.startswith(plain):
        start = _first_special(tokenizer, asked[len(plain) :], special)
    return TurnTokens(end, start)


def end_of_turn_id(tokenizer: Any) -> int:
    """The token an answer ends with: the chat template's end of turn, else the tokenizer's
    eos. Supervised targets end with it."""
    end = turn_tokens(tokenizer).end_of_turn
    return int(tokenizer.eos_token_id) if end is None else end
