"""The trivial-answer rule's messages: what the parent asks a reference worker before it judges
a task's first candidate, and the rule that comes back (``_reference.trivial_rule`` computes it,
``_parent.trivial`` keeps and applies it).

A task rewards a trivial answer when an answer that computes nothing (zeros, a copy of an
input, a constant, the inputs' mean, the outputs of other inputs) passes its checks at the
configured tolerances: outputs of about 1e-3 judged at atol = 1e-2 let an all-zero answer
through. For each output where one does, the rule is either ``scaled``: judged at an atol
scaled to the expected outputs' magnitude (``atol * min(1, rms)``), at which every trivial
answer fails; or ``refused``: some trivial answer passes even then (the output is constant,
or a copy of an input, to the tolerance), so no verdict on that task can tell a kernel that
computes it from one that computes nothing.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, Self

from .protocol import Draw, _Request

# The trivial answers tried, per output (``input_K``: a copy of input K, reshaped when it has
# as many elements; ``inputs_mean``: the scalar mean of every floating input, broadcast;
# ``inputs_elementwise_mean``: the mean of the inputs of the output's size; ``constant``: one
# value for every draw, the mean of the expected outputs; ``hard_coded``: the first draw's
# expected output returned for the others).
ANSWERS = ("zeros", "constant", "inputs_mean", "inputs_elementwise_mean", "hard_coded")
# Bumped when the rule changes, so rules kept on disk by an older one are not read.
RULE_VERSION = 1
Rule = Literal["none", "scaled_tolerance", "refused", "unchecked"]


@dataclass(frozen=True)
class TrivialRuleRequest(_Request):
    """Which trivial answers pass the task's trial checks, each a (seed, distribution) of
    ``draws`` at the job's sizes, at the job's tolerances and at tolerances scaled to the
    outputs' magnitude."""

    task: str
    task_digest: str
    sizes: dict[str, int]
    model_seed: int
    device: str
    draws: tuple[tuple[int, str], ...]
    atol: float
    rtol: float
    dtype_tolerances: dict[str, list[float]]
    kind = "trivial_rule"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        draws = tuple((int(seed), str(distribution)) for seed, distribution in data["draws"])
        return replace(super().from_json(data), draws=draws)

    def draw(self, seed: int, distribution: str) -> Draw:
        return Draw(
            task=self.task,
            task_digest=self.task_digest,
            sizes=self.sizes,
            seed=seed,
            model_seed=self.model_seed,
            device=self.device,
            distribution=distribution,
        )


@dataclass(frozen=True)
class OutputRule:
    """One output a trivial answer passes at the configured ``atol`` / ``rtol``: ``passing``
    names those answers, ``magnitude`` is the expected output's RMS (the least over the draws),
    ``scaled_atol`` the atol scaled to it, and ``still_passing`` the answers that pass even at
    ``scaled_atol`` (none: the output is judged at it; any: the task is refused)."""

    output: int
    passing: tuple[str, ...]
    atol: float
    rtol: float
    magnitude: float
    scaled_atol: float
    still_passing: tuple[str, ...]

    @property
    def refused(self) -> bool:
        return bool(self.still_passing)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {**data, "passing": list(self.passing), "still_passing": list(self.still_passing)}

    @classmethod
    def parse(cls, data: Any) -> OutputRule | None:
        """The entry in ``data``, or None unless every field has its type."""
        if not isinstance(data, dict) or type(data.get("output")) is not int:
            return None
        numbers = ("atol", "rtol", "magnitude", "scaled_atol")
        names = ("passing", "still_passing")
        if not all(_finite(data.get(n)) for n in numbers) or not all(
            isinstance(data.get(n), list) and all(isinstance(a, str) for a in data[n])
            for n in names
        ):
            return None
        return cls(
            output=data["output"],
            passing=tuple(data["passing"]),
            atol=float(data["atol"]),
            rtol=float(data["rtol"]),
            magnitude=float(data["magnitude"]),
            scaled_atol=float(data["scaled_atol"]),
            still_passing=tuple(data["still_passing"]),
        )


@dataclass(frozen=True)
class TrivialRule:
    """A task's rule (at one set of sizes, distribution, tolerances, device and torch):
    ``outputs`` lists the outputs a trivial answer passes; ``unchecked`` (``reason``) when the
    reference could not be run for it (the job then reports the reference's failure)."""

    outputs: tuple[OutputRule, ...] = ()
    reason: str | None = None

    @property
    def rule(self) -> Rule:
        if self.reason is not None:
            return "unchecked"
        if any(o.refused for o in self.outputs):
            return "refused"
        return "scaled_tolerance" if self.outputs else "none"

    def to_json(self) -> dict[str, Any]:
        return {"outputs": [o.to_json() for o in self.outputs], "reason": self.reason}

    @classmethod
    def parse(cls, data: Any) -> TrivialRule:
        """The rule in a reference worker's answer; ``unchecked`` for anything malformed."""
        if not isinstance(data, dict):
            return cls(reason="the reference worker sent an unreadable answer")
        if "reference_failed" in data:
            return cls(reason=str(data["reference_failed"]))
        raw = data.get("outputs")
        outputs = [OutputRule.parse(o) for o in raw] if isinstance(raw, list) else [None]
        if any(o is None for o in outputs):
            return cls(reason="the reference worker sent an unreadable answer")
        return cls(outputs=tuple(o for o in outputs if o is not None))


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
