"""Runtime anti-cheat checks, run in the candidate worker around the candidate's forward calls.

They see what static analysis cannot: PyTorch operators reached through aliases, ``getattr``
or C++ extensions (``at::matmul`` inside a ``load_inline`` function goes through the same
dispatcher), tensor subclasses returned as outputs, threads left running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten operators that allocate, view, reshape, copy or describe tensors: what a candidate's
# forward may run besides its own kernels.
ALLOWED_ATEN = frozenset(
    [
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "new_zeros",
        "new_ones",
        "new_full",
        "fill",
        "fill_",
        "zero",
        "zero_",
        "scalar_tensor",
        "arange",
        "lift_fresh",
        "lift_fresh_copy",
        "detach",
        "detach_",
        "alias",
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "as_strided",
        "expand",
        "expand_as",
        "permute",
        "transpose",
        "t",
        "squeeze",
        "unsqueeze",
        "select",
        "slice",
        "narrow",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "unflatten",
        "flatten",
        "clone",
        "copy",
        "copy_",
        "_to_copy",
        "to",
        "contiguous",
        "_local_scalar_dense",
        "is_same_size",
        "resize_",
        "set_",
        "view_as_real",
        "view_as_complex",
        "movedim",
        "_has_compatible_shallow_copy_type",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
    ]
)
# Names a config may allow (SandboxConfig.allowed_torch_ops) and the aten operators they run.
LIBRARY_OPS = {
    "matmul": {"matmul", "mm", "bmm", "addmm", "baddbmm", "mv", "dot"},
    "mm": {"mm", "addmm"},
    "bmm": {"bmm", "baddbmm"},
    "linear": {"linear", "addmm", "mm", "matmul"},
    "conv1d": {"convolution", "_convolution", "cudnn_convolution", "mkldnn_convolution"},
    "conv2d": {"convolution", "_convolution", "cudnn_convolution", "mkldnn_convolution"},
    "conv3d": {"convolution", "_convolution", "cudnn_convolution", "mkldnn_convolution"},
    "scaled_dot_product_attention": {
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
    },
}


def allowed_aten(allowed_torch_ops: Iterable[str]) -> frozenset[str]:
    extra: set[str] = set()
    for name in allowed_torch_ops:
        extra |= LIBRARY_OPS.get(name, {name})
    return ALLOWED_ATEN | extra


class OpRecorder(TorchDispatchMode):
    """Records the name of every aten operator run while active, and lets it run."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()
        self.seconds = 0.0  # CPU time of this thread inside the operators
        self.calls = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        started = time.thread_time()
        self.calls += 1
        self.ops.add(func.overloadpacket.__name__)
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.seconds += time.thread_time() - started


def forbidden_ops(recorded: Iterable[str], allowed: frozenset[str]) -> list[str]:
    """The recorded operators that compute (sorted), ignoring trailing-underscore variants of
    allowed ones."""
    return sorted(op for op in set(recorded) if op not in allowed and op.rstrip("_") not in allowed)


def output_problem(outputs: list[torch.Tensor]) -> str:
    """Why outputs are not plain, materialised tensors ("" when they are)."""
    for i, out in enumerate(outputs):
        if type(out) is not torch.Tensor:
            return (
                f"output {i} is a {type(out).__module__}.{type(out).__name__}, a tensor "
                "subclass: return plain torch.Tensor results"
            )
        if out.is_meta or out.layout != torch.strided:
            return f"output {i} is not a materialised strided tensor"
        if out.requires_grad and out.grad_fn is not None:
            return f"output {i} carries an autograd graph: compute it in your kernel"
    return ""


def python_threads() -> int:
    return threading.active_count()
