"""CPU reference solutions for synthesized chains of elementwise ops and one row reduction.

``cpu_solution(composition)`` writes a ``ModelNew`` in the built-in solutions' form: one C
function through ``kernel_sandbox.launch.cpu_kernel``, an OpenMP loop, one statement per op of
the chain in the chain's order (so the kernel reads like the reference's forward, line by
line, each C statement followed by the forward expression it computes). Chains it can write (``can_write``): 2-D input, every op with a C form (``Op.c`` or
``Op.reduce``), at most one reduction, no second input after it. A warm start teaches these;
each is checked in the sandbox like any candidate before it is kept (``filters.py``).
"""

from __future__ import annotations

import re

from .catalogue import catalogue
from .compose import Composition, forward_lines


def can_write(composition: Composition) -> bool:
    """Whether ``cpu_solution`` can write ``composition``."""
    ops = catalogue()
    reduced = False
    if len(composition.inputs[0][1]) != 2:
        return False
    for step in composition.steps:
        op = ops[step.op]
        if not op.teachable or (reduced and op.kind in ("binary", "reduction")):
            return False
        reduced |= op.kind == "reduction"
    return True


def cpu_solution(composition: Composition) -> str:
    """The C-kernel ``ModelNew`` source for ``composition``; ValueError if ``can_write`` is
    false."""
    if not can_write(composition):
        raise ValueError(f"{composition.name}: no C form for the chain {composition.ops}")
    ops = catalogue()
    name = "fused_kernel"  # one name for every chain (an op's own name can be libm's: tanh)
    params = [p for step in composition.steps for p in step.params]
    tensors = [n for n, _ in composition.inputs]
    reduction = next((s for s in composition.steps if ops[s.op].kind == "reduction"), None)
    before: list[str] = []
    after: list[str] = []
    target = before
    chain = [ops[step.op] for step in composition.steps]
    for op, step, torch_line in zip(
        chain, composition.steps, forward_lines(chain, composition.steps), strict=True
    ):
        if op.reduce is not None:
            target = after
            continue
        renamed = op.c
        for p, new in zip(op.params, step.params, strict=True):
            renamed = _rename(renamed, p.name, new)
        # each C line says which line of the reference's forward it is
        target.append(f"v = {renamed.format(y=f'{step.operand}[i]')};  // {torch_line}")
    args = ", ".join(
        ["float* out", *(f"const float* {t}" for t in tensors), *(f"float {p}" for p in params)]
    )
    if reduction is None:
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
        reduce = ops[reduction.op].reduce
        assert reduce is not None
        reduction_line = forward_lines([ops[reduction.op]], [reduction])[0]
        loop = [
            f"void {name}({args}, long rows, long cols) {{",
            "    #pragma omp parallel for",
            "    for (long r = 0; r < rows; ++r) {",
            f"        double acc = {reduce.init};",
            "        for (long i = r * cols; i < (r + 1) * cols; ++i) {",
            "            float v = x[i];",
            *(f"            {line}" for line in before),
            f"            {reduce.step};  // {reduction_line}",
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
    init = [f"        self.{p} = {p}" for p in params]
    signature = ", ".join(["self", *(f"{p}: float" for p in params)])
    contiguous = (
        "x = x.contiguous()"
        if len(tensors) == 1
        else f"{', '.join(tensors)} = {', '.join(f'{t}.contiguous()' for t in tensors)}"
    )
    call = ", ".join(["out", *tensors, *(f"self.{p}" for p in params), sizes])
    forward_args = ", ".join(f"{t}: torch.Tensor" for t in tensors)
    return "\n".join(
        [
            "import torch",
            "from torch import nn",
            "",
            "from cuda_agent.kernel_sandbox.launch import cpu_kernel",
            "",
            f"{name} = cpu_kernel(",
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
            f"        out = {empty}",
            f"        {name}({call})",
            "        return out",
            "",
        ]
    )


def _rename(expression: str, old: str, new: str) -> str:
    """``old`` replaced by ``new`` as a whole identifier in a C expression."""
    return re.sub(rf"\b{re.escape(old)}\b", new, expression)
