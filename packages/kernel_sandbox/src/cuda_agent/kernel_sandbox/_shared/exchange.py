"""Moving a trial's outputs from the candidate worker to the reference worker.

The parent creates one anonymous in-memory file per slot (``create``: a ``memfd``, never
written to disk), sized to the largest output a trial may produce, and hands its descriptor to
the slot's candidate and reference workers. The candidate worker writes its raw output bytes
into it through a memory map (writing inside an existing file is not limited by the worker's
file-size rlimit) and sends only a description (dtype, shape, offset); the reference worker
reads the bytes back into tensors. No pickle crosses the boundary: the reader trusts nothing but
the bytes.

On a GPU, both workers map the file's first ``PINNED_BYTES`` once and register that map with
CUDA (page-locked, ``pin``), so outputs move between the GPU and the file by DMA in one copy
each way, instead of through the driver's staging buffers (which cost about 20 ms per 64 MB
output on the H200, several times a job). Larger outputs take the pageable path.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import warnings
from typing import Any

import torch

# Dtypes an output may have; anything else is refused by name before it is interpreted.
DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.complex64,
        torch.complex128,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
    )
}


# The page-locked window: at most this many bytes of the file, resident for the workers' life.
PINNED_BYTES = 1 << 30
_pinned: dict[int, tuple[mmap.mmap, torch.Tensor]] = {}


def pin(fd: int) -> int:
    """Map and page-lock the first bytes of exchange file ``fd`` for CUDA copies (once per
    process); returns how many bytes are pinned, 0 where CUDA or the registration is not
    available (the exchange then works as on the CPU)."""
    if fd in _pinned:
        return len(_pinned[fd][0])
    if not torch.cuda.is_available():
        return 0
    try:
        size = min(os.fstat(fd).st_size, PINNED_BYTES)
        mm = mmap.mmap(fd, size)
    except (OSError, ValueError):
        return 0
    view = torch.frombuffer(mm, dtype=torch.uint8)
    # flags 0: cudaHostRegisterDefault
    if torch.cuda.cudart().cudaHostRegister(view.data_ptr(), size, 0) != 0:
        del view
        mm.close()
        return 0
    _pinned[fd] = (mm, view)
    return size


class ExchangeError(Exception):
    """The outputs cannot be passed on (too large, unsupported dtype, damaged description)."""


def create(capacity: int) -> int:
    """A new sparse in-memory file of ``capacity`` bytes; returns its descriptor, which the
    caller passes to worker processes (``pass_fds``) and closes when done."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("cuda-agent-exchange", 0)
    else:  # an unlinked temporary file: the same, on hosts without memfd
        fd, path = tempfile.mkstemp(prefix="cuda-agent-exchange-")
        os.unlink(path)
    os.ftruncate(fd, capacity)
    return fd


def describe(outputs: list[torch.Tensor]) -> tuple[list[dict[str, Any]], int]:
    """The layout of ``outputs`` laid back to back (64-byte aligned), and the bytes it takes."""
    meta: list[dict[str, Any]] = []
    offset = 0
    for out in outputs:
        name = str(out.dtype).removeprefix("torch.")
        if name not in DTYPES:
            raise ExchangeError(f"outputs of dtype {out.dtype} are not supported")
        nbytes = out.numel() * out.element_size()
        meta.append(
            {
                "dtype": name,
                "shape": list(out.shape),
                "device": str(out.device),
                "offset": offset,
                "nbytes": nbytes,
            }
        )
        offset += -(-nbytes // 64) * 64  # 64-byte aligned
    return meta, offset


def write_outputs(fd: int, outputs: list[torch.Tensor]) -> list[dict[str, Any]]:
    """Write ``outputs`` back to back into the exchange file; return their descriptions."""
    meta, total = describe(outputs)
    try:
        size = os.fstat(fd).st_size
    except OSError as exc:
        raise ExchangeError(f"the exchange file is unusable: {exc}") from None
    if total > size:
        raise ExchangeError(
            f"the outputs take {total} bytes, more than the {size} allowed per trial "
            "(SandboxConfig.max_output_tensor_bytes)"
        )
    if total == 0:
        return meta
    pinned = _pinned.get(fd)
    if pinned is not None and total <= len(pinned[0]):
        _copy_into(pinned[1], outputs, meta)
        return meta
    with mmap.mmap(fd, total) as mm:
        view = torch.frombuffer(mm, dtype=torch.uint8)
        _copy_into(view, outputs, meta)
        del view
    return meta


def _copy_into(view: torch.Tensor, outputs: list[torch.Tensor], meta: list[dict[str, Any]]) -> None:
    for out, m in zip(outputs, meta, strict=True):
        if m["nbytes"]:
            flat = out.detach().contiguous().reshape(-1).view(torch.uint8)
            view[m["offset"] : m["offset"] + m["nbytes"]].copy_(flat)


def read_outputs(fd: int, meta: Any, device: torch.device) -> list[torch.Tensor]:
    """Tensors described by ``meta`` (sent by an untrusted process), copied out of the file."""
    if not isinstance(meta, list):
        raise ExchangeError("damaged output description")
    if meta and all(isinstance(m, dict) and m.get("where") == "device" for m in meta):
        return _read_device(meta, device)
    try:
        size = os.fstat(fd).st_size
    except OSError as exc:
        raise ExchangeError(f"the exchange file is unusable: {exc}") from None
    layout = _layout(meta, size, device, "the exchange file")
    end = max((o + n for _, _, o, n in layout), default=0)
    if end == 0:
        return [torch.empty(s, dtype=d, device=device) for d, s, _, _ in layout]
    pinned = _pinned.get(fd)
    if pinned is not None and end <= len(pinned[0]):
        return [_copy_out(pinned[1][o : o + n], d, s, device) for d, s, o, n in layout]
    with mmap.mmap(fd, end, prot=mmap.PROT_READ) as mm:
        tensors = []
        for dtype, shape, offset, nbytes in layout:
            if nbytes == 0:
                tensors.append(torch.empty(shape, dtype=dtype, device=device))
                continue
            with warnings.catch_warnings():  # the map is read-only; we only copy from it
                warnings.simplefilter("ignore", UserWarning)
                raw = torch.frombuffer(mm, dtype=torch.uint8, count=nbytes, offset=offset)
            tensors.append(_copy_out(raw, dtype, shape, device))
            del raw
        return tensors


def _read_device(meta: list[Any], device: torch.device) -> list[torch.Tensor]:
    """Views of the reference worker's device buffer, where the candidate wrote its outputs
    (``_shared.device_exchange``); validated like the host path's descriptions."""
    from . import device_exchange as _device_exchange

    tokens = {m.get("token") for m in meta}
    try:
        view = _device_exchange.owned_view(tokens.pop() if len(tokens) == 1 else None)
    except _device_exchange.DeviceExchangeError as exc:
        raise ExchangeError(str(exc)) from None
    layout = _layout(meta, view.numel(), device, "the device buffer")
    return [view[o : o + n].view(d).reshape(s) for d, s, o, n in layout]


def _layout(
    meta: list[Any], size: int, device: torch.device, where: str
) -> list[tuple[torch.dtype, list[int], int, int]]:
    """(dtype, shape, offset, bytes) of each described output, checked against ``size``
    bytes of ``where`` (the description comes from an untrusted process)."""
    layout = []
    for i, m in enumerate(meta):
        dtype, shape, offset = _checked(m, size)
        if m["device"] != str(device):
            raise ExchangeError(f"output {i} is on {m['device']}, expected {device}")
        count = 1
        for s in shape:
            count *= s
        nbytes = count * dtype.itemsize
        if offset % 64 or offset + nbytes > size:
            raise ExchangeError(f"{where} is shorter than its description")
        layout.append((dtype, shape, offset, nbytes))
    return layout


def _copy_out(raw: torch.Tensor, dtype: torch.dtype, shape: list[int], device: torch.device):
    """A tensor of its own (on ``device``) holding the bytes of ``raw`` read as ``dtype``."""
    if raw.numel() == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    host = raw.view(dtype).reshape(shape)
    return host.to(device) if device.type != "cpu" else host.clone()


def _checked(m: Any, size: int) -> tuple[torch.dtype, list[int], int]:
    if not isinstance(m, dict) or m.get("dtype") not in DTYPES:
        raise ExchangeError("damaged output description")
    shape, offset = m.get("shape"), m.get("offset")
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        raise ExchangeError("damaged output description")
    if type(offset) is not int or not 0 <= offset <= size:
        raise ExchangeError("damaged output description")
    if not isinstance(m.get("device"), str):
        raise ExchangeError("damaged output description")
    return DTYPES[m["dtype"]], shape, offset
