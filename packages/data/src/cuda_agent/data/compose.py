"""Compose catalogue operators into a KernelBench-format task module.

    task = compose(random.Random(7), index=0)     # a Composition
    task.source                                   # Model, get_inputs, get_init_inputs, sizes
    task.to_task()                                # a kernel_sandbox Task

A composition is a chain: the first input ``x`` flows through 1 to 5 ops; a binary op adds a
new input of the running shape (``y``, ``z``, ...). Shapes are tracked symbolically (each
dimension an expression over the module-level sizes, so ``get_inputs`` and layer constructors
are written with them) and checked against torch on ``meta`` tensors (``Op.output_shape``).

Sizes are chosen so that the eager time falls in a window: fixed dimensions are drawn from
small menus, then the batch is solved from a time model (bytes moved at a backend's bandwidth,
matmul and convolution FLOPs at its throughput, a launch overhead per op) for a target drawn
log-uniformly inside the window. The module-level sizes aim at ``WINDOWS["cuda"]`` (1 to
100 ms, as the reference system), ``CPU_SIZES`` at ``WINDOWS["cpu"]``. The filters measure the
real time; the model only has to land most draws inside.

``Composition.small_sizes`` is a smaller GPU variant for training (``SMALL_MS`` by the time
model, the batch alone shrunk): on the H200 the module-level sizes' inputs reach gigabytes, so
a sandbox's lanes could run only two or three of them at once (memory), while timing at a
fraction of a millisecond still moves hundreds of megabytes, far beyond the 50 MB L2 cache.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.kernel_sandbox import Task, task_from_source

from .catalogue import Dims, Op, catalogue, chain_teachable

# P(number of operators): the reference system's set was 84% two-operator compositions.
OP_COUNTS: Mapping[int, float] = {1: 0.05, 2: 0.84, 3: 0.06, 4: 0.03, 5: 0.02}
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
         "C": (3, 16, 32, 64), "C_OUT": (16, 32, 64, 128), "H": (32, 64, 128)},
        1 << 30,
    ),
    "cpu": Machine(
        3.5e10,  # cache-resident tensors of a few MB on 2 cores (fitted to measured eager times)
        5.0e10,
        5e-6,
        {"DIM": (128, 256, 512, 1024, 2048), "HIDDEN": (128, 256, 512),
         "C": (3, 8, 16), "C_OUT": (8, 16), "H": (16, 32)},
        1 << 22,
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Step:
    """One op of a chain: its parameters under their names in the module (``alpha``,
    ``alpha_2`` when the op repeats), the input it reads beside ``x`` (binary ops), the
    submodule attribute (layers) and the size it introduces (``HIDDEN``, ``C_OUT_2``...)."""

    op: str
    params: Mapping[str, float] = field(default_factory=dict)
    operand: str = ""
    module: str = ""
    new_size: str = ""
    in_size: str = ""


@dataclass(frozen=True)
class Composition:
    """A synthesized task: its chain, symbolic input shapes, sizes (module-level, aimed at the
    GPU window; ``cpu_sizes`` at the CPU window), the time model's estimates and the source."""

    name: str
    steps: tuple[Step, ...]
    inputs: tuple[tuple[str, Dims], ...]
    output: Dims
    sizes: Mapping[str, int]
    cpu_sizes: Mapping[str, int]
    estimate_ms: Mapping[str, float]
    source: str

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(s.op for s in self.steps)

    @property
    def family(self) -> str:
        """The operator combination: sorted distinct op names joined by ``+``."""
        return "+".join(sorted(set(self.ops)))

    @property
    def teachable(self) -> bool:
        """Whether ``solutions.cpu_solution`` can write this chain in C (``chain_teachable``)."""
        return chain_teachable(self.inputs[0][1], self.ops)

    @property
    def small_sizes(self) -> dict[str, int]:
        """The batch at which the time model's GPU estimate is ``SMALL_MS`` (a multiple of 8
        above 16), when that is smaller than the module's; {} otherwise. The other sizes stay:
        the operators see rows of the same width. ``Task.resized`` makes the task at them."""
        batch = _solve_batch(MACHINES["cuda"], self.steps, self.inputs, self.sizes, SMALL_MS)
        if batch is None:
            return {}
        batch = _round_batch(batch)
        return {"BATCH": batch} if batch < self.sizes["BATCH"] else {}

    def metadata(self) -> dict[str, Any]:
        return {
            "source": "synthesized",
            "ops": list(self.ops),
            "family": self.family,
            "sizes": dict(self.sizes),
            "cpu_sizes": dict(self.cpu_sizes),
            "small_sizes": self.small_sizes,
            "estimate_ms": dict(self.estimate_ms),
        }

    def to_task(self) -> Task:
        return task_from_source(self.source, name=self.name)


class CompositionError(ValueError):
    """No op of the catalogue can follow the chain so far (or the sizes cannot be met)."""


def compose(
    rng: random.Random,
    index: int = 0,
    max_ops: int = 5,
    counts: Mapping[int, float] = OP_COUNTS,
    teachable: bool = False,
    exclude: Sequence[str] = (),
) -> Composition:
    """One random composition (deterministic for ``rng``'s state). ``teachable`` keeps to
    chains ``solutions.py`` writes in C; ``exclude`` leaves ops out of the draw."""
    if not 1 <= max_ops <= 5:
        raise ValueError("max_ops must be 1 to 5")
    weights = {k: w for k, w in counts.items() if 1 <= k <= max_ops and w > 0}
    if not weights:
        raise ValueError(f"no operator count in {dict(counts)} is within 1..{max_ops}")
    count = rng.choices(list(weights), list(weights.values()))[0]
    ops = {n: op for n, op in catalogue().items() if n not in exclude}
    if teachable:
        ops = {n: op for n, op in ops.items() if op.teachable}
    for _ in range(50):
        drawn = _draw_chain(rng, ops, count, teachable)
        if drawn is not None:
            return _build(rng, index, *drawn)
    raise CompositionError(f"no chain of {count} ops could be drawn from {sorted(ops)}")


def _draw_chain(
    rng: random.Random, ops: Mapping[str, Op], count: int, teachable: bool
) -> tuple[Dims, list[Op]] | None:
    """(the first input's dims, the ops), or None where the chain got stuck."""
    start: Dims = ("BATCH", "DIM") if teachable or rng.random() < 0.7 else ("BATCH", "C", "H", "W")
    dims = start
    chain: list[Op] = []
    reduced = False
    for _ in range(count):
        choices = [
            op
            for op in ops.values()
            if len(dims) in op.ranks
            and (not chain or op.name != chain[-1].name)
            and _fits(op, dims)
            and not (teachable and reduced and op.kind in ("binary", "reduction"))
        ]
        if not choices:
            return None
        op = rng.choices(choices, [o.weight for o in choices])[0]
        chain.append(op)
        reduced |= op.kind == "reduction"
        dims = op.shape(dims, op.new_size or "NEW")
    return start, chain


def _fits(op: Op, dims: Dims) -> bool:
    """Layers read a dimension's size in their constructor: it must be a plain size name."""
    if not op.init:
        return True
    read = dims[1] if len(dims) == 4 else dims[-1]
    return read.isidentifier()


def _build(rng: random.Random, index: int, dims: Dims, chain: list[Op]) -> Composition:
    inputs: list[tuple[str, Dims]] = [("x", dims)]
    steps: list[Step] = []
    used: dict[str, int] = {}
    for op in chain:
        params = {_unique(p.name, used): p.draw(rng) for p in op.params}
        operand = module = new = read = ""
        if op.kind == "binary":
            operand = "yzuvwst"[len(inputs) - 1]
            inputs.append((operand, dims))
        if op.init:
            module = _unique(op.name, used)
            read = dims[1] if len(dims) == 4 else dims[-1]
            new = _unique(op.new_size, used) if op.new_size else ""
        steps.append(Step(op.name, params, operand, module, new, read))
        dims = op.shape(dims, new)
    names = _size_names(inputs, steps)
    sizes = _choose_sizes(rng, "cuda", names, steps, inputs)
    cpu_sizes = _choose_sizes(rng, "cpu", names, steps, inputs)
    estimate = {
        "cuda": estimate_ms(MACHINES["cuda"], steps, inputs, sizes),
        "cpu": estimate_ms(MACHINES["cpu"], steps, inputs, cpu_sizes),
    }
    _check_shapes(steps, inputs, cpu_sizes)
    name = f"syn_{index:05d}_" + "_".join(op.name for op in chain)
    source = _source(chain, steps, inputs, sizes, cpu_sizes, dims)
    return Composition(name, tuple(steps), tuple(inputs), dims, sizes, cpu_sizes, estimate, source)


def _unique(name: str, used: dict[str, int]) -> str:
    used[name] = used.get(name, 0) + 1
    return name if used[name] == 1 else f"{name}_{used[name]}"


def _size_names(inputs: Sequence[tuple[str, Dims]], steps: Sequence[Step]) -> list[str]:
    names: list[str] = []
    for _, dims in inputs:
        for d in dims:
            if d.isidentifier() and d not in names:
                names.append(d)
    names += [s.new_size for s in steps if s.new_size and s.new_size not in names]
    return names


def _menu_key(name: str) -> str:
    base = name.split("_")[0] if not name.startswith("C_OUT") else "C_OUT"
    return {"W": "H"}.get(base, base)


def _choose_sizes(
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
    batch = _solve_batch(machine, steps, inputs, sizes, target) or 1
    widest = max(_largest(steps, inputs, {**sizes, "BATCH": 1}), 1)
    batch = max(1, min(batch, machine.max_elements // widest))
    return {"BATCH": _round_batch(batch), **sizes}


def _solve_batch(
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


def _round_batch(batch: int) -> int:
    """A batch above 16 rounded down to a multiple of 8."""
    return batch - batch % 8 if batch > 16 else batch


def _numel(dims: Dims, sizes: Mapping[str, int]) -> int:
    return math.prod(_value(d, sizes) for d in dims)


def _value(expression: str, sizes: Mapping[str, int]) -> int:
    # Our own expressions over size names (``H // 2``, ``C * H * W``): no builtins reachable.
    return int(eval(expression, {"__builtins__": {}}, dict(sizes)))


def _walk(
    steps: Sequence[Step], inputs: Sequence[tuple[str, Dims]]
) -> list[tuple[Op, Step, Dims, Dims]]:
    """(op, step, input dims, output dims) along the chain."""
    ops = catalogue()
    dims = inputs[0][1]
    out = []
    for step in steps:
        op = ops[step.op]
        new = op.shape(dims, step.new_size)
        out.append((op, step, dims, new))
        dims = new
    return out


def _largest(
    steps: Sequence[Step], inputs: Sequence[tuple[str, Dims]], sizes: Mapping[str, int]
) -> int:
    return max(
        [_numel(d, sizes) for _, d in inputs]
        + [_numel(o, sizes) for *_, o in _walk(steps, inputs)]
    )  # fmt: skip


def estimate_ms(
    machine: Machine,
    steps: Sequence[Step],
    inputs: Sequence[tuple[str, Dims]],
    sizes: Mapping[str, int],
) -> float:
    """The time model's eager time (ms): per op, its overhead, bytes moved and FLOPs."""
    seconds = 0.0
    for op, step, dims, out in _walk(steps, inputs):
        elements = _numel(dims, sizes)
        flops = 0.0
        if op.name == "linear":
            flops = 2.0 * elements * sizes[step.new_size]
        elif op.name == "conv2d":
            flops = 2.0 * _numel(out, sizes) * sizes[step.in_size] * 9
        moved = op.cost * elements + 4.0 * _numel(out, sizes) * (op.kind == "layer")
        seconds += machine.overhead_s + moved / machine.bandwidth + flops / machine.flops
    return seconds * 1e3


def _check_shapes(
    steps: Sequence[Step], inputs: Sequence[tuple[str, Dims]], sizes: Mapping[str, int]
) -> None:
    """The symbolic shapes against torch's own (``Op.output_shape`` on meta tensors)."""
    for op, step, dims, out in _walk(steps, inputs):
        init = {"in": _value(step.in_size, sizes)} if step.in_size else {}
        if step.new_size:
            init["new"] = sizes[step.new_size]
        shape = tuple(_value(d, sizes) for d in dims)
        got = op.output_shape(shape, init)
        want = tuple(_value(d, sizes) for d in out)
        if got != want:
            raise CompositionError(
                f"{op.name}: torch gives shape {got} for {shape}; the catalogue says {want}"
            )


def forward_lines(chain: Sequence[Op], steps: Sequence[Step]) -> list[str]:
    """Each op's expression in the forward, in order (its input is always ``x``)."""
    lines = []
    for op, s in zip(chain, steps, strict=True):
        names = {p.name: n for p, n in zip(op.params, s.params, strict=True)}
        lines.append(op.forward_line("x", s.operand, s.module, names))
    return lines


def _source(
    chain: Sequence[Op],
    steps: Sequence[Step],
    inputs: Sequence[tuple[str, Dims]],
    sizes: Mapping[str, int],
    cpu_sizes: Mapping[str, int],
    output: Dims,
) -> str:
    layers = [(op, s) for op, s in zip(chain, steps, strict=True) if op.init]
    init_args = [
        *dict.fromkeys(name for _, s in layers for name in (s.in_size, s.new_size) if name),
    ]
    params = [(name, value) for s in steps for name, value in s.params.items()]
    signature = ", ".join(
        ["self", *(f"{a.lower()}: int" for a in init_args), *(f"{p}: float" for p, _ in params)]
    )
    body = ["super().__init__()"]
    for op, s in layers:
        fields = {"in": s.in_size.lower(), "new": s.new_size.lower()}
        body.append(f"self.{s.module} = {op.init.format(**fields)}")
    body += [f"self.{p} = {p}" for p, _ in params]
    forward_args = ", ".join(f"{name}: torch.Tensor" for name, _ in inputs)
    lines = [f"x = {line}" for line in forward_lines(chain, steps)]
    lines[-1] = lines[-1].replace("x = ", "return ", 1)  # the last op is returned, as usual
    uses_f = any("F." in line for line in lines) or any("F." in b for b in body)
    draws = ", ".join(f"torch.randn({', '.join(dims)})" for _, dims in inputs)
    init_values = [*init_args, *(repr(v) for _, v in params)]
    sized = "\n".join(f"{n} = {v}" for n, v in sizes.items())
    chain_text = " -> ".join(op.name for op in chain)
    return "\n".join(
        [
            f'"""Synthesized: {chain_text} ({len(chain)} operator{"s" * (len(chain) > 1)}); '
            f'output shape ({", ".join(output)})."""',
            "",
            "import torch",
            *(["import torch.nn.functional as F"] if uses_f else []),
            "from torch import nn",
            "",
            sized,
            "CPU_SIZES = {" + ", ".join(f'"{n}": {v}' for n, v in cpu_sizes.items()) + "}",
            "",
            "",
            "class Model(nn.Module):",
            f"    def __init__({signature}) -> None:",
            *(f"        {b}" for b in body),
            "",
            f"    def forward(self, {forward_args}) -> torch.Tensor:",
            *(f"        {line}" for line in lines),
            "",
            "",
            "def get_inputs():",
            f"    return [{draws}]",
            "",
            "",
            "def get_init_inputs():",
            f"    return [{', '.join(init_values)}]",
            "",
        ]
    )
