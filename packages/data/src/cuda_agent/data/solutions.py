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
the last; an index (argmax) a thread per output on any axis, the last too (each thread then
walks its own row: correct, not fast).

A normalisation along such an axis (``Op.normalize``: softmax, ...) is written by
``normalize_solutions.py``.

Chains they can write (``can_write``, ``catalogue.chain_teachable``): 2-D or 3-D input, every
op with a C form (``Op.c``, ``Op.reduce`` or ``Op.normalize``), at most one reduction or
normalisation, no second input after it.
A warm start teaches these; each is checked in the sandbox like any candidate before it is
kept (``filters.py``).
"""

from __future__ import annotations

from .catalogue import catalogue
from .chain_code import NAME, Chain, defines, module_source, read_chain
from .compose import Composition
from .normalize_solutions import cpu_normalization, cuda_normalization


def can_write(composition: Composition) -> bool:
    """Whether ``cpu_solution`` can write ``composition`` (``catalogue.chain_teachable``)."""
    return composition.teachable


def cpu_solution(composition: Composition) -> str:
    """The C-kernel ``ModelNew`` source for ``composition``; ValueError if ``can_write`` is
    false."""
    c = read_chain(composition)
    if c.normalize is not None:
        return cpu_normalization(c)
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
            *(["        long long at = 0;  // the first extreme's position"] if c.index else []),
            "        for (long k = 0; k < cols; ++k) {",
            "            long i = first + k * inner;",
            "            float v = x[i];",
            *(f"            {line}" for line in before),
            *(f"            {line}" for line in c.step_lines()),
            "        }",
            *(f"        {line}" for line in c.finish_lines("o")),
            "    }",
            "}",
        ]
        body = [*c.strided_lines(), f"{name}({c.launch_args('outer, cols, inner')})"]
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
    return module_source(c, "cpu_kernel", kernel, body)


def has_reduction(composition: Composition) -> bool:
    """Whether the chain reduces a row, its input's last axis (the chains ``cuda_solution``
    has two styles for)."""
    rank = len(composition.inputs[0][1])
    reductions = [(catalogue()[s.op].reduce, s.axis) for s in composition.steps]
    return any(r is not None and not r.index and axis in (None, rank - 1) for r, axis in reductions)


def cuda_solution(composition: Composition, style: str = "block") -> str:
    """The CUDA-kernel ``ModelNew`` source for ``composition`` (module docstring);
    ValueError if ``can_write`` is false. ``style`` is how a reduction is laid out: ``block``
    (a block of 256 threads per row, a shared-memory tree) or ``warp`` (a warp of 32 threads
    per row, eight rows a block, combined by warp shuffles: no shared memory and no block-wide
    barrier, for the many short rows a block per row leaves mostly idle); a chain without a
    reduction has one form, and ``warp`` is a ValueError there."""
    if style not in ("block", "warp"):
        raise ValueError(f"style must be 'block' or 'warp', not {style!r}")
    c = read_chain(composition)
    if style == "warp":
        if c.normalize is not None:
            raise ValueError(f"{composition.name}: normalises: no warp-per-row form")
        if c.index:
            raise ValueError(f"{composition.name}: an index (argmax): no warp-per-row form")
        if c.middle:
            raise ValueError(f"{composition.name}: reduces a middle axis: no warp-per-row form")
        if not has_reduction(composition):
            raise ValueError(f"{composition.name}: no reduction, so no warp-per-row form")
        return _warp_solution(c)
    if c.normalize is not None:
        return cuda_normalization(c)
    if c.middle or c.index:  # (an index: a thread per output on any axis)
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
            *defines(reduce.init),
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
    return module_source(c, "cuda_kernel", "\n".join(kernel), body)


def _middle_solution(c: Chain) -> str:
    """A reduction over a middle axis, or an index reduction over any, as a thread per output
    (``cuda_solution``)."""
    reduce, name, args = c.reduce, NAME, c.args
    assert reduce is not None
    kernel = [
        *defines(reduce.init),
        f'extern "C" __global__ void {name}({args}, long long outer, long long cols, '
        "long long inner) {",
        "    long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
        "    if (o >= outer * inner) return;",
        "    long long first = o / inner * cols * inner + o % inner;  // the output's first",
        f"    double acc = {reduce.init};",
        *(["    long long at = 0;  // the first extreme's position"] if c.index else []),
        "    for (long long k = 0; k < cols; ++k) {",
        f"        long long i = first + k * inner;  // {_reads(c)}",
        "        float v = x[i];",
        *(f"        {line}" for line in c.before),
        *(f"        {line}" for line in c.step_lines()),
        "    }",
        *(f"    {line}" for line in c.finish_lines("o")),
        "}",
    ]
    body = [
        *c.strided_lines(),
        f"args = ({c.launch_args('outer, cols, inner')})",
        f"{name}(grid=((outer * inner + 255) // 256,), block=(256,), args=args)",
    ]
    return module_source(c, "cuda_kernel", "\n".join(kernel), body)


def _reads(c: Chain) -> str:
    """What a thread-per-output kernel's reads are: neighbouring threads read neighbouring
    elements over a middle axis; over the last (an index) each thread walks its own row."""
    return "neighbouring threads: neighbouring i" if c.middle else "a row a thread"


def _warp_solution(c: Chain) -> str:
    """A reduction chain as one warp per row (``cuda_solution``'s ``warp`` style)."""
    reduce, name, args = c.reduce, NAME, c.args
    assert reduce is not None
    combine = reduce.combine.format(a="acc", b="o")
    kernel = [
        *defines(reduce.init),
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
    return module_source(c, "cuda_kernel", "\n".join(kernel), body)
