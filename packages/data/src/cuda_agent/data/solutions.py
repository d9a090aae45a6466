"""Reference solutions for synthesized chains of elementwise ops and one row reduction.

``cpu_solution(composition)`` writes a ``ModelNew`` in the built-in solutions' form: one C
function through ``kernel_sandbox.launch.cpu_kernel``, an OpenMP loop, one statement per op of
the chain in the chain's order (so the kernel reads like the reference's forward, line by
line, each C statement followed by the forward expression it computes).
``cuda_solution(composition)`` writes the same statements as one CUDA kernel in the built-in
compact CUDA solutions' form (``launch.cuda_kernel``, NVRTC): a thread per element, or for a
reduction a block per row whose threads combine their partial accumulators in shared memory
(``Reduction.combine``), as the built-in ``row_sum`` does.

Chains they can write (``can_write``, ``catalogue.chain_teachable``): 2-D input, every op with
a C form (``Op.c`` or ``Op.reduce``), at most one reduction, no second input after it. A warm
start teaches these; each is checked in the sandbox like any candidate before it is kept
(``filters.py``).
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

    def launch_args(self, sizes: str) -> str:
        """What ``forward`` passes the kernel: ``out``, the inputs, the parameters, ``sizes``."""
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
    reduce, reduction_line = None, ""
    for op, step, torch_line in zip(
        chain, composition.steps, forward_lines(chain, composition.steps), strict=True
    ):
        if op.reduce is not None:
            reduce, reduction_line = op.reduce, torch_line
            target = after
            continue
        renamed = op.c
        for p, new in zip(op.params, step.params, strict=True):
            renamed = _rename(renamed, p.name, new)
        # each C line says which line of the reference's forward it is
        target.append(f"v = {renamed.format(y=f'{step.operand}[i]')};  // {torch_line}")
    params = [p for step in composition.steps for p in step.params]
    tensors = [n for n, _ in composition.inputs]
    return _Chain(before, after, reduce, reduction_line, params, tensors)


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
        sizes = "x.numel()"
        empty = "torch.empty_like(x)"
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
    kernel = "\n".join(["#include <math.h>", "", *loop])
    return _module(c, "cpu_kernel", kernel, [f"out = {empty}", f"{name}({c.launch_args(sizes)})"])


def has_reduction(composition: Composition) -> bool:
    """Whether the chain reduces a row (the chains ``cuda_solution`` has two styles for)."""
    return any(catalogue()[step.op].reduce is not None for step in composition.steps)


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
        if not has_reduction(composition):
            raise ValueError(f"{composition.name}: no reduction, so no warp-per-row form")
        return _warp_solution(_chain(composition))
    c = _chain(composition)
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
            "cols = x.shape[-1]",
            "out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)",
            f"args = ({c.launch_args('cols')})",
            f"{name}(grid=(x.numel() // cols,), block=(256,), args=args)",
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
    body = [
        "cols = x.shape[-1]",
        "rows = x.numel() // cols",
        "out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)",
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
    init = [f"        self.{p} = {p}" for p in params]
    signature = ", ".join(["self", *(f"{p}: float" for p in params)])
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
                if params
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
