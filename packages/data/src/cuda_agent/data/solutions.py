"""Reference solutions for synthesized chains of elementwise ops and one row reduction.

``cpu_solution(composition)`` writes a ``ModelNew`` in the built-in solutions' form: one C
function through ``kernel_sandbox.launch.cpu_kernel``, an OpenMP loop, one statement per op of
the chain in the chain's order (so the kernel reads like the reference's forward, line by
line, each C statement followed by the forward expression it computes).
``cuda_solution(composition)`` writes the same statements as one CUDA kernel in the built-in
compact CUDA solutions' form (``launch.cuda_kernel``, NVRTC): a thread per element, or for a
reduction a block per row whose threads combine their partial accumulators in shared memory
(``Reduction.combine``), as the built-in ``row_sum`` does.

A reduction over the axis a constructor argument names (``Op.axis``: ``torch.sum(x,
dim=self.dim)``) sees its input as ``(outer, cols, inner)``, the sizes before, at and after the
axis (``forward`` computes them from ``self.dim``): in C a loop over the ``outer * inner``
outputs, each striding over its ``cols`` elements ``inner`` apart; in CUDA a thread per output
(neighbouring threads read neighbouring elements), or the row layouts above when the axis is
the last.

Chains they can write (``can_write``, ``catalogue.chain_teachable``): 2-D or 3-D input, every
op with a C form (``Op.c`` or ``Op.reduce``), at most one reduction, no second input after it.
A warm start teaches these; each is checked in the sandbox like any candidate before it is
kept (``filters.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .catalogue import Reduction, catalogue
from .compose import Composition, forward_lines

NAME = "fused_kernel"  # one name for every chain (an op's own name can be libm's: tanh)


def can_write(composition: Composition) -> bool:
    """Whether ``cpu_solution`` can write ``composition`` (``catalogue.chain_teachable``)."""
    return composition.teachable


@dataclass(frozen=True)
class _Chain:
    """What both writers need of a chain: the C statements of the ops before the reduction and
    after it (each ending with the forward line it computes), the reduction and its forward
    line (None and "" without one), the parameters' and input tensors' names."""

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

    @property
    def middle(self) -> bool:
        """Whether the chain reduces an axis before the last (``(outer, cols, inner)``)."""
        return self.axis is not None and self.axis < self.rank - 1

    def reduced_lines(self) -> list[str]:
        """``forward``'s lines before the launch of a reduction: ``cols`` (and for an axis op
        ``d``, and ``outer`` and ``inner`` if it is a middle one), then ``out``."""
        if self.axis is None:
            lines, shape = ["cols = x.shape[-1]"], "x.shape[:-1]"
        else:
            lines = [f"d = self.{self.axis_arg} % x.dim()  # the reduced axis"]
            if self.middle:
                lines.append(
                    "outer, cols, inner = x.shape[:d].numel(), x.shape[d], x.shape[d + 1 :].numel()"
                )
            else:
                lines.append("cols = x.shape[d]")
            kept = " + (1,)" if self.keepdim else ""
            shape = f"x.shape[:d]{kept} + x.shape[d + 1 :]"
        return [*lines, f"out = torch.empty({shape}, dtype=x.dtype, device=x.device)"]

    def launch_args(self, sizes: str) -> str:
        """What ``forward`` passes the kernel: ``out``, the inputs, the parameters, ``sizes``
        (the kernel needs no axis argument: ``sizes`` say where the axis is)."""
        return ", ".join(["out", *self.tensors, *(f"self.{p}" for p in self.params), sizes])

    @property
    def args(self) -> str:
        """The kernel's parameters before its sizes."""
        return ", ".join(
            ["float* out", *(f"const float* {t}" for t in self.tensors)]
            + [f"float {p}" for p in self.params]
        )


def _chain(composition: Composition) -> _Chain:
    if not can_write(composition):
        raise ValueError(f"{composition.name}: no C form for the chain {composition.ops}")
    ops = catalogue()
    before: list[str] = []
    after: list[str] = []
    target = before
    chain = [ops[step.op] for step in composition.steps]
    reduce, reduction_line, reducing = None, "", None
    for op, step, torch_line in zip(
        chain, composition.steps, forward_lines(chain, composition.steps), strict=True
    ):
        if op.reduce is not None:
            reduce, reduction_line, reducing = op.reduce, torch_line, step
            target = after
            continue
        renamed = op.c
        for p, new in zip(op.params, step.params, strict=True):
            renamed = _rename(renamed, p.name, new)
        # each C line says which line of the reference's forward it is
        target.append(f"v = {renamed.format(y=f'{step.operand}[i]')};  // {torch_line}")
    params = [p for step in composition.steps for p in step.params]
    tensors = [n for n, _ in composition.inputs]
    axis = (reducing.axis_arg, reducing.axis, reducing.keepdim) if reducing else ("", None, False)
    rank = len(composition.inputs[0][1])
    return _Chain(before, after, reduce, reduction_line, params, tensors, *axis, rank)


def cpu_solution(composition: Composition) -> str:
    """The C-kernel ``ModelNew`` source for ``composition``; ValueError if ``can_write`` is
    false."""
    c = _chain(composition)
    before, after, reduce, name, args = c.before, c.after, c.reduce, NAME, c.args
    if reduce is None:
        loop = [
            f"void {name}({args}, long n) {{",
            "    #pragma omp parallel for",
            "    for (long i = 0; i < n; ++i) {",
            "        float v = x[i];",
            *(f"        {line}" for line in before),
            "        out[i] = v;",
            "    }",
            "}",
        ]
        body = ["out = torch.empty_like(x)", f"{name}({c.launch_args('x.numel()')})"]
    elif c.axis is not None:
        loop = [
            f"void {name}({args}, long outer, long cols, long inner) {{",
            "    #pragma omp parallel for",
            "    for (long o = 0; o < outer * inner; ++o) {",
            "        long first = o / inner * cols * inner + o % inner;  // the output's first",
            f"        double acc = {reduce.init};",
            "        for (long k = 0; k < cols; ++k) {",
            "            long i = first + k * inner;",
            "            float v = x[i];",
            *(f"            {line}" for line in before),
            f"            {reduce.step};  // {c.reduction_line}",
            "        }",
            f"        float v = (float)({reduce.finish});",
            *(f"        {line}" for line in after),
            "        out[o] = v;",
            "    }",
            "}",
        ]
        lines = c.reduced_lines()
        if not c.middle:  # the last axis: one row an output
            lines.insert(-1, "outer, inner = x.numel() // cols, 1")
        body = [*lines, f"{name}({c.launch_args('outer, cols, inner')})"]
    else:
        loop = [
            f"void {name}({args}, long rows, long cols) {{",
            "    #pragma omp parallel for",
            "    for (long r = 0; r < rows; ++r) {",
            f"        double acc = {reduce.init};",
            "        for (long i = r * cols; i < (r + 1) * cols; ++i) {",
            "            float v = x[i];",
            *(f"            {line}" for line in before),
            f"            {reduce.step};  // {c.reduction_line}",
            "        }",
            f"        float v = (float)({reduce.finish});",
            *(f"        {line}" for line in after),
            "        out[r] = v;",
            "    }",
            "}",
        ]
        sizes = "x.numel() // x.shape[-1], x.shape[-1]"
        empty = "torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)"
        body = [f"out = {empty}", f"{name}({c.launch_args(sizes)})"]
    kernel = "\n".join(["#include <math.h>", "", *loop])
    return _module(c, "cpu_kernel", kernel, body)


def has_reduction(composition: Composition) -> bool:
    """Whether the chain reduces a row, its input's last axis (the chains ``cuda_solution``
    has two styles for)."""
    rank = len(composition.inputs[0][1])
    return any(
        catalogue()[step.op].reduce is not None and step.axis in (None, rank - 1)
        for step in composition.steps
    )


def cuda_solution(composition: Composition, style: str = "block") -> str:
    """The CUDA-kernel ``ModelNew`` source for ``composition`` (module docstring);
    ValueError if ``can_write`` is false. ``style`` is how a reduction is laid out: ``block``
    (a block of 256 threads per row, a shared-memory tree) or ``warp`` (a warp of 32 threads
    per row, eight rows a block, combined by warp shuffles: no shared memory and no block-wide
    barrier, for the many short rows a block per row leaves mostly idle); a chain without a
    reduction has one form, and ``warp`` is a ValueError there."""
    if style not in ("block", "warp"):
        raise ValueError(f"style must be 'block' or 'warp', not {style!r}")
    if style == "warp":
        if _chain(composition).middle:
            raise ValueError(f"{composition.name}: reduces a middle axis: no warp-per-row form")
        if not has_reduction(composition):
            raise ValueError(f"{composition.name}: no reduction, so no warp-per-row form")
        return _warp_solution(_chain(composition))
    c = _chain(composition)
    if c.middle:
        return _middle_solution(c)
    before, after, reduce, name, args = c.before, c.after, c.reduce, NAME, c.args
    if reduce is None:
        kernel = [
            f'extern "C" __global__ void {name}({args}, long long n) {{',
            "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
            "    if (i >= n) return;",
            "    float v = x[i];",
            *(f"    {line}" for line in before),
            "    out[i] = v;",
            "}",
        ]
        body = [
            "out = torch.empty_like(x)",
            "n = x.numel()",
            f"args = ({c.launch_args('n')})",
            f"{name}(grid=((n + 255) // 256,), block=(256,), args=args)",
        ]
    else:
        combine = reduce.combine.format(a="part[threadIdx.x]", b="o")
        kernel = [
            *_defines(reduce),
            f'extern "C" __global__ void {name}({args}, long long cols) {{',
            "    __shared__ double part[256];",
            "    long long r = blockIdx.x;",
            f"    double acc = {reduce.init};",
            "    for (long long i = r * cols + threadIdx.x; i < (r + 1) * cols; i += blockDim.x) {",
            "        float v = x[i];",
            *(f"        {line}" for line in before),
            f"        {reduce.step};  // {c.reduction_line}",
            "    }",
            "    part[threadIdx.x] = acc;",
            "    __syncthreads();",
            "    for (int k = blockDim.x / 2; k > 0; k >>= 1) {",
            "        if (threadIdx.x < k) {",
            "            double o = part[threadIdx.x + k];",
            f"            part[threadIdx.x] = {combine};",
            "        }",
            "        __syncthreads();",
            "    }",
            "    if (threadIdx.x != 0) return;",
            "    acc = part[0];",
            f"    float v = (float)({reduce.finish});",
            *(f"    {line}" for line in after),
            "    out[r] = v;",
            "}",
        ]
        body = [
            *c.reduced_lines(),
            f"args = ({c.launch_args('cols')})",
            f"{name}(grid=(x.numel() // cols,), block=(256,), args=args)",
        ]
    return _module(c, "cuda_kernel", "\n".join(kernel), body)


def _middle_solution(c: _Chain) -> str:
    """A reduction over a middle axis as a thread per output (``cuda_solution``)."""
    reduce, name, args = c.reduce, NAME, c.args
    assert reduce is not None
    kernel = [
        *_defines(reduce),
        f'extern "C" __global__ void {name}({args}, long long outer, long long cols, '
        "long long inner) {",
        "    long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
        "    if (o >= outer * inner) return;",
        "    long long first = o / inner * cols * inner + o % inner;  // the output's first",
        f"    double acc = {reduce.init};",
        "    for (long long k = 0; k < cols; ++k) {",
        "        long long i = first + k * inner;  // neighbouring threads: neighbouring i",
        "        float v = x[i];",
        *(f"        {line}" for line in c.before),
        f"        {reduce.step};  // {c.reduction_line}",
        "    }",
        f"    float v = (float)({reduce.finish});",
        *(f"    {line}" for line in c.after),
        "    out[o] = v;",
        "}",
    ]
    body = [
        *c.reduced_lines(),
        f"args = ({c.launch_args('outer, cols, inner')})",
        f"{name}(grid=((outer * inner + 255) // 256,), block=(256,), args=args)",
    ]
    return _module(c, "cuda_kernel", "\n".join(kernel), body)


def _warp_solution(c: _Chain) -> str:
    """A reduction chain as one warp per row (``cuda_solution``'s ``warp`` style)."""
    reduce, name, args = c.reduce, NAME, c.args
    assert reduce is not None
    combine = reduce.combine.format(a="acc", b="o")
    kernel = [
        *_defines(reduce),
        f'extern "C" __global__ void {name}({args}, long long rows, long long cols) {{',
        "    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;",
        "    int lane = threadIdx.x % 32;",
        "    if (r >= rows) return;  // (a whole warp: r is the warp's)",
        f"    double acc = {reduce.init};",
        "    for (long long i = r * cols + lane; i < (r + 1) * cols; i += 32) {",
        "        float v = x[i];",
        *(f"        {line}" for line in c.before),
        f"        {reduce.step};  // {c.reduction_line}",
        "    }",
        "    for (int k = 16; k > 0; k >>= 1) {",
        "        double o = __shfl_down_sync(0xffffffffu, acc, k);",
        f"        acc = {combine};",
        "    }",
        "    if (lane != 0) return;",
        f"    float v = (float)({reduce.finish});",
        *(f"    {line}" for line in c.after),
        "    out[r] = v;",
        "}",
    ]
    lines = c.reduced_lines()
    lines.insert(-1, "rows = x.numel() // cols")  # (before ``out``)
    body = [
        *lines,
        f"args = ({c.launch_args('rows, cols')})",
        f"{name}(grid=((rows + 7) // 8,), block=(256,), args=args)",
    ]
    return _module(c, "cuda_kernel", "\n".join(kernel), body)


def _defines(reduce: Reduction) -> list[str]:
    """A CUDA kernel's lines before its function: NVRTC has no math.h, so INFINITY (a max's or
    min's start) is spelled out."""
    return ["#define INFINITY __int_as_float(0x7f800000)", ""] if "INFINITY" in reduce.init else []


def _module(chain: _Chain, launcher: str, kernel: str, body: list[str]) -> str:
    """A ``ModelNew`` module: ``kernel`` through ``launch.<launcher>``, its parameters as
    attributes, a forward that makes the inputs contiguous and runs ``body``."""
    name, params, tensors = NAME, chain.params, chain.tensors
    ints = [chain.axis_arg] if chain.axis_arg else []  # (Model's order: ints, then floats)
    init = [f"        self.{p} = {p}" for p in (*ints, *params)]
    signature = ", ".join(["self", *(f"{a}: int" for a in ints), *(f"{p}: float" for p in params)])
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
                if params or ints
                else []
            ),
            f"    def forward(self, {forward_args}) -> torch.Tensor:",
            f"        {contiguous}",
            *(f"        {line}" for line in body),
            "        return out",
            "",
        ]
    )


def _rename(expression: str, old: str, new: str) -> str:
    """``old`` replaced by ``new`` as a whole identifier in a C expression."""
    return re.sub(rf"\b{re.escape(old)}\b", new, expression)
