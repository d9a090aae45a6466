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
log-uniformly inside the window (``sizing.py``: the symbolic shapes evaluated, the time model).
The module-level sizes aim at ``WINDOWS["cuda"]`` (1 to 100 ms, as the reference system),
``CPU_SIZES`` at ``WINDOWS["cpu"]``. The filters measure the real time; the model only has to
land most draws inside.

``Composition.small_sizes`` is a smaller GPU variant for training (``SMALL_MS`` by the time
model, the batch alone shrunk): on the H200 the module-level sizes' inputs reach gigabytes, so
a sandbox's lanes could run only two or three of them at once (memory), while timing at a
fraction of a millisecond still moves hundreds of megabytes, far beyond the 50 MB L2 cache.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.kernel_sandbox import Task, task_from_source

from .catalogue import Dims, Op, catalogue, chain_teachable
from .sizing import (
    MACHINES,
    SMALL_MS,
    choose_sizes,
    estimate_ms,
    round_batch,
    solve_batch,
    value,
    walk,
)

# P(number of operators): the reference system's set was 84% two-operator compositions.
OP_COUNTS: Mapping[int, float] = {1: 0.05, 2: 0.84, 3: 0.06, 4: 0.03, 5: 0.02}


@dataclass(frozen=True)
class Step:
    """One op of a chain: its parameters under their names in the module (``alpha``,
    ``alpha_2`` when the op repeats), the input it reads beside ``x`` (binary ops), the
    submodule attribute (layers), the size it introduces (``HIDDEN``, ``C_OUT_2``...) and, for
    an axis op, the axis it reduces (``dim``, an integer constructor argument)."""

    op: str
    params: Mapping[str, float] = field(default_factory=dict)
    operand: str = ""
    module: str = ""
    new_size: str = ""
    in_size: str = ""
    # an axis op's: the constructor argument naming the axis ("" where the forward writes
    # the axis as a number, ``dim=1``), its value, and keepdim; ``axis_default``: the
    # argument has the axis as its default (``dim: int = 1``, last) and get_init_inputs
    # leaves it out, as KernelBench's log-softmax
    axis_arg: str = ""
    axis: int | None = None
    keepdim: bool = False
    axis_default: bool = False


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
        """The operator combination: sorted distinct operator names joined by ``+`` (an axis
        op's is its operator's, ``Op.family``: ``sum_dim`` counts as ``sum``)."""
        known = catalogue()
        return "+".join(sorted({known[op].family_name for op in self.ops}))

    @property
    def teachable(self) -> bool:
        """Whether ``solutions.cpu_solution`` can write this chain in C (``chain_teachable``)."""
        return chain_teachable(self.inputs[0][1], self.ops)

    @property
    def small_sizes(self) -> dict[str, int]:
        """The batch at which the time model's GPU estimate is ``SMALL_MS`` (a multiple of 8
        above 16), when that is smaller than the module's; {} otherwise. The other sizes stay:
        the operators see rows of the same width. ``Task.resized`` makes the task at them."""
        batch = solve_batch(MACHINES["cuda"], self.steps, self.inputs, self.sizes, SMALL_MS)
        if batch is None:
            return {}
        batch = round_batch(batch)
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
    axes: bool = False,
) -> Composition:
    """One random composition (deterministic for ``rng``'s state). ``teachable`` keeps to
    chains ``solutions.py`` writes in C; ``exclude`` leaves ops out of the draw. ``axes``
    draws chains that reduce or normalise along the axis an integer constructor argument
    names, as KernelBench's level-1 reductions and softmax do (``torch.sum(x,
    dim=self.dim)``, ``torch.softmax(x, dim=self.dim)``): every chain holds one such op
    (``Op.axis``) on a 2-D or 3-D input (``BATCH, D1, D2``, 3 draws in 4), over
    any axis but the batch's (``_draw_axis``), ``keepdim`` half the time, the axis written as
    a number (``dim=1``, no constructor argument) 3 times in 10 and as an argument with the
    axis as its default (``dim: int = 1``, last, not passed) 2 in 10 (teachable chains only);
    without it no axis op is drawn (the
    draws are those of the sets made before axis ops existed)."""
    if not 1 <= max_ops <= 5:
        raise ValueError("max_ops must be 1 to 5")
    if axes and not teachable:
        raise ValueError("axes draws teachable chains only: pass teachable=True with it")
    weights = {k: w for k, w in counts.items() if 1 <= k <= max_ops and w > 0}
    if not weights:
        raise ValueError(f"no operator count in {dict(counts)} is within 1..{max_ops}")
    count = rng.choices(list(weights), list(weights.values()))[0]
    ops = {n: op for n, op in catalogue().items() if n not in exclude and (axes or not op.axis)}
    if teachable:
        ops = {n: op for n, op in ops.items() if op.teachable}
    for _ in range(50):
        drawn = _draw_chain(rng, ops, count, teachable, axes)
        if drawn is not None:
            return _build(rng, index, *drawn)
    raise CompositionError(f"no chain of {count} ops could be drawn from {sorted(ops)}")


# an axis op's (axis, keepdim, form: "argument", "literal" (the forward writes the number, no
# constructor argument) or "default" (an argument with the axis as its default, not passed));
# None for other ops
_Axis = tuple[int, bool, str] | None


def _draw_chain(
    rng: random.Random, ops: Mapping[str, Op], count: int, teachable: bool, axes: bool = False
) -> tuple[Dims, list[Op], list[_Axis]] | None:
    """(the first input's dims, the ops, each op's axis), or None where the chain got stuck.
    With ``axes`` the op at a drawn position is an axis op and no other op reduces."""
    if axes:
        start: Dims = ("BATCH", "D1", "D2") if rng.random() < 0.75 else ("BATCH", "DIM")
        at = rng.randrange(count)
    else:
        start = ("BATCH", "DIM") if teachable or rng.random() < 0.7 else ("BATCH", "C", "H", "W")
        at = -1
    dims = start
    chain: list[Op] = []
    drawn_axes: list[_Axis] = []
    reduced = False
    for position in range(count):
        choices = [
            op
            for op in ops.values()
            if len(dims) in op.ranks
            and (not chain or op.name != chain[-1].name)
            and _fits(op, dims)
            and not (teachable and reduced and op.kind in ("binary", "reduction", "normalize"))
            and (not axes or op.axis == (position == at))
            and not (axes and position != at and op.kind == "reduction")
            # a normalisation's answer is long (a pass over its line for each statistic and
            # one to write): beside one other op at most, its CUDA answers are at most 769
            # SmolLM2 tokens (863 with two), a warm start's auto budget 1,024 (1,088)
            and not (op.kind == "normalize" and count > 2)
            # an index (int64: argmax) ends the chain, after exact ops only (``Op.exact``)
            and not (
                op.reduce is not None
                and op.reduce.index
                and (position != count - 1 or not all(o.exact for o in chain))
            )
        ]
        if not choices:
            return None
        op = rng.choices(choices, [o.weight for o in choices])[0]
        chain.append(op)
        reduced |= op.kind in ("reduction", "normalize")
        axis: _Axis = None
        if op.axis:  # (keepdim: a reduction's choice; a normalisation keeps every axis)
            keepdim = op.kind == "reduction" and rng.random() < 0.5
            # as KernelBench's softmax and norms: ``dim=1`` in the forward, 3 draws in 10; as
            # its log-softmax: ``dim: int = 1``, not passed, 2 in 10
            form = rng.random()
            axis = (
                _draw_axis(rng, len(dims)),
                keepdim,
                "literal" if form < 0.3 else "default" if form < 0.5 else "argument",
            )
        drawn_axes.append(axis)
        dims = op.step_shape(dims, op.new_size or "NEW", *(axis[:2] if axis else (None, False)))
    if chain[-1].reduce is not None and chain[-1].reduce.index and count > 2:
        # two exact ops before an index may round once where torch rounds twice (a multiply
        # and an add contracted into an FMA, by NVRTC or gcc): near ties would move. Drawn
        # again, as a stuck chain is (no kept draw of the shipped sets had one)
        return None
    return start, chain, drawn_axes


def _draw_axis(rng: random.Random, rank: int) -> int:
    """The axis an axis op reduces: of a 3-D input the middle one 70% of the time (where
    KernelBench's level-1 reductions reduce), else the last; of a 2-D input the last."""
    return 1 if rank == 3 and rng.random() < 0.7 else rank - 1


def _fits(op: Op, dims: Dims) -> bool:
    """Layers read a dimension's size in their constructor: it must be a plain size name."""
    if not op.init:
        return True
    read = dims[1] if len(dims) == 4 else dims[-1]
    return read.isidentifier()


def _build(
    rng: random.Random, index: int, dims: Dims, chain: list[Op], axes: list[_Axis]
) -> Composition:
    inputs: list[tuple[str, Dims]] = [("x", dims)]
    steps: list[Step] = []
    used: dict[str, int] = {}
    for op, axis in zip(chain, axes, strict=True):
        params = {_unique(p.name, used): p.draw(rng) for p in op.params}
        operand = module = new = read = ""
        axis_arg = _unique("dim", used) if axis is not None and axis[2] != "literal" else ""
        axis_of, keepdim = axis[:2] if axis is not None else (None, False)
        default = axis is not None and axis[2] == "default"
        if op.kind == "binary":
            operand = "yzuvwst"[len(inputs) - 1]
            inputs.append((operand, dims))
        if op.init:
            module = _unique(op.name, used)
            read = dims[1] if len(dims) == 4 else dims[-1]
            new = _unique(op.new_size, used) if op.new_size else ""
        steps.append(
            Step(op.name, params, operand, module, new, read, axis_arg, axis_of, keepdim, default)
        )
        dims = op.step_shape(dims, new, axis_of, keepdim)
    names = _size_names(inputs, steps)
    sizes = choose_sizes(rng, "cuda", names, steps, inputs)
    cpu_sizes = choose_sizes(rng, "cpu", names, steps, inputs)
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


def _check_shapes(
    steps: Sequence[Step], inputs: Sequence[tuple[str, Dims]], sizes: Mapping[str, int]
) -> None:
    """The symbolic shapes against torch's own (``Op.output_shape`` on meta tensors)."""
    for op, step, dims, out in walk(steps, inputs):
        init = {"in": value(step.in_size, sizes)} if step.in_size else {}
        if step.new_size:
            init["new"] = sizes[step.new_size]
        shape = tuple(value(d, sizes) for d in dims)
        got = op.output_shape(shape, init, step.axis, step.keepdim)
        want = tuple(value(d, sizes) for d in out)
        if got != want:
            raise CompositionError(
                f"{op.name}: torch gives shape {got} for {shape}; the catalogue says {want}"
            )


def forward_lines(chain: Sequence[Op], steps: Sequence[Step]) -> list[str]:
    """Each op's expression in the forward, in order (its input is always ``x``)."""
    lines = []
    for op, s in zip(chain, steps, strict=True):
        names = {p.name: n for p, n in zip(op.params, s.params, strict=True)}
        if s.axis is not None:
            names["dim"] = f"self.{s.axis_arg}" if s.axis_arg else str(s.axis)
        lines.append(op.forward_line("x", s.operand, s.module, names, s.keepdim))
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
    axis_args = [(s.axis_arg, s.axis) for s in steps if s.axis_arg and not s.axis_default]
    defaults = [(s.axis_arg, s.axis) for s in steps if s.axis_arg and s.axis_default]
    signature = ", ".join(
        [
            "self",
            *(f"{a.lower()}: int" for a in init_args),
            *(f"{a}: int" for a, _ in axis_args),
            *(f"{p}: float" for p, _ in params),
            *(f"{a}: int = {v}" for a, v in defaults),  # (last: not passed)
        ]
    )
    body = ["super().__init__()"]
    for op, s in layers:
        fields = {"in": s.in_size.lower(), "new": s.new_size.lower()}
        body.append(f"self.{s.module} = {op.init.format(**fields)}")
    body += [f"self.{a} = {a}" for a, _ in axis_args]
    body += [f"self.{p} = {p}" for p, _ in params]
    body += [f"self.{a} = {a}" for a, _ in defaults]
    forward_args = ", ".join(f"{name}: torch.Tensor" for name, _ in inputs)
    lines = [f"x = {line}" for line in forward_lines(chain, steps)]
    lines[-1] = lines[-1].replace("x = ", "return ", 1)  # the last op is returned, as usual
    uses_f = any("F." in line for line in lines) or any("F." in b for b in body)
    draws = ", ".join(f"torch.randn({', '.join(dims)})" for _, dims in inputs)
    init_values = [*init_args, *(repr(v) for _, v in axis_args), *(repr(v) for _, v in params)]
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
