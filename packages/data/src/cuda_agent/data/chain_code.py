"""What the solution writers (``solutions.py``, ``normalize_solutions.py``) share: a chain read
as C statements (``read_chain``: the ops before its reduction or normalisation, that op, the
ops after it) and the ``ModelNew`` module around a kernel (``module_source``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .catalogue import Normalization, Reduction, catalogue
from .compose import Composition, forward_lines

NAME = "fused_kernel"  # one name for every chain (an op's own name can be libm's: tanh)


@dataclass(frozen=True)
class Chain:
    """What the writers need of a chain: the C statements of the ops before the reduction (or
    normalisation) and after it (each ending with the forward line it computes), the
    reduction or normalisation and its forward line (None and "" without one), the
    parameters' and input tensors' names, and an axis op's axis."""

    before: list[str]
    after: list[str]
    reduce: Reduction | None
    reduction_line: str
    params: list[str]
    tensors: list[str]
    axis_arg: str = ""  # an axis op's constructor argument (``dim``), its axis and keepdim
    axis: int | None = None
    keepdim: bool = False
    rank: int = 2  # the input's
    normalize: Normalization | None = None
    axis_default: bool = False  # ``axis_arg`` has the axis as its default (``Step``)

    @property
    def middle(self) -> bool:
        """Whether the chain reduces an axis before the last (``(outer, cols, inner)``)."""
        return self.axis is not None and self.axis < self.rank - 1

    def reduced_lines(self) -> list[str]:
        """``forward``'s lines before the launch of a reduction or normalisation: ``cols``
        (and for an axis op ``d``, and ``outer`` and ``inner`` if it is a middle one), then
        ``out``."""
        if self.normalize is not None:
            return [*self.reduced_lines_of_axis("normalised"), "out = torch.empty_like(x)"]
        if self.axis is None:
            lines, shape = ["cols = x.shape[-1]"], "x.shape[:-1]"
        else:
            lines = self.reduced_lines_of_axis("reduced")
            kept = " + (1,)" if self.keepdim else ""
            shape = f"x.shape[:d]{kept} + x.shape[d + 1 :]"
        dtype = "torch.int64" if self.index else "x.dtype"
        return [*lines, f"out = torch.empty({shape}, dtype={dtype}, device=x.device)"]

    def strided_lines(self) -> list[str]:
        """``reduced_lines`` with ``outer`` and ``inner`` on any axis (the last: ``inner`` 1),
        for a kernel that strides over ``(outer, cols, inner)``."""
        lines = self.reduced_lines()
        if not self.middle:  # the last axis: a row a line
            lines.insert(-1, "outer, inner = x.numel() // cols, 1")
        return lines

    def reduced_lines_of_axis(self, what: str) -> list[str]:
        """An axis op's ``d`` and ``cols`` (``outer`` and ``inner`` too for a middle axis)."""
        axis = f"self.{self.axis_arg} % x.dim()" if self.axis_arg else str(self.axis)
        lines = [f"d = {axis}  # the {what} axis"]
        if self.middle:
            lines.append(
                "outer, cols, inner = x.shape[:d].numel(), x.shape[d], x.shape[d + 1 :].numel()"
            )
        else:
            lines.append("cols = x.shape[d]")
        return lines

    def launch_args(self, sizes: str) -> str:
        """What ``forward`` passes the kernel: ``out``, the inputs, the parameters, ``sizes``
        (the kernel needs no axis argument: ``sizes`` say where the axis is)."""
        return ", ".join(["out", *self.tensors, *(f"self.{p}" for p in self.params), sizes])

    @property
    def index(self) -> bool:
        """Whether the output is an index (int64: ``argmax``, ``Reduction.index``)."""
        return self.reduce is not None and self.reduce.index

    @property
    def args(self) -> str:
        """The kernel's parameters before its sizes."""
        return ", ".join(
            ["long long* out" if self.index else "float* out"]
            + [f"const float* {t}" for t in self.tensors]
            + [f"float {p}" for p in self.params]
        )

    def finish_lines(self, at: str) -> list[str]:
        """A reduction's last lines (unindented): ``finish`` and the ops after it into
        ``out[at]``; an index reduction's position."""
        assert self.reduce is not None
        if self.index:
            return [f"out[{at}] = at;"]
        return [f"float v = (float)({self.reduce.finish});", *self.after, f"out[{at}] = v;"]

    def step_lines(self) -> list[str]:
        """A reduction's per-element lines (unindented): an index reduction's position first
        declared by the caller (``at``)."""
        assert self.reduce is not None
        step = self.reduce.step
        return [f"{step}{'' if step.endswith('}') else ';'}  // {self.reduction_line}"]


def read_chain(composition: Composition) -> Chain:
    """``composition``'s chain as C statements; ValueError where it has no C form."""
    if not composition.teachable:
        raise ValueError(f"{composition.name}: no C form for the chain {composition.ops}")
    ops = catalogue()
    before: list[str] = []
    after: list[str] = []
    target = before
    chain = [ops[step.op] for step in composition.steps]
    reduce, normalize, reduction_line, reducing = None, None, "", None
    for op, step, torch_line in zip(
        chain, composition.steps, forward_lines(chain, composition.steps), strict=True
    ):
        if op.reduce is not None or op.normalize is not None:
            reduce, normalize, reduction_line, reducing = op.reduce, op.normalize, torch_line, step
            target = after
            continue
        renamed = op.c
        for p, new in zip(op.params, step.params, strict=True):
            renamed = rename(renamed, p.name, new)
        # each C line says which line of the reference's forward it is
        target.append(f"v = {renamed.format(y=f'{step.operand}[i]')};  // {torch_line}")
    params = [p for step in composition.steps for p in step.params]
    tensors = [n for n, _ in composition.inputs]
    axis = (reducing.axis_arg, reducing.axis, reducing.keepdim) if reducing else ("", None, False)
    rank = len(composition.inputs[0][1])
    default = bool(reducing and reducing.axis_default)
    return Chain(
        before, after, reduce, reduction_line, params, tensors, *axis, rank, normalize, default
    )


def defines(*inits: str) -> list[str]:
    """A CUDA kernel's lines before its function: NVRTC has no math.h, so INFINITY (a max's or
    min's start, among ``inits``) is spelled out."""
    wanted = any("INFINITY" in init for init in inits)
    return ["#define INFINITY __int_as_float(0x7f800000)", ""] if wanted else []


def module_source(chain: Chain, launcher: str, kernel: str, body: list[str]) -> str:
    """A ``ModelNew`` module: ``kernel`` through ``launch.<launcher>``, its parameters as
    attributes, a forward that makes the inputs contiguous and runs ``body``."""
    name, params, tensors = NAME, chain.params, chain.tensors
    # Model's order: ints, then floats, then an int with a default (not passed)
    ints = [chain.axis_arg] if chain.axis_arg and not chain.axis_default else []
    defaults = [chain.axis_arg] if chain.axis_arg and chain.axis_default else []
    init = [f"        self.{p} = {p}" for p in (*ints, *params, *defaults)]
    signature = ", ".join(
        ["self", *(f"{a}: int" for a in ints), *(f"{p}: float" for p in params)]
        + [f"{a}: int = {chain.axis}" for a in defaults]
    )
    contiguous = (
        "x = x.contiguous()"
        if len(tensors) == 1
        else f"{', '.join(tensors)} = {', '.join(f'{t}.contiguous()' for t in tensors)}"
    )
    forward_args = ", ".join(f"{t}: torch.Tensor" for t in tensors)
    return "\n".join(
        [
            "import torch",
            "from torch import nn",
            "",
            f"from cuda_agent.kernel_sandbox.launch import {launcher}",
            "",
            f"{name} = {launcher}(",
            '    r"""',
            kernel,
            '""",',
            f'    "{name}",',
            ")",
            "",
            "",
            "class ModelNew(nn.Module):",
            *(
                [f"    def __init__({signature}) -> None:", "        super().__init__()", *init, ""]
                if params or ints or defaults
                else []
            ),
            f"    def forward(self, {forward_args}) -> torch.Tensor:",
            f"        {contiguous}",
            *(f"        {line}" for line in body),
            "        return out",
            "",
        ]
    )


def rename(expression: str, old: str, new: str) -> str:
    """``old`` replaced by ``new`` as a whole identifier in a C expression."""
    return re.sub(rf"\b{re.escape(old)}\b", new, expression)
