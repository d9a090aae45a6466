"""The operator catalogue that synthesized tasks compose: PyTorch operators, described by torch.

Each ``Op`` names a real torch callable (``target``, resolved when the catalogue is built: an op
whose callable this torch lacks is left out), the forward line it writes (``call``), the input
ranks it accepts, its scalar parameters and, for layers, its constructor. The shapes it returns
are not written down: ``Op.output_shape`` runs the op's own forward line on ``meta`` tensors, so
torch itself propagates the shape. ``c`` is the same operator as a C expression over ``v`` (the
element), which lets ``solutions.py`` write a CPU reference solution for compositions of such
operators. An ``axis`` op reduces the axis an integer constructor argument names
(``torch.sum(x, dim=self.dim)``, KernelBench's level-1 form); ``compose(axes=True)`` alone
draws them.

All ops take and return float32 tensors (``DTYPES``).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

Kind = Literal["unary", "binary", "reduction", "normalize", "row", "layer"]
DTYPES = ("float32",)
Dims = tuple[str, ...]  # a symbolic shape: each dimension an expression over module-level sizes


@dataclass(frozen=True)
class Param:
    """A scalar parameter of an op, drawn uniformly in [low, high] and rounded to 2 decimals;
    it reaches the model through ``get_init_inputs`` and is kept as ``self.<name>``."""

    name: str
    low: float
    high: float

    def draw(self, rng: random.Random) -> float:
        return round(rng.uniform(self.low, self.high), 2)


@dataclass(frozen=True)
class Reduction:
    """A reduction in C (over the last dimension, or an axis op's): ``acc`` starts at
    ``init``, takes ``step`` per element (over ``acc`` and ``v``) and ends as ``finish`` (over
    ``acc`` and ``cols``, the reduced length).
    ``combine`` joins two partial accumulators ``{a}`` and ``{b}`` (a CUDA block's threads)."""

    init: str
    step: str
    finish: str
    combine: str = "{a} + {b}"
    # the output is the extreme's position along the axis (int64, ``at``, over ``k``), the
    # first of equal ones as torch's: ``argmax``, ``argmin``; the chain's last op
    index: bool = False


@dataclass(frozen=True)
class Stat:
    """One pass of a normalisation over its axis in C: ``name`` (a double) starts at ``init``
    and takes ``step`` per element (over ``v`` and the earlier passes' stats); ``combine``
    joins two partial values ``{a}`` and ``{b}`` (a CUDA block's threads)."""

    name: str
    init: str
    step: str
    combine: str = "{a} + {b}"


@dataclass(frozen=True)
class Normalization:
    """An op that keeps its input's shape and rescales each element by statistics of its line
    along the axis (softmax: the line's max, then its sum of exponentials): the ``stats``
    passes in order, then each element written as ``out`` (over ``v``, the stats and
    ``cols``, the line's length)."""

    stats: tuple[Stat, ...]
    out: str


@dataclass(frozen=True)
class Op:
    """One operator. ``call`` is the forward expression: ``{x}`` the running tensor, ``{y}`` a
    second input of the same shape (binary ops), ``{m}`` the op's submodule (layers), ``{name}``
    a parameter (written ``self.name``). ``init`` builds a layer from ``{in}`` (the size of the
    dimension it reads) and ``{new}`` (a new size it introduces). ``shape`` maps a symbolic
    input shape to the symbolic output shape (``new`` is the new size's name); ``output_shape``
    checks it against torch. ``weight`` is the relative chance to be drawn; ``cost`` the bytes
    moved per input element (the time model of ``sizing.estimate_ms``)."""

    name: str
    target: str
    kind: Kind
    call: str
    ranks: tuple[int, ...] = (1, 2, 3, 4)
    params: tuple[Param, ...] = ()
    init: str = ""
    new_size: str = ""
    c: str = ""
    reduce: Reduction | None = None
    normalize: Normalization | None = None
    weight: float = 1.0
    cost: float = 8.0
    shape: Callable[[Dims, str], Dims] = field(default=lambda dims, new: dims, repr=False)
    axis: bool = False  # reduces the axis an integer constructor argument names (``{dim}``)
    # its C form rounds as torch's does (one IEEE operation, a min, a max or a sign): the
    # same bits on both sides, so an index reduction after it (argmax) picks the same
    # element; after exp or tanh the last bit differs and near ties pick others
    exact: bool = False
    # the operator's name in a family (``Composition.family``): an axis op is the operator it
    # names over another axis (``sum_dim`` is ``sum``), so a training chain relu -> sum_dim
    # and a held-out relu -> sum are one family (over the last axis they are the same task)
    family: str = ""

    @property
    def family_name(self) -> str:
        return self.family or self.name

    @property
    def teachable(self) -> bool:
        """Whether ``solutions.py`` can write it in C (an elementwise expression or a
        reduction, over the last dimension or an axis op's, or an axis op's normalisation)."""
        return bool(self.c) or self.reduce is not None or self.normalize is not None

    def forward_line(
        self, x: str, y: str, module: str, names: Mapping[str, str], keepdim: bool = False
    ) -> str:
        """The op's expression in a forward, its parameters renamed by ``names``; an axis op's
        axis is ``names["dim"]`` as written (``self.dim``, or a number); ``keepdim`` an axis
        op's ``keepdim=True``."""
        fields = {p.name: f"self.{names.get(p.name, p.name)}" for p in self.params}
        if self.axis:
            fields["dim"] = names.get("dim", "self.dim")
            fields["keepdim"] = ", keepdim=True" if keepdim else ""
        return self.call.format(x=x, y=y, m=f"self.{module}", **fields)

    def step_shape(self, dims: Dims, new: str, axis: int | None, keepdim: bool) -> Dims:
        """The symbolic output shape: ``shape``, or for an axis op ``dims`` without its
        ``axis``-th dimension (``1`` in its place with ``keepdim``)."""
        if not self.axis:
            return self.shape(dims, new)
        if axis is None or not 0 <= axis < len(dims):
            raise ValueError(f"{self.name}: axis {axis} of a {len(dims)}-dimensional input")
        if self.kind == "normalize":
            return dims
        return (*dims[:axis], *(("1",) if keepdim else ()), *dims[axis + 1 :])

    def output_shape(
        self,
        shape: tuple[int, ...],
        init_sizes: Mapping[str, int] | None = None,
        axis: int | None = None,
        keepdim: bool = False,
    ) -> tuple[int, ...]:
        """The shape torch gives for an input of ``shape``: the forward line run on ``meta``
        tensors (no data, no compute); a layer is built on ``meta`` too, an axis op given
        ``axis`` and ``keepdim``. Raises what torch raises for a shape the op does not
        accept."""
        x = torch.empty(shape, device="meta")
        owner = SimpleNamespace(**{p.name: (p.low + p.high) / 2 for p in self.params})
        owner.dim = axis
        if self.init:
            sizes = {"in": shape[1] if len(shape) == 4 else shape[-1], "new": 8}
            sizes.update(init_sizes or {})
            with torch.device("meta"):
                owner.layer = eval(self.init.format(**sizes), _NAMESPACE)
        line = self.forward_line("x", "y", "layer", {}, keepdim)
        out = eval(
            line, _NAMESPACE, {"x": x, "y": torch.empty(shape, device="meta"), "self": owner}
        )
        return tuple(out.shape)


_NAMESPACE = {"torch": torch, "F": F, "nn": nn}


def _drop_last(dims: Dims, new: str) -> Dims:
    return dims[:-1]


def _replace_last(dims: Dims, new: str) -> Dims:
    return (*dims[:-1], new)


def _replace_channels(dims: Dims, new: str) -> Dims:
    return (dims[0], new, *dims[2:])


def _halve_spatial(dims: Dims, new: str) -> Dims:
    return (*dims[:2], *(f"{d} // 2" if d.isidentifier() else f"({d}) // 2" for d in dims[2:]))


def _flatten(dims: Dims, new: str) -> Dims:
    return (dims[0], " * ".join(d if d.isidentifier() else f"({d})" for d in dims[1:]))


def _unary(
    name: str,
    target: str,
    call: str,
    c: str,
    *params: Param,
    weight: float = 1.0,
    exact: bool = False,
) -> Op:
    return Op(name, target, "unary", call, params=params, c=c, weight=weight, exact=exact)


def _binary(name: str, target: str, call: str, c: str) -> Op:
    """Every binary op is one IEEE operation or a min or max (``Op.exact``)."""
    return Op(name, target, "binary", call, c=c, weight=1.5, cost=12.0, exact=True)


def _reduction(name: str, target: str, call: str, reduce: Reduction | None) -> Op:
    return Op(name, target, "reduction", call, (2, 3, 4), reduce=reduce, cost=4.0, shape=_drop_last)


# each axis op's operator among the other ops (``Op.family``)
_AXIS_FAMILY = {
    "sum_dim": "sum", "mean_dim": "mean", "max_dim": "amax", "min_dim": "amin",
    "norm_dim": "vector_norm", "argmax_dim": "argmax", "argmin_dim": "argmin",
    "softmax_dim": "softmax", "log_softmax_dim": "log_softmax",
    "l2_normalize_dim": "normalize", "l1_normalize_dim": "l1_normalize",
}  # fmt: skip


def _axis_reduction(name: str, target: str, call: str, reduce: Reduction) -> Op:
    """A reduction over the axis ``self.dim`` (an integer constructor argument), as
    KernelBench's level-1 reductions: ``torch.sum(x, dim=self.dim, keepdim=True)``. Drawn only
    by ``compose(axes=True)``; an index one (argmax) three times as often where it may be
    drawn (last, after exact ops), or it would be one task in thirty."""
    weight = 3.0 if reduce.index else 1.0
    return Op(name, target, "reduction", call, (2, 3), reduce=reduce, cost=4.0, axis=True,
              weight=weight, family=_AXIS_FAMILY[name])  # fmt: skip


def _axis_normalization(name: str, target: str, call: str, normalize: Normalization) -> Op:
    """A normalisation along the axis ``self.dim``, as KernelBench's level-1 softmax and norms
    (``torch.softmax(x, dim=self.dim)``, ``x / torch.norm(x, p=2, dim=self.dim,
    keepdim=True)``). Drawn only by ``compose(axes=True)``."""
    return Op(name, target, "normalize", call, (2, 3), normalize=normalize, cost=12.0, axis=True,
              family=_AXIS_FAMILY[name])  # fmt: skip


_MAX = Stat("m", "-INFINITY", "m = fmax(m, (double)v)", "fmax({a}, {b})")
_SUM_EXP = Stat("s", "0.0", "s += exp((double)v - m)")


_SOFTPLUS = "(v > 20.f ? v : log1pf(expf(v)))"

# The ops, by kind. Unary and binary ops carry their C expression; reductions their C loop.
_OPS: tuple[Op, ...] = (
    _unary("relu", "torch.relu", "torch.relu({x})", "v > 0.f ? v : 0.f", weight=2.0, exact=True),
    _unary("relu6", "torch.nn.functional.relu6", "F.relu6({x})", "fminf(fmaxf(v, 0.f), 6.f)", exact=True),
    _unary(
        "leaky_relu",
        "torch.nn.functional.leaky_relu",
        "F.leaky_relu({x}, {negative_slope})",
        "v > 0.f ? v : negative_slope * v",
        Param("negative_slope", 0.01, 0.3),
    ),
    _unary(
        "elu",
        "torch.nn.functional.elu",
        "F.elu({x}, alpha={alpha})",
        "v > 0.f ? v : alpha * (expf(v) - 1.f)",
        Param("alpha", 0.5, 1.5),
    ),
    _unary(
        "selu",
        "torch.selu",
        "torch.selu({x})",
        "1.0507009873554805f * (v > 0.f ? v : 1.6732632423543772f * (expf(v) - 1.f))",
    ),
    _unary(
        "gelu", "torch.nn.functional.gelu", "F.gelu({x})", "0.5f * v * (1.f + erff(v * 0.70710678f))"
    ),
    _unary(
        "gelu_tanh",
        "torch.nn.functional.gelu",
        'F.gelu({x}, approximate="tanh")',
        "0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))",
    ),
    _unary("silu", "torch.nn.functional.silu", "F.silu({x})", "v / (1.f + expf(-v))"),
    _unary("sigmoid", "torch.sigmoid", "torch.sigmoid({x})", "1.f / (1.f + expf(-v))"),
    _unary("tanh", "torch.tanh", "torch.tanh({x})", "tanhf(v)"),
    _unary("softplus", "torch.nn.functional.softplus", "F.softplus({x})", _SOFTPLUS),
    _unary("mish", "torch.nn.functional.mish", "F.mish({x})", f"v * tanhf{_SOFTPLUS}"),
    _unary(
        "hardswish",
        "torch.nn.functional.hardswish",
        "F.hardswish({x})",
        "v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f",
    ),
    _unary(
        "hardsigmoid",
        "torch.nn.functional.hardsigmoid",
        "F.hardsigmoid({x})",
        "fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f",
    ),
    _unary(
        "hardtanh",
        "torch.nn.functional.hardtanh",
        "F.hardtanh({x}, -{limit}, {limit})",
        "fminf(fmaxf(v, -limit), limit)",
        Param("limit", 0.5, 2.0),
        exact=True,
    ),
    _unary("softsign", "torch.nn.functional.softsign", "F.softsign({x})", "v / (1.f + fabsf(v))"),
    _unary(
        "logsigmoid",
        "torch.nn.functional.logsigmoid",
        "F.logsigmoid({x})",
        "fminf(v, 0.f) - log1pf(expf(-fabsf(v)))",
    ),
    _unary("abs", "torch.abs", "torch.abs({x})", "fabsf(v)", exact=True),
    _unary("square", "torch.square", "torch.square({x})", "v * v", exact=True),
    _unary("exp", "torch.exp", "torch.exp({x})", "expf(v)", weight=0.5),
    _unary("sin", "torch.sin", "torch.sin({x})", "sinf(v)", weight=0.5),
    # NaN for negative inputs: kept in the catalogue, removed by the finite-output filter
    _unary("log", "torch.log", "torch.log({x})", "logf(v)", weight=0.5),
    _unary("sqrt", "torch.sqrt", "torch.sqrt({x})", "sqrtf(v)", weight=0.5),
    _unary(
        "clamp",
        "torch.clamp",
        "torch.clamp({x}, min=-{bound}, max={bound})",
        "fminf(fmaxf(v, -bound), bound)",
        Param("bound", 0.5, 2.0),
        exact=True,
    ),
    _unary("scale", "torch.mul", "{x} * {scale}", "v * scale", Param("scale", 0.25, 4.0), exact=True),
    _unary("shift", "torch.add", "{x} + {shift}", "v + shift", Param("shift", -1.0, 1.0), exact=True),
    _binary("add", "torch.add", "{x} + {y}", "v + {y}"),
    _binary("sub", "torch.sub", "{x} - {y}", "v - {y}"),
    _binary("mul", "torch.mul", "{x} * {y}", "v * {y}"),
    _binary("maximum", "torch.maximum", "torch.maximum({x}, {y})", "fmaxf(v, {y})"),
    _binary("minimum", "torch.minimum", "torch.minimum({x}, {y})", "fminf(v, {y})"),
    _reduction("sum", "torch.sum", "torch.sum({x}, dim=-1)", Reduction("0.0", "acc += v", "acc")),
    _reduction(
        "mean", "torch.mean", "torch.mean({x}, dim=-1)", Reduction("0.0", "acc += v", "acc / cols")
    ),
    _reduction(
        "amax", "torch.amax", "torch.amax({x}, dim=-1)", Reduction("-INFINITY", "acc = fmax(acc, (double)v)", "acc", "fmax({a}, {b})")
    ),
    _reduction(
        "amin", "torch.amin", "torch.amin({x}, dim=-1)", Reduction("INFINITY", "acc = fmin(acc, (double)v)", "acc", "fmin({a}, {b})")
    ),
    _reduction(
        "vector_norm",
        "torch.linalg.vector_norm",
        "torch.linalg.vector_norm({x}, dim=-1)",
        Reduction("0.0", "acc += (double)v * v", "sqrt(acc)"),
    ),
    _reduction("logsumexp", "torch.logsumexp", "torch.logsumexp({x}, dim=-1)", None),
    # The same reductions over the axis a constructor argument names (KernelBench's forms)
    _axis_reduction("sum_dim", "torch.sum", "torch.sum({x}, dim={dim}{keepdim})", Reduction("0.0", "acc += v", "acc")),
    _axis_reduction("mean_dim", "torch.mean", "torch.mean({x}, dim={dim}{keepdim})", Reduction("0.0", "acc += v", "acc / cols")),
    _axis_reduction(
        "max_dim", "torch.max", "torch.max({x}, dim={dim}{keepdim})[0]", Reduction("-INFINITY", "acc = fmax(acc, (double)v)", "acc", "fmax({a}, {b})")
    ),
    _axis_reduction(
        "min_dim", "torch.min", "torch.min({x}, dim={dim}{keepdim})[0]", Reduction("INFINITY", "acc = fmin(acc, (double)v)", "acc", "fmin({a}, {b})")
    ),
    _axis_reduction(
        "argmax_dim", "torch.argmax", "torch.argmax({x}, dim={dim}{keepdim})", Reduction("-INFINITY", "if ((double)v > acc) { acc = v; at = k; }", "at", index=True)
    ),
    _axis_reduction(
        "argmin_dim", "torch.argmin", "torch.argmin({x}, dim={dim}{keepdim})", Reduction("INFINITY", "if ((double)v < acc) { acc = v; at = k; }", "at", index=True)
    ),
    _axis_reduction(
        "norm_dim",
        "torch.linalg.vector_norm",
        "torch.linalg.vector_norm({x}, dim={dim}{keepdim})",
        Reduction("0.0", "acc += (double)v * v", "sqrt(acc)"),
    ),
    _axis_normalization("softmax_dim", "torch.softmax", "torch.softmax({x}, dim={dim})", Normalization((_MAX, _SUM_EXP), "exp((double)v - m) / s")),
    _axis_normalization(
        "log_softmax_dim", "torch.log_softmax", "torch.log_softmax({x}, dim={dim})", Normalization((_MAX, _SUM_EXP), "(double)v - m - log(s)")
    ),
    # A sum's statistic divides in float: torch's float32 sum is a float accumulator, inf once
    # past FLT_MAX (exp of heavy-tailed inputs), where a double one would stay finite
    _axis_normalization(
        "l2_normalize_dim", "torch.norm", "{x} / torch.norm({x}, p=2, dim={dim}, keepdim=True)", Normalization((Stat("s", "0.0", "s += (double)v * v"),), "v / sqrtf((float)s)")
    ),
    _axis_normalization(
        "l1_normalize_dim", "torch.mean", "{x} / torch.mean(torch.abs({x}), dim={dim}, keepdim=True)", Normalization((Stat("s", "0.0", "s += fabs((double)v)"),), "v / ((float)s / cols)")
    ),
    Op("softmax", "torch.softmax", "row", "torch.softmax({x}, dim=-1)", (2, 3, 4), cost=12.0),
    Op("log_softmax", "torch.log_softmax", "row", "torch.log_softmax({x}, dim=-1)", (2, 3, 4), cost=12.0),
    Op("normalize", "torch.nn.functional.normalize", "row", "F.normalize({x}, dim=-1)", (2, 3, 4), cost=12.0),
    Op("cumsum", "torch.cumsum", "row", "torch.cumsum({x}, dim=-1)", (2, 3, 4), weight=0.5),
    # Dropout as a model holds it: the sandbox runs references in eval mode, where it is inert.
    # With training=True it draws random numbers: the determinism filter removes those tasks.
    Op(
        "dropout",
        "torch.nn.functional.dropout",
        "row",
        "F.dropout({x}, p=0.1, training=True)",
        weight=0.3,
    ),
    Op(
        "linear",
        "torch.nn.Linear",
        "layer",
        "{m}({x})",
        (2,),
        init="nn.Linear({in}, {new})",
        new_size="HIDDEN",
        weight=2.0,
        shape=_replace_last,
    ),
    Op("layer_norm", "torch.nn.LayerNorm", "layer", "{m}({x})", (2,), init="nn.LayerNorm({in})", cost=12.0),
    Op("rms_norm", "torch.nn.RMSNorm", "layer", "{m}({x})", (2,), init="nn.RMSNorm({in})", cost=12.0),
    Op(
        "conv2d",
        "torch.nn.Conv2d",
        "layer",
        "{m}({x})",
        (4,),
        init="nn.Conv2d({in}, {new}, kernel_size=3, padding=1)",
        new_size="C_OUT",
        weight=2.0,
        shape=_replace_channels,
    ),
    Op("batch_norm2d", "torch.nn.BatchNorm2d", "layer", "{m}({x})", (4,), init="nn.BatchNorm2d({in})", cost=12.0),
    Op("max_pool2d", "torch.nn.functional.max_pool2d", "row", "F.max_pool2d({x}, 2)", (4,), cost=5.0, shape=_halve_spatial),
    Op("avg_pool2d", "torch.nn.functional.avg_pool2d", "row", "F.avg_pool2d({x}, 2)", (4,), cost=5.0, shape=_halve_spatial),
    Op("flatten", "torch.flatten", "row", "torch.flatten({x}, 1)", (4,), cost=0.0, weight=0.7, shape=_flatten),
)  # fmt: skip


def _resolves(target: str) -> bool:
    obj: object = torch
    for part in target.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return callable(obj)


@functools.cache
def catalogue() -> dict[str, Op]:
    """The ops whose torch callable this torch has, by name."""
    return {op.name: op for op in _OPS if _resolves(op.target)}


def chain_teachable(first_input: Dims, ops: Sequence[str]) -> bool:
    """Whether ``solutions.py`` can write a chain of ``ops`` (names, in order) on a first input
    of shape ``first_input`` in C: the input 2-D or 3-D, every op ``teachable``, at most one
    reduction or normalisation, no second input after it and nothing after an index
    (``argmax``). ``Composition.teachable`` asks it; ``compose`` draws only such
    chains with ``teachable=True``."""
    known = catalogue()
    reduced = indexed = False
    if len(first_input) not in (2, 3):
        return False
    for name in ops:
        op = known[name]
        if not op.teachable or (reduced and op.kind in ("binary", "reduction", "normalize")):
            return False
        if indexed:  # nothing after an index (int64) output
            return False
        reduced |= op.kind in ("reduction", "normalize")
        indexed = op.reduce is not None and op.reduce.index
    return True


def describe(op: Op) -> dict[str, object]:
    """What an op accepts and returns, as data: for each accepted rank, an example input shape
    and the output shape torch gives it (``Op.output_shape``)."""
    examples = {1: (64,), 2: (8, 64), 3: (2, 8, 64), 4: (2, 8, 16, 16)}
    return {
        "name": op.name,
        "target": op.target,
        "kind": op.kind,
        "dtypes": list(DTYPES),
        "params": [p.name for p in op.params],
        "teachable": op.teachable,
        "shapes": {
            str(rank): [
                list(examples[rank]),
                list(op.output_shape(examples[rank], axis=1 if op.axis else None)),
            ]
            for rank in op.ranks
        },
    }
