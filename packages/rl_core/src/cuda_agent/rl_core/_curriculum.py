"""A curriculum over training tasks by how often their groups carry a signal.

A group whose rewards are all equal has all-zero group-relative advantages (``informative_groups``):
its episodes cost sampling and judging and teach nothing. Late in an RL run most groups of the
tasks the policy has settled on are like that (on the H100, 2026-12-05: 2 to 4 of a step's 4
groups in the last 20 of 38 GRPO steps). Picking the next step's tasks by the chance that their
next group carries a signal spends the steps where there is something to learn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def signal_weights(
    history: Sequence[Sequence[bool]], *, window: int = 4, floor: float = 0.1
) -> list[float]:
    """Each task's weight for the next pick, from whether its past groups carried a signal.

        n_i = min(window, len(history_i)),  u_i = sum(history_i[-n_i:])
        w_i = floor + (u_i + 1) / (n_i + 2)

    ``history[i]``: task i's groups in order, True where the group's rewards were not all
    equal. ``(u + 1) / (n + 2)`` is Laplace's rule of succession for the chance that the next
    group carries a signal, over the last ``window`` groups only (the policy moves on); a task
    never tried gets 1/2, and ``floor`` keeps every task reachable (a task whose groups were
    uniform may become informative again as the policy changes elsewhere).

    >>> signal_weights([[], [True, True], [False, False, False, False, False]], floor=0.0)
    [0.5, 0.75, 0.16666666666666666]
    """
    if window < 1 or not (floor >= 0 and math.isfinite(floor)):
        raise ValueError("window must be >= 1 and floor finite and >= 0")
    weights = []
    for groups in history:
        recent = list(groups)[-window:]
        weights.append(floor + (sum(bool(g) for g in recent) + 1) / (len(recent) + 2))
    return weights


def weighted_pick(weights: Sequence[float], uniforms: Sequence[float], count: int) -> list[int]:
    """``count`` distinct indices drawn with probability proportional to ``weights``, without
    replacement (Efraimidis and Spirakis, 2006: index i gets the key

        k_i = log(v_i) / w_i,   v_i = uniforms[i] in (0, 1]

    and the ``count`` largest keys win), in the order of their keys. ``uniforms``: one uniform
    draw per index (the caller's seeded generator: the pick is a pure function of them).
    Indices of weight 0 come last, after every positive one (however small). ValueError for
    mismatched lengths, a negative or non-finite weight, or a draw outside (0, 1].

    >>> weighted_pick([1.0, 1.0, 1.0], [0.2, 0.9, 0.5], 2)
    [1, 2]
    """
    if len(weights) != len(uniforms):
        raise ValueError("one uniform draw per weight")
    if any(not (w >= 0 and math.isfinite(w)) for w in weights):
        raise ValueError("weights must be finite and >= 0")
    if any(not 0 < v <= 1 for v in uniforms):
        raise ValueError("uniform draws must be in (0, 1]")
    # (positive first: a weight so small that log(v) / w overflows to -inf still ranks above
    # every zero weight; then the key; ties to the lower index)
    keys = [
        (w > 0, math.log(v) / w if w > 0 else 0.0, -i)
        for i, (w, v) in enumerate(zip(weights, uniforms, strict=True))
    ]
    order = sorted(range(len(keys)), key=lambda i: keys[i], reverse=True)
    return order[: max(0, min(count, len(order)))]
