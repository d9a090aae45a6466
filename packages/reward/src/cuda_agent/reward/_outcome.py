"""The evaluation outcome the reward functions read, declared as a structural protocol.

`reward` never imports the sandbox: any object with these read-only attributes (a frozen
dataclass, a named tuple, the sandbox's `EvalResult`) is an `EvalOutcome`.
"""

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class EvalOutcome(Protocol):
    """What one evaluation of a candidate kernel against its reference established.

    Times are medians in milliseconds; spreads are a robust measure of their noise in
    milliseconds (for example half the interquartile range). `None` means "not measured".
    """

    @property
    def correct(self) -> bool:
        """The candidate compiled, ran and matched the reference within tolerance."""
        ...

    @property
    def flags(self) -> Sequence[str]:
        """Anti-cheat findings; any flag means the outcome gets the failure reward."""
        ...

    @property
    def candidate_time_ms(self) -> float | None:
        """Median time of the candidate."""
        ...

    @property
    def eager_time_ms(self) -> float | None:
        """Median time of the PyTorch eager reference."""
        ...

    @property
    def compile_time_ms(self) -> float | None:
        """Median time of the `torch.compile`d reference; `None` if it was not timed."""
        ...

    @property
    def candidate_time_spread_ms(self) -> float | None:
        """Noise of `candidate_time_ms`; `None` if unknown."""
        ...

    @property
    def eager_time_spread_ms(self) -> float | None:
        """Noise of `eager_time_ms`; `None` if unknown."""
        ...

    @property
    def compile_time_spread_ms(self) -> float | None:
        """Noise of `compile_time_ms`; `None` if unknown."""
        ...


def is_failure(outcome: EvalOutcome) -> bool:
    """Whether an outcome earns a reward's failure value: incorrect, or any anti-cheat flag."""
    return not outcome.correct or len(outcome.flags) > 0
