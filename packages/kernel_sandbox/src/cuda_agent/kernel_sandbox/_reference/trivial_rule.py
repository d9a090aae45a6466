"""Which answers that compute nothing pass a task's checks, and at which tolerance they stop
passing (a reference worker's job, run once per task, sizes, distribution and tolerances
before its first candidate is judged: ``_parent.trivial``).

The expected outputs are those of the job's trial checks (its first plain draws and one per
extra input distribution: an answer must pass them all), computed as the checks compute them (``_reference.jobs._expected``, so the job's own checks find them cached); each trivial
answer is judged by the sandbox's own comparison (``_shared.compare.compare``). One draw's
outputs at a time are alive (the first draw's beside them for the hard-coded answer), and one
answer at a time is made, judged and dropped: at KernelBench's sizes an output takes gigabytes.
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

# An answer for one draw: (the draw's index, its inputs, its expected output) -> a tensor, or
# None where it does not apply (no input of the output's size).
Answer = Callable[[int, list[Any], torch.Tensor], torch.Tensor | None]


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
    """Two passes over the draws, one draw's outputs alive at a time (a KernelBench task's
    output can take 6 GB, and there are four draws or more): the first measures each output's
    mean and magnitude on every draw (the constant answer and the scaled tolerance need them
    all), the second judges every answer on each draw at both tolerances."""
    draws = len(request.draws)

    def expected(d: int) -> list[torch.Tensor]:
        return _reference._expected(request.draw(*request.draws[d]), home)[1]

    means: list[list[float]] = []
    magnitudes: list[list[float]] = []
    for d in range(draws):
        wants = expected(d)
        means.append([_mean(w) for w in wants])
        magnitudes.append([_rms(w) for w in wants])
        del wants
    judges: list[_OutputJudge] = []
    inputs = _Inputs(request, home)
    for d in range(draws):
        wants = expected(d)
        if d == 0:
            count = min(len(m) for m in means)
            judges = [
                _OutputJudge(
                    index,
                    want,
                    inputs[0],
                    request,
                    [m[index] for m in means],
                    [m[index] for m in magnitudes],
                    draws,
                )
                for index, want in enumerate(wants[:count])
            ]
        first = None
        if d > 0 and any(j.needs_first() for j in judges):
            first = expected(0)  # (the hard-coded answer: the first draw's outputs, again)
        for judge in judges:
            judge.judge(d, inputs[d], wants[judge.index], first)
        del wants, first
    found = [j.rule() for j in judges]
    return {"outputs": [rule.to_json() for rule in found if rule is not None]}


class _Inputs:
    """Each draw's inputs, drawn again when asked, the last draw's only kept: a task's inputs
    may take gigabytes."""

    def __init__(self, request: TrivialRuleRequest, home: Path) -> None:
        self.request, self.home = request, home
        self._held: tuple[int, list[Any]] | None = None

    def __getitem__(self, d: int) -> list[Any]:
        if self._held is None or self._held[0] != d:
            self._held = None  # let the last draw's inputs go before drawing the next
            draw = self.request.draw(*self.request.draws[d])
            self._held = (d, _reference.inputs_of(draw, self.home))
        return self._held[1]


class _OutputJudge:
    """The trivial answers for one output, judged draw by draw at the job's tolerance and at the
    tolerance scaled to the output's magnitude (``atol * min(1, rms)``, the least rms over the
    draws); an answer passes at a tolerance when it passes on every draw it applies to, one
    at least."""

    def __init__(
        self,
        index: int,
        want: torch.Tensor,
        inputs: list[Any],
        request: TrivialRuleRequest,
        means: list[float],
        magnitudes: list[float],
        draws: int,
    ) -> None:
        self.index = index
        self.atol, self.rtol = _compare.tolerance(
            want.dtype, request.atol, request.rtol, request.dtype_tolerances
        )
        self.magnitude = min(magnitudes)
        scalable = want.is_floating_point() or want.is_complex()
        self.scaled = self.atol * min(1.0, self.magnitude) if scalable else self.atol
        self.answers = dict(_answers(want, inputs, sum(means) / len(means)))
        # per answer: [applied to a draw, passes at atol so far, passes at the scaled atol];
        # "hard_coded" (the first draw's output returned for the others) is judged from the
        # first draw's outputs, which ``judge`` is given
        names = [*self.answers, *(["hard_coded"] if draws > 1 else [])]
        self.state = {name: [False, True, True] for name in names}

    def needs_first(self) -> bool:
        state = self.state.get("hard_coded")
        return state is not None and (state[1] or state[2])

    def judge(
        self, d: int, inputs: list[Any], want: torch.Tensor, first: list[torch.Tensor] | None
    ) -> None:
        for name, state in self.state.items():
            if not (state[1] or state[2]):
                continue  # failed at both already
            if name == "hard_coded":
                got = first[self.index] if first is not None and d > 0 else None
                got = got if got is not None and got.shape == want.shape else None
            else:
                got = self.answers[name](d, inputs, want)
            if got is None:
                continue
            state[0] = True
            for k, atol in ((1, self.atol), (2, self.scaled)):
                if state[k] and not _compare.compare([got], [want], atol, self.rtol)[0]:
                    state[k] = False

    def rule(self) -> OutputRule | None:
        passing = [name for name, (applied, ok, _) in self.state.items() if applied and ok]
        if not passing:
            return None
        still = [name for name in passing if self.state[name][2]]
        return OutputRule(self.index, tuple(passing), self.atol, self.rtol, self.magnitude,
                          self.scaled, tuple(still))  # fmt: skip


def _answers(
    want: torch.Tensor, inputs: list[Any], constant: float
) -> Iterator[tuple[str, Answer]]:
    """The trivial answers for an output like ``want`` (the first draw's), whose draws' mean is
    ``constant``, given the first draw's ``inputs``, by name (all but the hard-coded one:
    ``_OutputJudge.judge``)."""
    yield "zeros", lambda d, xs, w: torch.zeros_like(w)
    several = want.numel() > 1  # a single element is not a constant answer
    if several:
        yield "constant", lambda d, xs, w: torch.full_like(w, _as(constant, w))
        yield "inputs_mean", lambda d, xs, w: torch.full_like(w, _as(_inputs_mean(xs), w))
    same = [k for k, x in enumerate(inputs) if _fits(x, want)]
    for k in same:
        yield f"input_{k}", _copy_of(k)
    if len(same) > 1 and want.is_floating_point():

        def elementwise_mean(d: int, xs: list[Any], w: torch.Tensor) -> torch.Tensor | None:
            if not all(k < len(xs) and _fits(xs[k], w) for k in same):
                return None
            total = torch.zeros(w.shape, dtype=torch.float32, device=w.device)
            for k in same:
                total += xs[k].detach().reshape(w.shape).float()
            return (total / len(same)).to(w.dtype)

        yield "inputs_elementwise_mean", elementwise_mean


def _fits(x: Any, want: torch.Tensor) -> bool:
    return (
        isinstance(x, torch.Tensor)
        and x.numel() == want.numel()
        and x.device == want.device
        and (x.is_floating_point() or x.is_complex() or not want.is_floating_point())
    )


def _copy_of(k: int) -> Answer:
    """The answer that returns input ``k`` (reshaped and cast to the output's shape and dtype)."""
    return lambda d, xs, w: _copy(xs[k], w) if k < len(xs) else None


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
