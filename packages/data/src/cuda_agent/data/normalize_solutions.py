"""Reference solutions for chains whose axis op normalises along its axis (``Op.normalize``:
softmax, log-softmax, L1 and L2 normalisation), beside ``solutions.py``'s.

A normalisation reads each line along the axis once per statistic (``Normalization.stats``:
softmax's max, then its sum of exponentials), then once more to write each element. The ops
before it are computed again on every read (the input is read, never a scratch copy), and the
ops after it on the written value.

- C (``cpu_normalization``): the input as ``(outer, cols, inner)``, an OpenMP loop over its
  ``outer * inner`` lines, each striding ``inner`` apart (1 for the last axis).
- CUDA (``cuda_normalization``): the last axis as a warp per row (eight rows a block), each
  statistic combined by butterfly shuffles (``__shfl_xor_sync``, ``Stat.combine``), which
  leave the row's value in every lane: no shared memory, no block-wide barrier, and a
  shorter answer than a block per row with a shared-memory tree a statistic (over 400 draws
  with up to two other ops: at most 794 SmolLM2 tokens against 863; with one other op, as
  ``compose`` draws them now, at most 769); a middle axis as a thread per line, as in C.
"""

from __future__ import annotations

from .chain_code import NAME, Chain, defines, module_source


def _bare(lines: list[str]) -> list[str]:
    """The ops' C lines without their comments: a statistic's pass repeats them, and the
    writing pass keeps them (its lines say which forward line each is)."""
    return [line.split("  //")[0] for line in lines]


def _out_line(c: Chain) -> str:
    assert c.normalize is not None
    return f"v = (float)({c.normalize.out});  // {c.reduction_line}"


def _strided(c: Chain, index: str, long: str, pad: str) -> list[str]:
    """The line loop's body in C or CUDA (``long``: the integer type): each stat's pass,
    then the writing pass, over ``first + k * inner``."""
    assert c.normalize is not None
    lines = [
        f"{long} first = {index} / inner * cols * inner + {index} % inner;  // the line's first"
    ]
    for stat in c.normalize.stats:
        lines += [
            f"double {stat.name} = {stat.init};",
            f"for ({long} k = 0; k < cols; ++k) {{",
            f"    {long} i = first + k * inner;",
            "    float v = x[i];",
            *(f"    {line}" for line in _bare(c.before)),
            f"    {stat.step};",
            "}",
        ]
    lines += [
        f"for ({long} k = 0; k < cols; ++k) {{",
        f"    {long} i = first + k * inner;",
        "    float v = x[i];",
        *(f"    {line}" for line in c.before),
        f"    {_out_line(c)}",
        *(f"    {line}" for line in c.after),
        "    out[i] = v;",
        "}",
    ]
    return [f"{pad}{line}" for line in lines]


def cpu_normalization(c: Chain) -> str:
    """The C-kernel ``ModelNew`` source for a normalising chain."""
    kernel = [
        "#include <math.h>",
        "",
        f"void {NAME}({c.args}, long outer, long cols, long inner) {{",
        "    #pragma omp parallel for",
        "    for (long o = 0; o < outer * inner; ++o) {",
        *_strided(c, "o", "long", "        "),
        "    }",
        "}",
    ]
    body = [*c.strided_lines(), f"{NAME}({c.launch_args('outer, cols, inner')})"]
    return module_source(c, "cpu_kernel", "\n".join(kernel), body)


def cuda_normalization(c: Chain) -> str:
    """The CUDA-kernel ``ModelNew`` source for a normalising chain (module docstring)."""
    assert c.normalize is not None
    inits = [stat.init for stat in c.normalize.stats]
    if c.middle:
        kernel = [
            *defines(*inits),
            f'extern "C" __global__ void {NAME}({c.args}, long long outer, long long cols, '
            "long long inner) {",
            "    long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
            "    if (o >= outer * inner) return;",
            *_strided(c, "o", "long long", "    "),
            "}",
        ]
        body = [
            *c.reduced_lines(),
            f"args = ({c.launch_args('outer, cols, inner')})",
            f"{NAME}(grid=((outer * inner + 255) // 256,), block=(256,), args=args)",
        ]
        return module_source(c, "cuda_kernel", "\n".join(kernel), body)
    kernel = [
        *defines(*inits),
        f'extern "C" __global__ void {NAME}({c.args}, long long rows, long long cols) {{',
        "    long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;",
        "    int lane = threadIdx.x % 32;",
        "    if (r >= rows) return;  // (a whole warp: r is the warp's)",
    ]
    for stat in c.normalize.stats:
        other = f"__shfl_xor_sync(0xffffffffu, {stat.name}, k)"
        kernel += [
            f"    double {stat.name} = {stat.init};",
            "    for (long long i = r * cols + lane; i < (r + 1) * cols; i += 32) {",
            "        float v = x[i];",
            *(f"        {line}" for line in _bare(c.before)),
            f"        {stat.step};",
            "    }",
            "    for (int k = 16; k > 0; k >>= 1) {  // the row's, in every lane",
            f"        {stat.name} = {stat.combine.format(a=stat.name, b=other)};",
            "    }",
        ]
    kernel += [
        "    for (long long i = r * cols + lane; i < (r + 1) * cols; i += 32) {",
        "        float v = x[i];",
        *(f"        {line}" for line in c.before),
        f"        {_out_line(c)}",
        *(f"        {line}" for line in c.after),
        "        out[i] = v;",
        "    }",
        "}",
    ]
    lines = c.reduced_lines()
    lines.insert(-1, "rows = x.numel() // cols")
    body = [
        *lines,
        f"args = ({c.launch_args('rows, cols')})",
        f"{NAME}(grid=((rows + 7) // 8,), block=(256,), args=args)",
    ]
    return module_source(c, "cuda_kernel", "\n".join(kernel), body)
