"""Checks of sampling arguments, shared by the local and the remote policy (standard library only)."""

from __future__ import annotations

from typing import Any


def checked_sampling_args(
    n: int, max_new_tokens: int, temperature: float, top_p: float, top_k: int, stop: Any
) -> tuple[str, ...]:
    """Raise ValueError on sampling arguments no sampler accepts; return the stop strings as a
    tuple (a lone string is one stop string). Shared by Policy and RemotePolicy."""
    if n < 1 or max_new_tokens < 1:
        raise ValueError(
            f"n and max_new_tokens must be >= 1, got n={n}, max_new_tokens={max_new_tokens}"
        )
    if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
        raise ValueError(
            f"need temperature >= 0, 0 < top_p <= 1, top_k >= 0; got {temperature}, {top_p}, {top_k}"
        )
    stops = (stop,) if isinstance(stop, str) else tuple(stop)
    if any(not isinstance(s, str) or not s for s in stops):
        raise ValueError("stop strings must be non-empty")
    return stops
