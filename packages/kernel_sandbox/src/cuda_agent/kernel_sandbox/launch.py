"""The launcher API that candidate code uses to build and call kernels on torch tensors.

CPU backend (C compiled by the system compiler, OpenMP allowed)::

    from cuda_agent.kernel_sandbox.launch import cpu_kernel

    relu = cpu_kernel(r'''
    void relu(float* out, const float* x, long n) {
        #pragma omp parallel for
        for (long i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
    }''', "relu")
    relu(out, x, x.numel())          # tensors pass as pointers, scalars as declared

CUDA backend (raw ``extern "C" __global__`` kernels compiled by NVRTC through CuPy)::

    from cuda_agent.kernel_sandbox.launch import cuda_kernel

    relu = cuda_kernel(r'''
    extern "C" __global__ void relu(float* out, const float* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[i] = x[i] > 0.f ? x[i] : 0.f;
    }''', "relu")
    relu(grid=((n + 255) // 256,), block=(256,), args=(out, x, n))

Arguments are converted to the types the kernel declares (its signature is parsed), tensors
must be contiguous and on the right device, and CUDA launches go on torch's current stream.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from typing import Any

import torch

from ._compile import DEFAULT_C_FLAGS, compile_shared_library
from ._signature import Param, parse_signature
from .errors import CandidateError, CompileError

__all__ = ["CpuKernel", "CudaKernel", "cpu_kernel", "cuda_kernel", "launch_count"]

_CTYPES: dict[str, Any] = {
    "bool": ctypes.c_bool,
    "int8": ctypes.c_int8,
    "uint8": ctypes.c_uint8,
    "int16": ctypes.c_int16,
    "uint16": ctypes.c_uint16,
    "int32": ctypes.c_int32,
    "uint32": ctypes.c_uint32,
    "int64": ctypes.c_int64,
    "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "pointer": ctypes.c_void_p,
}

_TORCH_DTYPES: dict[str, torch.dtype] = {
    "bool": torch.bool,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "float32": torch.float32,
    "float64": torch.float64,
}

# How many custom kernels this process has launched: the harness reads it to tell a real
# kernel from a candidate that only calls PyTorch.
_launches = 0


def launch_count() -> int:
    """Number of kernel launches made through this module in this process."""
    return _launches


def _count_launch() -> None:
    global _launches
    _launches += 1


def _check_tensor(kernel: str, param: Param, value: Any, device_type: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise CandidateError(
            f"{kernel}: argument {param.name!r} is declared {param.c_type} but got "
            f"{type(value).__name__}; pass a torch.Tensor"
        )
    if value.device.type != device_type:
        raise CandidateError(
            f"{kernel}: tensor {param.name!r} is on {value.device}, expected a {device_type} tensor"
        )
    expected = _TORCH_DTYPES.get(param.element)
    if expected is not None and value.dtype != expected:
        raise CandidateError(
            f"{kernel}: tensor {param.name!r} has dtype {value.dtype} but the kernel declares "
            f"{param.c_type}; convert it (e.g. .to({expected})) or change the kernel"
        )
    if not value.is_contiguous():
        raise CandidateError(
            f"{kernel}: tensor {param.name!r} is not contiguous; call .contiguous() first"
        )
    return value


def _check_arity(kernel: str, params: Sequence[Param], args: Sequence[Any]) -> None:
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise CandidateError(
            f"{kernel} takes {len(params)} arguments ({names}) but was called with {len(args)}"
        )


class CpuKernel:
    """A compiled C function called on tensor pointers (see ``cpu_kernel``)."""

    def __init__(self, source: str, name: str, lang: str, flags: tuple[str, ...]) -> None:
        self.name = name
        self.params = parse_signature(source, name)
        path = compile_shared_library(source, lang=lang, flags=flags)
        lib = ctypes.CDLL(str(path))
        try:
            fn = getattr(lib, name)
        except AttributeError as exc:
            hint = ' (C++ sources need extern "C")' if lang == "c++" else ""
            raise CompileError(f"the library does not export {name!r}{hint}") from exc
        fn.argtypes = [_CTYPES[p.kind] for p in self.params]
        fn.restype = None
        self._fn = fn

    def __call__(self, *args: Any) -> None:
        _check_arity(self.name, self.params, args)
        converted: list[Any] = []
        for param, value in zip(self.params, args, strict=True):
            if param.kind == "pointer":
                converted.append(_check_tensor(self.name, param, value, "cpu").data_ptr())
            else:
                converted.append(_CTYPES[param.kind](value))
        _count_launch()
        self._fn(*converted)


def cpu_kernel(
    source: str, name: str, *, lang: str = "c", flags: Sequence[str] = DEFAULT_C_FLAGS
) -> CpuKernel:
    """Compile C (or C++ with ``extern "C"``) ``source`` and return function ``name`` as a callable.

    Tensors are passed as pointers to their data; scalars are converted to the declared type.
    Compilation is cached by content, so re-importing a candidate costs nothing.
    """
    return CpuKernel(source, name, lang, tuple(flags))


class CudaKernel:
    """A raw CUDA kernel compiled by NVRTC (see ``cuda_kernel``)."""

    def __init__(self, source: str, name: str, options: tuple[str, ...]) -> None:
        cupy = _import_cupy()
        self.name = name
        self.params = parse_signature(source, name)
        self._np_types = {p.name: _numpy_type(p.kind) for p in self.params}
        try:
            self._kernel = cupy.RawKernel(source, name, options=options)
            self._kernel.compile()
        except cupy.cuda.compiler.CompileException as exc:
            raise CompileError("NVRTC compilation failed:\n" + str(exc), str(exc)) from exc
        self._cupy = cupy

    def __call__(
        self,
        grid: Sequence[int] | int,
        block: Sequence[int] | int,
        args: Sequence[Any],
        shared_mem: int = 0,
    ) -> None:
        _check_arity(self.name, self.params, args)
        converted: list[Any] = []
        device_index: int | None = None
        for param, value in zip(self.params, args, strict=True):
            if param.kind == "pointer":
                tensor = _check_tensor(self.name, param, value, "cuda")
                device_index = tensor.device.index if device_index is None else device_index
                converted.append(self._np_types[param.name](tensor.data_ptr()))
            else:
                converted.append(self._np_types[param.name](value))
        grid_t = (grid,) if isinstance(grid, int) else tuple(grid)
        block_t = (block,) if isinstance(block, int) else tuple(block)
        index = torch.cuda.current_device() if device_index is None else device_index
        stream = torch.cuda.current_stream(index)
        with self._cupy.cuda.Device(index), _external_stream(self._cupy, stream.cuda_stream):
            _count_launch()
            self._kernel(grid_t, block_t, tuple(converted), shared_mem=shared_mem)


def cuda_kernel(source: str, name: str, *, options: Sequence[str] = ("-std=c++17",)) -> CudaKernel:
    """Compile a raw ``extern "C" __global__`` kernel with NVRTC and return a launcher.

    Call it as ``kernel(grid=..., block=..., args=(...), shared_mem=0)``; it runs on torch's
    current CUDA stream, pointers are the tensors' data pointers, scalars take the declared type.
    """
    return CudaKernel(source, name, tuple(options))


@functools.cache
def _import_cupy() -> Any:
    try:
        import cupy
    except ImportError as exc:  # a host problem, not the candidate's
        raise RuntimeError(
            "the CUDA fast path needs CuPy: pip install cupy-cuda12x (or cupy-cuda13x)"
        ) from exc
    return cupy


class _StreamHandle:
    """A raw stream pointer dressed in the CUDA stream protocol (``__cuda_stream__``)."""

    def __init__(self, pointer: int) -> None:
        self._pointer = pointer

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self._pointer)


_STREAMS: dict[tuple[int, int], Any] = {}


def _external_stream(cupy: Any, pointer: int) -> Any:
    """CuPy's view of torch's stream, cached per (device, pointer).

    CuPy 14 wants ``Stream.from_external`` (an object with ``__cuda_stream__``); older CuPy
    has ``ExternalStream(pointer)``.
    """
    key = (cupy.cuda.runtime.getDevice(), pointer)
    stream = _STREAMS.get(key)
    if stream is None:
        from_external = getattr(cupy.cuda.Stream, "from_external", None)
        if from_external is not None:
            stream = from_external(_StreamHandle(pointer))
        else:
            stream = cupy.cuda.ExternalStream(pointer)
        _STREAMS[key] = stream
    return stream


def _numpy_type(kind: str) -> Any:
    import numpy as np

    return {"pointer": np.uint64, "bool": np.bool_}.get(kind) or getattr(np, kind)
