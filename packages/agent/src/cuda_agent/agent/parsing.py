"""Extracting a candidate ``ModelNew`` module from a model's free-form answer."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


def extract_candidate(text: str) -> str | None:
    """Return the code of the last fenced block that defines ``ModelNew``, or ``None``.

    A block left unterminated at the end of the answer (the token budget ran out) still counts;
    the sandbox then judges whether it compiles.
    """
    blocks = [b.strip() for b in _FENCE.findall(text)]
    for block in reversed(blocks):
        if re.search(r"^class\s+ModelNew\b", block, re.M):
            return block + "\n"
    return None
