"""Which answers that compute nothing would pass a task's checks (a reference worker's job).

A task whose expected output is zero, constant, or the same whatever the inputs rewards a
candidate that returns zeros, a constant or a hard-coded tensor. Each check here asks the
sandbox's own comparison (``_shared.compare.compare``, at the job's tolerances) whether such an answer
passes on every draw of the inputs, with the expected outputs computed exactly as the
reference worker computes them for a candidate's trials (``_reference.jobs._expected``). A task whose
outputs hold NaN or Inf, or differ when it is built and run twice on the same inputs, cannot be
judged fairly either; those are findings too.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from .._shared import compare as _compare
from .._shared import task_runtime as _task_runtime
from .._shared.protocol import TrivialAnswersRequest
from .._shared.sections import Sections
from . import jobs as _reference


def trivial_answers(
    request: TrivialAnswersRequest, home: Path, sections: Sections | None = None
) -> dict[str, Any]:
    """``findings`` (each a ``code``, the ``output`` index and a ``message``) for the task in
    ``request`` over the draws of ``request.seeds``; or ``reference_failed`` (a message)
    when the task itself fails. Its device work is one correctness section."""
    with (sections or Sections()).correctness("validate"):
        return _trivial_answers(request, home)


def _trivial_answers(request: TrivialAnswersRequest, home: Path) -> dict[str, Any]:
    seeds = list(request.seeds)
    prints, outputs = [], []
    for seed in seeds:
        try:
            fingerprint, want = _reference._expected(request.draw(seed), home)
        except _task_runtime.TaskFailure as exc:
            return {"reference_failed": str(exc)}
        prints.append(fingerprint)
        outputs.append(want)
    judge = _Judge(request.atol, request.rtol, request.dtype_tolerances)
    same_inputs = all(_compare.same_fingerprint(prints[0], p) for p in prints[1:])
    findings = [
        _finding(
            "non_finite_output",
            index,
            f"has NaN or Inf values for the inputs of seed {seed}; a task's outputs must be finite",
        )
        for index, (seed, _) in _first_non_finite(seeds, outputs).items()
    ]
    if request.repeat:
        findings += _unrepeatable(request, home, seeds[0], outputs[0], judge)
    for index in range(min(len(draw) for draw in outputs)):
        findings += judge.findings(index, [draw[index] for draw in outputs], seeds, same_inputs)
    return {"findings": findings}


# The share of a job's tolerance that two runs of the reference on the same inputs may differ
# by before the task is reported ``nondeterministic_output``.
REPEAT_SHARE = 0.1


class _Judge:
    """Would an answer pass against an expected output, at the job's tolerances?"""

    def __init__(self, atol: float, rtol: float, per_dtype: dict[str, Any] | None) -> None:
        self.atol, self.rtol, self.per_dtype = atol, rtol, per_dtype

    def passes(self, got: torch.Tensor, want: torch.Tensor) -> bool:
        return _compare.compare([got], [want], self.atol, self.rtol, self.per_dtype)[0]

    def repeats(self, again: torch.Tensor, first: torch.Tensor) -> bool:
        """Does a second run's output agree with the first within ``REPEAT_SHARE`` of the
        tolerance (and the same shape, NaN where NaN)?"""
        atol, rtol = _compare.tolerance(first.dtype, self.atol, self.rtol, self.per_dtype)
        return _compare.compare([again], [first], atol * REPEAT_SHARE, rtol * REPEAT_SHARE)[0]

    def findings(
        self, index: int, draws: list[torch.Tensor], seeds: list[int], same_inputs: bool
    ) -> list[dict[str, Any]]:
        """The trivial answers that pass output ``index`` on all ``draws`` (one per seed)."""
        atol, rtol = _compare.tolerance(draws[0].dtype, self.atol, self.rtol, self.per_dtype)
        at = f"at atol={atol:g}, rtol={rtol:g}"
        found = []
        if all(self.passes(torch.zeros_like(w), w) for w in draws):
            peak = max(_peak(w) for w in draws)
            found.append(
                _finding(
                    "near_zero_output",
                    index,
                    f"an all-zero answer passes {at} (the largest |expected| is {peak:.3g}); "
                    "scale the task's values up, or judge it at a tighter tolerance",
                )
            )
        first = self.constant(draws[0])
        if first is not None and all(self.constant(w) is not None for w in draws[1:]):
            if all(self.passes(torch.full_like(w, first), w) for w in draws[1:]):
                what = f"{first:.6g} in every draw, so torch.full(shape, {first:.6g}) passes"
            else:
                what = "one value per draw (it depends on the inputs), so a broadcast scalar passes"
            found.append(
                _finding(
                    "constant_output",
                    index,
                    f"all elements are equal {at}: {what}; "
                    "make the output vary across its elements",
                )
            )
        if all(self.passes(draws[0], w) for w in draws[1:]):
            why = (
                "get_inputs() returns the same inputs for every seed: draw them from torch's "
                "generator (torch.randn, torch.rand, ...)"
                if same_inputs
                else "the output does not depend on the inputs: make the forward use them"
            )
            seeds_text = ", ".join(map(str, seeds))
            found.append(
                _finding(
                    "input_independent_output",
                    index,
                    f"a hard-coded tensor passes: the expected output is the same {at} for the "
                    f"inputs of seeds {seeds_text}; {why}",
                )
            )
        return found

    def constant(self, want: torch.Tensor) -> float | None:
        """A value whose constant tensor passes against ``want`` (None if none does, or if
        ``want`` has fewer than two elements: a scalar is not a constant answer)."""
        if want.numel() < 2:
            return None
        value = float(want.reshape(-1)[0].real)  # exact for integers, bool and NaN
        if want.is_floating_point():
            # c passes iff it lies in every interval [w - t, w + t], t = atol + rtol * |w|.
            atol, rtol = _compare.tolerance(want.dtype, self.atol, self.rtol, self.per_dtype)
            x = want.double()
            slack = atol + rtol * x.abs()
            low, high = float((x - slack).max()), float((x + slack).min())
            if low <= high:
                value = (low + high) / 2
            elif math.isfinite(low) and math.isfinite(high):
                return None  # the intervals do not meet: no constant passes
        return value if self.passes(torch.full_like(want, value), want) else None


def _first_non_finite(
    seeds: list[int], outputs: list[list[torch.Tensor]]
) -> dict[int, tuple[int, torch.Tensor]]:
    """Output index -> (the first seed, its output) where that output has a NaN or an Inf."""
    found: dict[int, tuple[int, torch.Tensor]] = {}
    for seed, draw in zip(seeds, outputs, strict=True):
        for index, want in enumerate(draw):
            if index not in found and want.is_floating_point() and not want.isfinite().all():
                found[index] = (seed, want)
    return found


def _unrepeatable(
    request: TrivialAnswersRequest,
    home: Path,
    seed: int,
    first: list[torch.Tensor],
    judge: _Judge,
) -> list[dict[str, Any]]:
    """``nondeterministic_output`` for each output that, built and run again on the same
    inputs, moves by more than ``REPEAT_SHARE`` of the job's tolerance (a stochastic operator:
    rand_like, dropout with training=True; the reference runs in eval mode): the model is
    rebuilt from its seed, and torch's generator reseeded after the inputs are drawn.

    Smaller differences are rounding, not randomness (atomics on a GPU, a CPU kernel whose
    threads split the work another way): a run-to-run move of ``d`` can turn a verdict only
    for an answer within ``d`` of the tolerance's edge, so a tenth of it is not reported."""
    try:
        again = _reference.forward_reseeded(request.draw(seed), home, generator_seed=seed + 7_919)
    except _task_runtime.TaskFailure as exc:
        return [_finding("nondeterministic_output", 0, f"the second run failed: {exc}")]
    return [
        _finding(
            "nondeterministic_output",
            index,
            f"differs between two runs on the inputs of seed {seed} (largest difference "
            f"{_largest_difference(a, b)}, over {REPEAT_SHARE:g} of the tolerance); a task "
            "must not draw random numbers in its forward (rand_like, dropout with training=True)",
        )
        for index, (a, b) in enumerate(zip(first, again, strict=True))
        if not judge.repeats(b, a)
    ]


def _largest_difference(a: torch.Tensor, b: torch.Tensor) -> str:
    if a.shape != b.shape:
        return f"the shape {tuple(b.shape)}, then {tuple(a.shape)}"
    return f"{float((a.double() - b.double()).abs().nan_to_num(0.0).max()):.3g}"


def _peak(want: torch.Tensor) -> float:
    """The largest finite magnitude in ``want`` (0 for an empty output)."""
    if want.numel() == 0:
        return 0.0
    magnitude = want.abs().double() if want.dtype != torch.bool else want.double()
    return float(magnitude.nan_to_num(0.0, 0.0, 0.0).max())


def _finding(code: str, index: int, message: str) -> dict[str, Any]:
    return {"code": code, "output": index, "message": f"output {index}: {message}"}
