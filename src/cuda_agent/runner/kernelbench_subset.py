"""``kernelbench-l1-subset``: the KernelBench level-1 problems within a small model's reach.

Elementwise activations, reductions over one dimension (sum, mean, max, min, argmax, argmin)
and softmax-like row operations (softmax, log-softmax, L1 and L2 normalisation): one loop or
one reduction a row, the kernels the warm start teaches. Matrix products, convolutions,
pooling, cumulative scans and losses are left out. The problems are read from a KernelBench
checkout as they are, at KernelBench's own sizes (sized for a GPU: evaluating them on the CPU
backend takes gigabytes per input). No KernelBench file is shipped here.

The checkout is ``--kernelbench DIR`` or ``$CUDA_AGENT_KERNELBENCH``: a clone of
KernelBench (its ``KernelBench/level1/`` directory is read), its ``KernelBench/`` directory or
its ``level1/`` directory.
"""

from __future__ import annotations

import os

from cuda_agent.kernel_sandbox import Task, TaskError

ENV = "CUDA_AGENT_KERNELBENCH"
# KernelBench level-1 file stems (``level1/<stem>.py``); tasks are named ``L1_<stem>``.
L1_SUBSET = (
    # elementwise activations
    "19_ReLU",
    "20_LeakyReLU",
    "21_Sigmoid",
    "22_Tanh",
    "25_Swish",
    "26_GELU_",
    "27_SELU_",
    "28_HardSigmoid",
    "29_Softplus",
    "30_Softsign",
    "31_ELU",
    "32_HardTanh",
    "88_MinGPTNewGelu",
    # reductions over one dimension
    "47_Sum_reduction_over_a_dimension",
    "48_Mean_reduction_over_a_dimension",
    "49_Max_reduction_over_a_dimension",
    "51_Argmax_over_a_dimension",
    "52_Argmin_over_a_dimension",
    "53_Min_reduction_over_a_dimension",
    # softmax-like: a reduction over a row, then an elementwise pass over it
    "23_Softmax",
    "24_LogSoftmax",
    "38_L1Norm_",
    "39_L2Norm_",
)


def kernelbench_root(path: str = "") -> str:
    """The checkout given (``path``, else ``$CUDA_AGENT_KERNELBENCH``); TaskError naming the
    fix when neither is set."""
    root = path or os.environ.get(ENV, "")
    if not root:
        raise TaskError(
            "kernelbench-l1-subset reads the problems from a KernelBench checkout, and none "
            f"was given: clone KernelBench and pass --kernelbench DIR or set {ENV}=DIR"
        )
    return root


def load_l1_subset(path: str = "") -> list[Task]:
    """The ``L1_SUBSET`` problems of the checkout at ``path`` (or ``$CUDA_AGENT_KERNELBENCH``),
    in the list's order, named ``L1_<stem>``; TaskError naming any problem it lacks."""
    from cuda_agent.data import load_kernelbench

    root = kernelbench_root(path)
    found = {t.name: t for t in load_kernelbench(root, levels=(1,))}
    missing = [stem for stem in L1_SUBSET if f"L1_{stem}" not in found]
    if missing:
        raise TaskError(
            f"the KernelBench checkout {root} lacks level-1 problems of kernelbench-l1-subset: "
            f"{', '.join(f'level1/{m}.py' for m in missing)} (a current clone has them all)"
        )
    return [found[f"L1_{stem}"] for stem in L1_SUBSET]
