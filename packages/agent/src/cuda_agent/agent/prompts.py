"""Prompts that tell the policy what to write, with one complete example per backend."""

from __future__ import annotations

import re

from cuda_agent.kernel_sandbox import Task

_CPU_EXAMPLE = '''```python
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

negate = cpu_kernel(
    r"""
void negate(float* out, const float* x, long n) {
    #pragma omp parallel for
    for (long i = 0; i < n; ++i) out[i] = -x[i];
}
""",
    "negate",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        negate(out, x, x.numel())
        return out
```'''

_CUDA_EXAMPLE = '''```python
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

negate = cuda_kernel(
    r"""
extern "C" __global__ void negate(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = -x[i];
}
""",
    "negate",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        negate(grid=((n + 255) // 256,), block=(256,), args=(out, x, n))
        return out
```'''

_LANGUAGE = {
    "cpu": ("C (compiled with gcc -O3 -fopenmp)", "cpu_kernel", _CPU_EXAMPLE),
    "cuda": ("CUDA C (compiled with NVRTC)", "cuda_kernel", _CUDA_EXAMPLE),
}


def system_prompt(backend: str) -> str:
    """Instructions and a complete worked example for ``backend`` ("cpu" or "cuda")."""
    if backend not in _LANGUAGE:
        raise ValueError(f"backend must be one of {sorted(_LANGUAGE)}, not {backend!r}")
    language, launcher, example = _LANGUAGE[backend]
    return (
        f"You write fast {language} kernels that replace PyTorch operators.\n"
        "Given a PyTorch module `Model`, answer with one Python code block defining "
        "`class ModelNew(nn.Module)` with the same constructor arguments and outputs. "
        f"Compute with kernels built by `{launcher}`; use torch only to allocate outputs.\n"
        "Example for a module returning `-x`:\n" + example
    )


def prompt_name(name: str) -> str:
    """A task's name as prompts give it: lower case, each character that cannot be in a C or
    Python identifier an underscore, ``task_`` before a leading digit (``L1_21_Sigmoid`` ->
    ``l1_21_sigmoid``, ``19_ReLU`` -> ``task_19_relu``). Answers name their kernel
    ``<name>_kernel``; every shipped task is already named so. With KernelBench's own names
    the warm-started model's greedy answers to the 23 level-1 problems linked 0 times (the
    kernel bound as ``L1_21_Sigmoid_kernel``, launched as ``l1_21_Sigmoid_kernel``); named
    so, 14 times (``benchmarks/results/2026-12-06-cpu-names/``)."""
    ident = re.sub(r"\W", "_", name, flags=re.ASCII).lower()
    return f"task_{ident}" if ident[:1].isdigit() or not ident else ident


_SUPER_OF_MODEL = re.compile(r"\bsuper\(\s*Model\s*,\s*self\s*\)")


def prompt_source(source: str) -> str:
    """A reference's source as prompts show it: ``super(Model, self)`` written ``super()``,
    the same call in Python 3 and the form every shipped task has. KernelBench's modules write
    the old form; the warm-started model copied it into ``ModelNew`` (where it names the
    reference, refused, and would raise ``TypeError``) in 9 of its 23 level-1 answers on an
    H100 (``benchmarks/results/2026-12-06-h100-axes/``). Nothing else changes."""
    return _SUPER_OF_MODEL.sub("super()", source)


def user_prompt(task: Task) -> str:
    return (
        f"Write ModelNew for this PyTorch module (task `{prompt_name(task.name)}`):\n"
        f"```python\n{prompt_source(task.source).strip()}\n```"
    )


def build_messages(task: Task, backend: str) -> list[dict[str, str]]:
    """Chat messages for a single-turn attempt at ``task``."""
    return [
        {"role": "system", "content": system_prompt(backend)},
        {"role": "user", "content": user_prompt(task)},
    ]
