"""How much freed memory the process keeps: glibc malloc's mmap threshold (CPU), and the CUDA
caching allocator's reserve (``release_device_memory``).

torch's CPU tensors are plain ``malloc`` blocks. glibc serves a block of at least its mmap
threshold with a mapping of its own, unmapped (returned to the system) when freed, and smaller
blocks from its heap, whose freed space stays resident for later blocks. The threshold starts at
128 KiB but is dynamic: each time a mapped block is freed the threshold rises to that block's
size, up to 32 MiB. After the first training step, then, every activation of up to 32 MiB
(a decoder layer's over ~1,000 tokens: 2 to 6 MiB, its attention scores up to 32 MiB) comes
from the heap, and the heap grows with each micro-batch's differently sized and interleaved
blocks faster than it is reused. Measured on the CPU default (SmolLM2-135M, LoRA, gradient
checkpointing, one 950-token sequence per micro-batch): a second micro-batch peaked at 2.8 GB
resident with the dynamic threshold, 1.5 GB with it fixed at 128 KiB
(``benchmarks/results/2026-12-03-cpu-memory/``).

``fix_cpu_mmap_threshold`` fixes it (``mallopt(M_MMAP_THRESHOLD, ...)``, which also turns the
dynamic adjustment off, for the whole process). It changes where blocks live, never a value.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import torch

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
CPU_MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value

_fixed: int | None = None


def fix_cpu_mmap_threshold(threshold: int = CPU_MMAP_THRESHOLD) -> bool:
    """Serve every CPU allocation of ``threshold`` bytes or more with a mapping of its own,
    returned to the system when freed; the dynamic raising of that threshold is turned off.
    Process-wide and idempotent. False where the C library is not glibc (nothing done)."""
    global _fixed
    if _fixed == threshold:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if mallopt(M_MMAP_THRESHOLD, threshold) != 1:
        return False
    _fixed = threshold
    return True


def release_device_memory(device: torch.device) -> dict[str, int]:
    """Give the CUDA caching allocator's reserve on ``device`` (blocks no tensor uses) back to
    the GPU, which the sandbox's workers share with the trainer: after the warm start's steps
    the trainer's process held 13.96 GiB while a held-out evaluation ran out of memory in the
    reference worker (H100 80 GB, 2026-12-05). Returns the bytes allocated and reserved after,
    and the bytes given back; zeros off CUDA."""
    if device.type != "cuda" or not torch.cuda.is_initialized():
        return {"allocated": 0, "reserved": 0, "released": 0}
    before = torch.cuda.memory_reserved(device)
    torch.cuda.empty_cache()
    after = torch.cuda.memory_reserved(device)
    return {
        "allocated": torch.cuda.memory_allocated(device),
        "reserved": after,
        "released": before - after,
    }
