"""Sizes of a composition: its symbolic shapes evaluated, and the time model that picks them.

A shape is a tuple of expressions over the module-level size names (``("BATCH", "DIM")``,
``("BATCH", "C * H * W")``). The time model of a backend (``Machine``) charges each op a fixed
overhead, the bytes it moves at the backend's bandwidth and, for ``linear`` and ``conv2d``, its
FLOPs at the backend's throughput (``estimate_ms``). ``choose_sizes`` draws the fixed
dimensions from the backend's menus and solves the batch for an eager time drawn log-uniformly
inside the backend's window (``WINDOWS``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .catalogue import Dims, Op, catalogue

if TYPE_CHECKING:
    from .compose import Step

# eager-time windows in ms, per backend
WINDOWS: Mapping[str, tuple[float, float]] = {"cuda": (1.0, 100.0), "cpu": (0.1, 10.0)}
# the time model's eager time of the small GPU variant (the H200 ran 24 training compositions
# at a median 2.1 ms eager for a median estimate of 3.4 ms: some 0.6 ms expected)
SMALL_MS = 1.0


@dataclass(frozen=True)
class Machine:
    """The time model of a backend: effective bandwidth (bytes/s), throughput (FLOP/s) and the
    fixed cost of one op (s)."""

    bandwidth: float
    flops: float
    overhead_s: float
    menus: Mapping[str, tuple[int, ...]]
    max_elements: int


MACHINES: Mapping[str, Machine] = {
    "cuda": Machine(
        2.5e12,
        4.0e13,
        5e-6,
        {"DIM": (512, 1024, 2048, 4096, 8192), "HIDDEN": (512, 1024, 2048, 4096),
         "C": (3, 16, 32, 64), "C_OUT": (16, 32, 64, 128), "H": (32, 64, 128),
         "D1": (256, 512, 1024, 2048, 4096), "D2": (256, 512, 1024, 2048, 4096)},
        1 << 30,
    ),
    "cpu": Machine(
        3.5e10,  # cache-resident tensors of a few MB on 2 cores (fitted to measured eager times)
        5.0e10,
        5e-6,
        {"DIM": (128, 256, 512, 1024, 2048), "HIDDEN": (128, 256, 512),
         "C": (3, 8, 16), "C_OUT": (8, 16), "H": (16, 32),
         "D1": (32, 64, 128, 256, 512), "D2": (32, 64, 128, 256, 512)},
        1 << 22,
    ),
}  # fmt: skip


def _menu_key(name: str) -> str:
    base = name.split("_")[0] if not name.startswith("C_OUT") else "C_OUT"
    return {"W": "H"}.get(base, base)


def choose_sizes(
    rng: random.Random,
    backend: str,
    names: Sequence[str],
    steps: Sequence[Step],
    inputs: Sequence[tuple[str, Dims]],
) -> dict[str, int]:
    machine = MACHINES[backend]
    sizes = {n: rng.choice(machine.menus[_menu_key(n)]) for n in names if n != "BATCH"}
    if "W" in sizes:
        sizes["W"] = sizes["H"]
    low, high = WINDOWS[backend]
    target = math.exp(rng.uniform(math.log(2 * low), math.log(high / 3)))
    batch = solve_batch(machine, steps, inputs, sizes, target) or 1
    widest = max(largest(steps, inputs, {**sizes, "BATCH": 1}), 1)
    batch = max(1, min(batch, machine.max_elements // widest))
    return {"BATCH": round_batch(batch), **sizes}


def solve_batch(
    machine: Machine,
    steps: Sequence[Step],
    inputs: Sequence[tuple[str, Dims]],
    sizes: Mapping[str, int],
    target_ms: float,
) -> int | None:
    """The batch (at least 1) at which the time model says ``target_ms`` with the other
    ``sizes``; None when the time does not grow with the batch."""
    fixed = estimate_ms(machine, steps, inputs, {**sizes, "BATCH": 0})
    per_row = estimate_ms(machine, steps, inputs, {**sizes, "BATCH": 1}) - fixed
    return max(1, round((target_ms - fixed) / per_row)) if per_row > 0 else None


def round_batch(batch: int) -> int:
    """A batch above 16 rounded down to a multiple of 8."""
    return batch - batch % 8 if batch > 16 else batch


def numel(dims: Dims, sizes: Mapping[str, int]) -> int:
    return math.prod(value(d, sizes) for d in dims)


def value(expression: str, sizes: Mapping[str, int]) -> int:
    # Our own expressions over size names (``H // 2``, ``C * H * W``): no builtins reachable.
    return int(eval(expression, {"__builtins__": {}}, dict(sizes)))


def walk(
    steps: Sequence[Step], inputs: Sequence[tuple[str, Dims]]
) -> list[tuple[Op, Step, Dims, Dims]]:
    """(op, step, input dims, output dims) along the chain."""
    ops = catalogue()
    dims = inputs[0][1]
    out = []
    for step in steps:
        op = ops[step.op]
        new = op.step_shape(dims, step.new_size, step.axis, step.keepdim)
        out.append((op, step, dims, new))
        dims = new
    return out


def largest(
    steps: Sequence[Step], inputs: Sequence[tuple[str, Dims]], sizes: Mapping[str, int]
) -> int:
    return max(
        [numel(d, sizes) for _, d in inputs]
        + [numel(o, sizes) for *_, o in walk(steps, inputs)]
    )  # fmt: skip


def estimate_ms(
    machine: Machine,
    steps: Sequence[Step],
    inputs: Sequence[tuple[str, Dims]],
    sizes: Mapping[str, int],
) -> float:
    """The time model's eager time (ms): per op, its overhead, bytes moved and FLOPs."""
    seconds = 0.0
    for op, step, dims, out in walk(steps, inputs):
        elements = numel(dims, sizes)
        flops = 0.0
        if op.name == "linear":
            flops = 2.0 * elements * sizes[step.new_size]
        elif op.name == "conv2d":
            flops = 2.0 * numel(out, sizes) * sizes[step.in_size] * 9
        moved = op.cost * elements + 4.0 * numel(out, sizes) * (op.kind == "layer")
        seconds += machine.overhead_s + moved / machine.bandwidth + flops / machine.flops
    return seconds * 1e3
