"""The launcher API that candidate code uses to build and call kernels on torch tensors.

CPU backend (C compiled by the system compiler, OpenMP allowed)::

    from cuda_agent.kernel_sandbox.launch import cpu_kernel

    relu = cpu_kernel(r'''
    void relu(float* out, const float* x, long n) {
        #pragma omp parallel for
        for (long i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
    }''', "relu")
    relu(out, x, x.numel())          # tensors pass as pointers, scalars as declared

CUDA backend (raw ``extern "C" __global__`` kernels compiled by NVRTC, CuPy's binding)::

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
import os
import re
import time
from collections.abc import Sequence
from typing import Any

import torch

from ._shared.compile import DEFAULT_C_FLAGS, compile_cubin, compile_shared_library, cuda_arch
from ._shared.signature import Param, parse_signature
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


_kernel_names: set[str] = set()
# CPU time this thread spent inside launched kernels (on a GPU: in their launch calls).
_kernel_seconds = 0.0


def kernel_names() -> frozenset[str]:
    """Names the candidate's own kernels may have: those built through this module, the
    identifiers of the C++ / CUDA sources built through the extension hooks, and the names of
    the Triton kernels launched, in this process."""
    return frozenset(_kernel_names)


def kernel_seconds() -> float:
    """CPU time of this thread spent inside kernel calls made through this module, the
    extension hooks or Triton, in seconds (``time.thread_time``)."""
    return _kernel_seconds


def _count_launch() -> None:
    global _launches
    _launches += 1


_seconds_by_name: dict[str, float] = {}


def kernel_seconds_by_name() -> dict[str, float]:
    """``kernel_seconds`` split by kernel (or extension function) name."""
    return dict(_seconds_by_name)


def _timed(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, counted as a launch, its CPU time added to ``kernel_seconds``
    (and, by the name of ``fn``, to ``kernel_seconds_by_name``)."""
    global _kernel_seconds
    _count_launch()
    started = time.thread_time()
    try:
        return fn(*args, **kwargs)
    finally:
        spent = time.thread_time() - started
        _kernel_seconds += spent
        name = str(getattr(fn, "__name__", "") or getattr(fn, "name", "") or "kernel")
        _seconds_by_name[name] = _seconds_by_name.get(name, 0.0) + spent


IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a C / C++ / Python identifier


def _register_sources(*texts: str) -> None:
    """Record the identifiers of C++ / CUDA sources the candidate built (its kernels' names
    are among them)."""
    for text in texts:
        _kernel_names.update(IDENTIFIER.findall(text))


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
        _timed(self._fn, *converted)  # a ctypes function: named by its symbol


def cpu_kernel(
    source: str, name: str, *, lang: str = "c", flags: Sequence[str] = DEFAULT_C_FLAGS
) -> CpuKernel:
    """Compile C (or C++ with ``extern "C"``) ``source`` and return function ``name`` as a callable.

    Tensors are passed as pointers to their data; scalars are converted to the declared type.
    Compilation is cached by content, so re-importing a candidate costs nothing.
    """
    return CpuKernel(source, name, lang, tuple(flags))


def _dims(name: str, what: str, value: Sequence[int] | int) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(not isinstance(d, int) or d < 1 for d in dims):
        raise CandidateError(f"{name}: {what} must be 1 to 3 positive ints, got {value!r}")
    return (*dims, 1, 1)[:3]  # type: ignore[return-value]


def _current_stream(device: int) -> int:
    """Raw handle of torch's current stream (the private accessor skips building a Stream)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(device))
    return int(torch.cuda.current_stream(device).cuda_stream)


@functools.cache
def _libcuda() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernel.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                                   ctypes.c_void_p, ctypes.c_void_p]  # fmt: skip
    lib.cuLaunchKernel.restype = ctypes.c_int
    lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    lib.cuModuleGetFunction.argtypes = [
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_void_p,
        ctypes.c_char_p,
    ]
    return lib


def _driver_error(lib: Any, code: int) -> str:
    text = ctypes.c_char_p()
    lib.cuGetErrorString(code, ctypes.byref(text))
    return text.value.decode() if text.value else f"CUresult {code}"


class CudaKernel:
    """A raw CUDA kernel compiled by NVRTC (see ``cuda_kernel``).

    The cubin is cached by content (``_shared.compile.compile_cubin``) and loaded with the driver's
    ``cuModuleLoadData``; launches go straight to ``cuLaunchKernel`` through ctypes with a
    preallocated argument block, since CuPy's own launch path costs tens of microseconds, more
    than many kernels run. (Not thread-safe: one launcher, one thread.) On a compile worker
    (no GPU) constructing one only fills the cache; calling it is an error.
    """

    def __init__(self, source: str, name: str, options: tuple[str, ...]) -> None:
        self.name = name
        _kernel_names.add(name)
        self.params = parse_signature(source, name)
        cubin = compile_cubin(source, options, cuda_arch())
        self._function: int | None = None
        if os.environ.get("CUDA_AGENT_ROLE") == "compile":
            return
        self._device = torch.cuda.current_device()
        torch.cuda.synchronize(self._device)  # the primary context is current on this thread
        lib = _libcuda()
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        code = lib.cuModuleLoadData(ctypes.byref(module), cubin.read_bytes())
        if code == 0:
            code = lib.cuModuleGetFunction(ctypes.byref(function), module, name.encode())
        if code != 0:
            raise CompileError(f"{name}: loading the compiled kernel failed: "
                               f"{_driver_error(lib, code)}")  # fmt: skip
        self._function = function.value
        self._slots = [_CTYPES[p.kind]() for p in self.params]
        self._dtypes = [_TORCH_DTYPES.get(p.element) for p in self.params]
        self._arg_block = (ctypes.c_void_p * max(1, len(self._slots)))(
            *[ctypes.cast(ctypes.pointer(slot), ctypes.c_void_p) for slot in self._slots]
        )

    def __call__(
        self,
        grid: Sequence[int] | int,
        block: Sequence[int] | int,
        args: Sequence[Any],
        shared_mem: int = 0,
    ) -> None:
        if self._function is None:
            raise CandidateError(f"{self.name}: compiled only (no GPU here), cannot launch")
        if len(args) != len(self._slots):
            _check_arity(self.name, self.params, args)
        for param, slot, value, dtype in zip(
            self.params, self._slots, args, self._dtypes, strict=True
        ):
            if param.kind == "pointer":
                # The fast checks first (this runs on every launch); the slow path explains.
                if not (
                    isinstance(value, torch.Tensor)
                    and value.get_device() == self._device
                    and (dtype is None or value.dtype is dtype)
                    and value.is_contiguous()
                ):
                    _check_tensor(self.name, param, value, "cuda")
                    if value.get_device() != self._device:
                        raise CandidateError(
                            f"{self.name}: tensor {param.name!r} is on {value.device}, but the "
                            f"kernel was built for cuda:{self._device}"
                        )
                slot.value = value.data_ptr()
            else:
                try:
                    slot.value = value
                except TypeError:
                    raise CandidateError(
                        f"{self.name}: argument {param.name!r} is declared {param.c_type} but got "
                        f"{type(value).__name__} {value!r}"
                    ) from None
        gx, gy, gz = _dims(self.name, "grid", grid)
        bx, by, bz = _dims(self.name, "block", block)
        stream = _current_stream(self._device)
        lib = _libcuda()
        code = _timed(
            lib.cuLaunchKernel,
            *(self._function, gx, gy, gz, bx, by, bz, shared_mem, stream, self._arg_block, None),
        )
        if code != 0:
            reason = _driver_error(lib, code)
            raise CandidateError(f"{self.name}: kernel launch failed: CUDA error: {reason}")


def cuda_kernel(source: str, name: str, *, options: Sequence[str] = ("-std=c++17",)) -> CudaKernel:
    """Compile a raw ``extern "C" __global__`` kernel with NVRTC and return a launcher.

    Call it as ``kernel(grid=..., block=..., args=(...), shared_mem=0)``; it runs on torch's
    current CUDA stream, pointers are the tensors' data pointers, scalars take the declared type.
    """
    return CudaKernel(source, name, tuple(options))
