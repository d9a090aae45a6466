"""Chat-template rendering of a message *delta*: the tokens that extend a conversation.

Token in, token out: the sequence an episode is trained on must be exactly the sequence the
sampler saw and produced. So the policy's own tokens are never decoded and re-tokenized (BPE is
not a bijection, and chat templates add or drop separators at turn boundaries: failures users of
TRL and verl reported); the next prompt is the previous prompt, the response's token ids as
sampled, and the tokens of the new message rendered here.

How the delta is found, for any Jinja chat template: render a conversation whose last
assistant message is a placeholder, once as it is (``A``) and once with the new message and the
generation prompt after it (``B``). ``B`` starts with ``A`` for every template we know; the
delta text is the end of the assistant turn that the response did not produce itself (what
``A`` holds after the placeholder, minus the end-of-turn token when the response ended with
it) followed by ``B[len(A):]``. Only that text is tokenized. The placeholder keeps templates that
render earlier assistant turns differently (Qwen3 drops their reasoning) from seeing the real
response.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_PLACEHOLDER = "\u2063cuda-agent-placeholder\u2063"


class ChatTemplateError(ValueError):
    """The tokenizer's chat template cannot be extended by a message delta."""


class ChatRenderer:
    """Renders prompts and message deltas with ``tokenizer``'s chat template."""

    def __init__(self, tokenizer: Any, tools: list[dict[str, Any]] | None = None) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ChatTemplateError(
                "the tokenizer has no chat template; set tokenizer.chat_template (a Jinja string)"
            )
        self.tokenizer = tokenizer
        self.tools = tools  # JSON schemas the template may render (``tools=``)
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        for token_id, added in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).items():
            if getattr(added, "special", False):
                special.add(int(token_id))
        self._special = frozenset(special)

    def _render(self, messages: Sequence[dict[str, str]], generation: bool) -> str:
        extra = {"tools": self.tools} if self.tools else {}
        text = self.tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=generation, tokenize=False, **extra
        )
        return str(text)

    def _encode(self, text: str) -> list[int]:
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)]

    def prompt(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Token ids of the first prompt: ``messages`` and the generation prompt."""
        return self._encode(self._render(messages, generation=True))

    def delta(
        self,
        messages: Sequence[dict[str, str]],
        response_ids: Sequence[int],
        new: Sequence[dict[str, str]],
    ) -> list[int]:
        """The tokens that follow ``response_ids`` (the assistant's answer to ``messages``) when
        the ``new`` messages are added and the assistant is to answer again."""
        head = [*messages, {"role": "assistant", "content": _PLACEHOLDER}]
        closed = self._render(head, generation=False)
        extended = self._render([*head, *new], generation=True)
        if not extended.startswith(closed) or _PLACEHOLDER not in closed:
            raise ChatTemplateError(
                "the chat template renders earlier messages differently once a message is "
                "added; a conversation cannot be extended token by token with it"
            )
        turn_end = closed[closed.rindex(_PLACEHOLDER) + len(_PLACEHOLDER) :]
        if response_ids and int(response_ids[-1]) in self._special:
            last = self.tokenizer.convert_ids_to_tokens(int(response_ids[-1]))
            if isinstance(last, str) and last and turn_end.startswith(last):
                turn_end = turn_end[len(last) :]  # the response ended its turn itself
        return self._encode(turn_end + extended[len(closed) :])
