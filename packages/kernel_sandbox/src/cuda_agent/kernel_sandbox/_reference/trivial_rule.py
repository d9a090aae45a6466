"""Which answers that compute nothing pass a task's checks, and at which tolerance they stop
passing (a reference worker's job, run once per task, sizes, distribution and tolerances
before its first candidate is judged: ``_parent.trivial``).

The expected outputs are those of the job's trial checks (its first plain draws and one per
extra input distribution: an answer must pass them all), computed as the checks compute them (``_reference.jobs._expected``, so the job's own checks find them cached); each trivial
answer is judged by the sandbox's own comparison (``_shared.compare.compare``). One answer at
a time is made, judged and dropped: an output of gigabytes is never held twice over.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from .._shared import compare as _compare
from .._shared import task_runtime as _task_runtime
from .._shared.sections import Sections
from .._shared.trivial_rule import OutputRule, TrivialRuleRequest
from . import jobs as _reference

# An answer for one draw: (the draw's index, every draw's inputs, the expected output) -> a
# tensor, or None where it does not apply (no input of the output's size).
Answer = Callable[[int, "_Inputs", torch.Tensor], torch.Tensor | None]


def trivial_rule(
    request: TrivialRuleRequest, home: Path, sections: Sections | None = None
) -> dict[str, Any]:
    """``outputs``: an ``OutputRule`` for each output a trivial answer passes; or
    ``reference_failed`` (a message). Its device work is one correctness section."""
    with (sections or Sections()).correctness("trivial"):
        try:
            return _rule(request, home)
        except _task_runtime.TaskFailure as exc:
            return {"reference_failed": str(exc)}
        finally:
            if request.device.startswith("cuda"):
                _task_runtime.release_gpu_memory()


def _rule(request: TrivialRuleRequest, home: Path) -> dict[str, Any]:
    expected = [_reference._expected(request.draw(*draw), home)[1] for draw in request.draws]
    inputs = _Inputs(request, home)
    outputs = []
    for index in range(min(len(want) for want in expected)):
        found = _output_rule(index, inputs, [want[index] for want in expected], request)
        if found is not None:
            outputs.append(found.to_json())
    return {"outputs": outputs}


class _Inputs:
    """Each draw's inputs, drawn again when asked, the last draw's only kept: a task's inputs
    may take gigabytes, and most answers fail on the first draw."""

    def __init__(self, request: TrivialRuleRequest, home: Path) -> None:
        self.request, self.home = request, home
        self._held: tuple[int, list[Any]] | None = None

    def __len__(self) -> int:
        return len(self.request.draws)

    def __getitem__(self, d: int) -> list[Any]:
        if self._held is None or self._held[0] != d:
            self._held = None  # let the last draw's inputs go before drawing the next
            draw = self.request.draw(*self.request.draws[d])
            self._held = (d, _reference.inputs_of(draw, self.home))
        return self._held[1]


def _output_rule(
    index: int, inputs: _Inputs, wants: list[torch.Tensor], request: TrivialRuleRequest
) -> OutputRule | None:
    atol, rtol = _compare.tolerance(
        wants[0].dtype, request.atol, request.rtol, request.dtype_tolerances
    )
    answers = dict(_answers(inputs, wants))
    passing = [
        name for name, answer in answers.items() if _passes(answer, inputs, wants, atol, rtol)
    ]
    if not passing:
        return None
    magnitude = min(_rms(w) for w in wants)
    scalable = wants[0].is_floating_point() or wants[0].is_complex()
    scaled = atol * min(1.0, magnitude) if scalable else atol
    still = [name for name in passing if _passes(answers[name], inputs, wants, scaled, rtol)]
    return OutputRule(index, tuple(passing), atol, rtol, magnitude, scaled, tuple(still))


def _answers(inputs: _Inputs, wants: list[torch.Tensor]) -> Iterator[tuple[str, Answer]]:
    """The trivial answers for an output whose expected values are ``wants`` (one per draw of
    ``inputs``), by name."""
    yield "zeros", lambda d, xs, w: torch.zeros_like(w)
    several = wants[0].numel() > 1  # a single element is not a constant answer
    if several:
        constant = sum(_mean(w) for w in wants) / len(wants)
        yield "constant", lambda d, xs, w: torch.full_like(w, _as(constant, w))
        yield "inputs_mean", lambda d, xs, w: torch.full_like(w, _as(_inputs_mean(xs[d]), w))
    same = [k for k, x in enumerate(inputs[0]) if _fits(x, wants[0])]
    for k in same:
        yield f"input_{k}", _copy_of(k)
    if len(same) > 1 and wants[0].is_floating_point():

        def elementwise_mean(d: int, xs: _Inputs, w: torch.Tensor) -> torch.Tensor | None:
            drawn = xs[d]
            if not all(_fits(drawn[k], w) for k in same):
                return None
            total = torch.zeros(w.shape, dtype=torch.float32, device=w.device)
            for k in same:
                total += drawn[k].detach().reshape(w.shape).float()
            return (total / len(same)).to(w.dtype)

        yield "inputs_elementwise_mean", elementwise_mean
    if len(wants) > 1:
        first = wants[0]
        yield "hard_coded", lambda d, xs, w: first if d > 0 and first.shape == w.shape else None


def _passes(
    answer: Answer,
    inputs: _Inputs,
    wants: list[torch.Tensor],
    atol: float,
    rtol: float,
) -> bool:
    """Whether ``answer`` passes on every draw it applies to (and applies to one at least)."""
    judged = False
    for d, want in enumerate(wants):
        got = answer(d, inputs, want)
        if got is None:
            continue
        if not _compare.compare([got], [want], atol, rtol)[0]:
            return False
        judged = True
    return judged


def _fits(x: Any, want: torch.Tensor) -> bool:
    return (
        isinstance(x, torch.Tensor)
        and x.numel() == want.numel()
        and x.device == want.device
        and (x.is_floating_point() or x.is_complex() or not want.is_floating_point())
    )


def _copy_of(k: int) -> Answer:
    """The answer that returns input ``k`` (reshaped and cast to the output's shape and dtype)."""
    return lambda d, xs, w: _copy(xs[d][k], w) if k < len(xs[d]) else None


def _copy(x: Any, want: torch.Tensor) -> torch.Tensor | None:
    return x.detach().reshape(want.shape).to(want.dtype) if _fits(x, want) else None


def _mean(want: torch.Tensor) -> float:
    """The mean of ``want``'s finite values (0 when it has none)."""
    total, _, count = _moments(want)
    return total / count if count else 0.0


def _inputs_mean(inputs: list[Any]) -> float:
    """The mean of every floating input's finite elements together (0 when there are none)."""
    total, count = 0.0, 0
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            part, _, n = _moments(x.detach())
            total, count = total + part, count + n
    return total / count if count else 0.0


def _as(value: float, want: torch.Tensor) -> float | int | bool:
    """``value`` as an element of ``want``'s dtype would hold it (integers rounded)."""
    if want.dtype == torch.bool:
        return value >= 0.5
    if want.is_floating_point() or want.is_complex():
        return value
    return round(value)


def _rms(want: torch.Tensor) -> float:
    """The root mean square of ``want``'s finite values (0 when it has none)."""
    _, squares, count = _moments(want)
    return math.sqrt(squares / count) if count else 0.0


def _moments(x: torch.Tensor) -> tuple[float, float, int]:
    """(sum, sum of squares, count) of ``x``'s finite values, in float64 a chunk at a time (a
    float64 copy of a large output would not fit beside it)."""
    flat = (torch.view_as_real(x) if x.is_complex() else x).reshape(-1)
    total = squares = 0.0
    count = 0
    for lo in range(0, flat.numel(), _compare.CHUNK):
        part = flat[lo : lo + _compare.CHUNK].double()
        part = part[part.isfinite()]
        total += float(part.sum())
        squares += float(part.square().sum())
        count += part.numel()
    return total, squares, count
