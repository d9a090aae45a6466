"""Trial outputs that stay on the GPU: the device half of the exchange (``_shared.exchange`` is the
host half).

Both workers of a slot use the same GPU. The reference worker (trusted) owns one device
buffer, allocated with ``cudaMalloc`` and exported as a CUDA IPC handle; the candidate worker
opens that handle, copies its outputs into the buffer (device to device), synchronises and
sends only their description, as on the host path; the reference worker compares them where
they lie. A 6.4 GB output then costs milliseconds instead of two trips through host memory
(seconds each). The candidate's process maps only this buffer, which never holds anything but
its own outputs: the expected outputs stay in the reference worker's own memory, and the
comparison only reads the buffer (``_shared.compare`` writes into none of its arguments).

The buffer grows on request (``provide``: the candidate asks for the bytes its outputs take
before writing, through the parent, up to ``SandboxConfig.max_output_tensor_bytes``) and is
named by a random token, so a candidate holding a handle of a reference worker that has since
been restarted is told to open the new one. Where CUDA IPC is unavailable, or anything about
it fails, outputs take the host path.
"""

from __future__ import annotations

import ctypes
import secrets
import sys
from pathlib import Path
from typing import Any

import torch

from .protocol import DeviceBufferRequest

ALIGN = 64
_GRANULE = 64 << 20  # buffers are sized in steps of this many bytes


class DeviceExchangeError(Exception):
    """The device buffer cannot be used (no CUDA IPC here, a stale or damaged handle)."""


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


_cudart: Any = None


def _runtime() -> Any:
    """The CUDA runtime library PyTorch loaded (found in this process's memory map)."""
    global _cudart
    if _cudart is not None:
        return _cudart
    torch.cuda.init()
    path = ""
    try:
        with open("/proc/self/maps") as maps:
            path = next((ln.split()[-1] for ln in maps if "libcudart.so" in ln), "")
    except OSError:
        pass
    # Where pip's CUDA packages put it, for a torch that links the runtime statically.
    shipped = sorted(
        str(p)
        for root in map(Path, sys.path)
        if (root / "nvidia").is_dir()
        for p in (root / "nvidia").glob("*/lib/libcudart.so*")
    )
    names = [path, *shipped, "libcudart.so.13", "libcudart.so.12", "libcudart.so"]
    for candidate in [p for p in names if p]:
        try:
            lib = ctypes.CDLL(candidate)
            lib.cudaIpcOpenMemHandle.argtypes = [
                ctypes.POINTER(ctypes.c_void_p),
                _IpcHandle,
                ctypes.c_uint,
            ]
            _cudart = lib
            return lib
        except (OSError, AttributeError):
            continue
    raise DeviceExchangeError("the CUDA runtime library was not found in this process")


def _call(what: str, code: int) -> None:
    if code != 0:
        raise DeviceExchangeError(f"{what} failed with CUDA error {code}")


def _view(ptr: int, nbytes: int, device: torch.device) -> torch.Tensor:
    """A uint8 tensor over ``nbytes`` of device memory at ``ptr`` (not owned by PyTorch)."""

    class _Span:
        def __init__(self) -> None:
            self.__cuda_array_interface__ = {
                "shape": (nbytes,),
                "typestr": "|u1",
                "data": (ptr, False),
                "version": 2,
            }

    return torch.as_tensor(_Span(), device=device)


def aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


# --------------------------------------------------------------------- the owner (reference)
_owned: dict[str, Any] = {}  # ptr, capacity, token, view


def provide(request: DeviceBufferRequest, home: Any = None, sections: Any = None) -> dict[str, Any]:
    """Job ``device_buffer`` (reference worker): a buffer of at least ``request.bytes``
    bytes (at most ``request.limit``), as ``{"handle", "capacity", "token"}``; or
    ``{"error": ...}`` (the candidate then uses the host path)."""
    try:
        wanted = int(request.bytes)
        limit = int(request.limit)
        if not 0 < wanted <= limit:
            return {"error": f"{wanted} bytes is outside the allowed 1..{limit}"}
        capacity = _owned.get("capacity", 0)
        # Reallocated to grow, or to give back most of a buffer far larger than needed.
        if capacity < wanted or (capacity > 4 * wanted and capacity > 1 << 30):
            _release_owned()
            size = min(limit, -(-wanted // _GRANULE) * _GRANULE)
            lib = _runtime()
            ptr = ctypes.c_void_p()
            _call("cudaMalloc", lib.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)))
            try:
                handle = _IpcHandle()
                _call("cudaIpcGetMemHandle", lib.cudaIpcGetMemHandle(ctypes.byref(handle), ptr))
            except DeviceExchangeError:
                lib.cudaFree(ptr)
                raise
            device = torch.device("cuda", torch.cuda.current_device())
            _owned.update(
                ptr=ptr.value,
                capacity=size,
                token=secrets.token_hex(8),
                # string_at: a c_char array's value would stop at the first zero byte.
                handle=ctypes.string_at(ctypes.addressof(handle), 64).hex(),
                view=_view(int(ptr.value or 0), size, device),
            )
    except (DeviceExchangeError, RuntimeError, ValueError, KeyError, TypeError) as exc:
        return {"error": str(exc)}
    return {"handle": _owned["handle"], "capacity": _owned["capacity"], "token": _owned["token"]}


def _release_owned() -> None:
    if "ptr" in _owned:
        torch.cuda.synchronize()
        _owned.pop("view", None)
        _runtime().cudaFree(ctypes.c_void_p(_owned["ptr"]))
    _owned.clear()


def owned_view(token: Any) -> torch.Tensor:
    """The owner's buffer, if ``token`` names it."""
    if not _owned or token != _owned["token"]:
        raise DeviceExchangeError("the outputs were written to a device buffer that is gone")
    return _owned["view"]


# ------------------------------------------------------------------ the user (candidate)
_opened: dict[str, Any] = {}  # ptr, capacity, token, view


def attach(answer: dict[str, Any], device: torch.device) -> str:
    """Open the buffer ``answer`` describes (a ``provide`` result) unless it is open already;
    returns why there is none to use ("" when there is)."""
    token = answer.get("token")
    if not isinstance(token, str) or "error" in answer:
        return str(answer.get("error", "no device buffer was provided"))
    if _opened.get("token") == token:
        return ""
    detach()
    try:
        raw = bytes.fromhex(str(answer["handle"]))
        capacity = int(answer["capacity"])
        if len(raw) != 64 or capacity <= 0:
            return "a damaged device buffer description"
        lib = _runtime()
        handle = _IpcHandle()
        ctypes.memmove(ctypes.addressof(handle), raw, 64)
        ptr = ctypes.c_void_p()
        # flags 1: cudaIpcMemLazyEnablePeerAccess
        _call("cudaIpcOpenMemHandle", lib.cudaIpcOpenMemHandle(ctypes.byref(ptr), handle, 1))
        view = _view(int(ptr.value or 0), capacity, device)
    except (DeviceExchangeError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    _opened.update(ptr=ptr.value, capacity=capacity, token=token, view=view)
    return ""


def detach() -> None:
    if "ptr" in _opened:
        torch.cuda.synchronize()
        _opened.pop("view", None)
        _runtime().cudaIpcCloseMemHandle(ctypes.c_void_p(_opened["ptr"]))
    _opened.clear()


def capacity() -> int:
    return int(_opened.get("capacity", 0))


def write(outputs: list[torch.Tensor], meta: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copy ``outputs`` (described by ``meta``, as ``_shared.exchange.describe`` lays them out) into
    the open buffer; returns ``meta`` marked as lying there."""
    view = _opened["view"]
    for out, m in zip(outputs, meta, strict=True):
        if m["nbytes"]:
            flat = out.detach().contiguous().reshape(-1).view(torch.uint8)
            view[m["offset"] : m["offset"] + m["nbytes"]].copy_(flat)
    torch.cuda.synchronize()
    return [{**m, "where": "device", "token": _opened["token"]} for m in meta]
