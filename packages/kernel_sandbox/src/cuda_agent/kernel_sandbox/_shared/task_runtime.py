"""Running the (trusted) task module: load it, set its sizes, draw inputs, build the reference.

Shared by both kinds of worker, so that the candidate worker and the reference worker build the
same model and draw the same inputs from the same seed.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import sys
import types
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch


class TaskFailure(Exception):
    """The task module itself is broken (or refuses the requested sizes)."""


def load_module(source: str, path: Path, name: str) -> types.ModuleType:
    """Import ``source`` as module ``name`` from ``path`` (written first)."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop(name, None)
    spec.loader.exec_module(module)
    return module


def load_task(source: str, path: Path) -> types.ModuleType:
    try:
        task = load_module(source, path, "cuda_agent_task")
    except Exception as exc:
        raise TaskFailure(
            f"the task module failed to import: {type(exc).__name__}: {exc}"
        ) from None
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(task, attr):
            raise TaskFailure(f"the task module does not define {attr}")
    return task


def override_sizes(task: types.ModuleType, sizes: dict[str, int]) -> None:
    """Set module-level problem sizes before anything reads them."""
    for name, value in sizes.items():
        current = getattr(task, name, None)
        if type(current) is not int:
            raise TaskFailure(f"the task has no integer size named {name!r}")
        setattr(task, name, int(value))


def build_reference(
    task: types.ModuleType, device: torch.device, seed: int
) -> tuple[torch.nn.Module, list[Any]]:
    """The reference model and its init inputs, both drawn from ``seed``."""
    try:
        torch.manual_seed(seed)
        init_inputs = list(task.get_init_inputs())
        torch.manual_seed(seed)
        reference = task.Model(*init_inputs).to(device).eval()
    except Exception as exc:
        raise TaskFailure(
            f"the reference model construction failed: {type(exc).__name__}: {exc}"
        ) from None
    return reference, init_inputs


def draw_inputs(
    task: types.ModuleType, device: torch.device, seed: int, distribution: str = "normal"
) -> list[Any]:
    """``get_inputs()`` under ``seed`` with ``device`` as the default device (so a GPU draws
    its own random inputs instead of the CPU drawing and copying them: seconds per trial at
    GPU sizes), moved to ``device``, redrawn from ``distribution``.

    To reproduce a trial's inputs: ``torch.manual_seed(seed)`` then ``get_inputs()`` inside
    ``with torch.device(device):``.
    """
    try:
        torch.manual_seed(seed)
        with device:
            drawn = task.get_inputs()
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in drawn]
        return [_redistribute(x, distribution) for x in inputs]
    except TaskFailure:
        raise
    except Exception as exc:
        raise TaskFailure(
            f"the reference get_inputs() failed: {type(exc).__name__}: {exc}"
        ) from None


def _redistribute(x: Any, distribution: str) -> Any:
    """Floating inputs drawn from another value distribution (same shape, dtype, device).

    ``normal`` leaves get_inputs' values; ``heavy_tailed`` draws Student-t with 2 degrees of
    freedom (rare huge values); ``large`` scales by 1000; ``tiny`` by 1e-3.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or distribution == "normal":
        return x
    if distribution == "large":
        return x * 1e3
    if distribution == "tiny":
        return x * 1e-3
    if distribution == "heavy_tailed":
        return student_t2_like(x)
    raise TaskFailure(f"unknown input distribution {distribution!r}")


HEAVY_TAILED_CHUNK = 1 << 24
"""`student_t2_like` draws this many elements at a time (64 MiB of float32 each buffer)."""


def student_t2_like(x: torch.Tensor) -> torch.Tensor:
    """Student-t with 2 degrees of freedom, in ``x``'s shape, dtype and device (contiguous):

        T = Z / sqrt(V / 2),  Z ~ N(0, 1),  V ~ chi2(2);   V / 2 ~ Exp(1),  so  T = Z * E^(-1/2)

    drawn in float32 from the global RNG (seeded from the trial's seed: reproducible),
    ``HEAVY_TAILED_CHUNK`` elements at a time, E at least float32's smallest normal number (T
    stays finite). Drawing adds two chunks to the result: ``torch.distributions.StudentT``
    kept about four temporaries of the input's size alive, and a correct candidate on a task
    whose input is a tenth of the GPU was judged a ``runtime_error`` when the reference ran out
    of memory drawing them (H100, 2026-12-07)."""
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    flat = out.view(-1)
    tiny = torch.finfo(torch.float32).tiny
    for start in range(0, flat.numel(), HEAVY_TAILED_CHUNK):
        count = min(HEAVY_TAILED_CHUNK, flat.numel() - start)
        e = torch.empty(count, dtype=torch.float32, device=x.device).exponential_()
        z = torch.empty_like(e).normal_()
        flat[start : start + count].copy_(z.mul_(e.clamp_(min=tiny).rsqrt_()))
        del e, z
    return out


def as_tensors(output: Any) -> list[torch.Tensor] | None:
    """A forward's output as a list of tensors, or None if it is not a tensor or a tuple."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, list | tuple) and all(isinstance(o, torch.Tensor) for o in output):
        return list(output)
    return None


def tensor_bytes(value: Any) -> int:
    """Bytes held by the tensors in a (nested) list or tuple."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(tensor_bytes(v) for v in value)
    return 0


class BoundedCache:
    """A least-recently-used mapping bounded by the tensor bytes of its values.

    Workers keep what every job of a task needs again (its inputs for each seed, its expected
    outputs) instead of drawing and computing them anew: drawing a 4096 x 4096 input on the CPU
    alone costs about 0.15 s. Several tasks' entries stay while they fit (a lane serves the
    tasks of an RL step in turn); the least recently used go first.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._groups: dict[str, str] = {}  # key -> group (the task it belongs to)
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()
        self._groups.clear()
        self._bytes = 0

    @staticmethod
    def key(*parts: Any) -> str:
        return json.dumps(parts, sort_keys=True, default=str)

    def get(self, key: str) -> Any | None:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key][0]

    def put(self, key: str, value: Any, group: str = "") -> None:
        size = tensor_bytes(value)
        if size > self.max_bytes:
            return
        if key in self._items:
            self._bytes -= self._items.pop(key)[1]
        self._items[key] = (value, size)
        self._groups[key] = group
        self._bytes += size
        while self._bytes > self.max_bytes:
            evicted, (_, freed) = self._items.popitem(last=False)
            self._groups.pop(evicted, None)
            self._bytes -= freed


def cache_budget(device: torch.device) -> int:
    """Bytes a worker may keep cached: on a GPU 4 GiB or ``1 / (10 * (lanes + 1))`` of its
    memory, whichever is less (a twentieth with one lane; with 8 lanes' 16 workers, 1.5 GiB
    each on an H200); 512 MiB of host memory."""
    if device.type != "cuda":
        return 512 << 20
    total = torch.cuda.get_device_properties(device).total_memory
    lanes = max(1, int(os.environ.get("CUDA_AGENT_LANES", "1") or 1))
    return min(4 << 30, total // (10 * (lanes + 1)))


def is_out_of_memory(exc: BaseException) -> bool:
    """A CUDA out-of-memory error, from PyTorch's allocator or from an extension (also when
    wrapped, as a ``TaskFailure`` carrying its message)."""
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc)


def trim_reserve(device: torch.device, slack: int = 1 << 30) -> bool:
    """Return the allocator's reserve to the GPU when it holds more than ``slack`` bytes
    unused: the other worker of the lane allocates from the same GPU. True if it did. A check
    of a task with GB-sized tensors frees its temporaries into PyTorch's cache, not to the GPU:
    on an H100 (2026-12-06) a candidate worker kept 45 GB reserved (its peak: the sandbox's
    input copies, the determinism rerun, the outputs) while the reference worker drew the next
    check's inputs beside it, ran out of memory, and the correct candidate was judged the
    reference's failure."""
    if device.type != "cuda" or not torch.cuda.is_initialized():
        return False
    if torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device) <= slack:
        return False
    torch.cuda.empty_cache()
    return True


def release_gpu_memory() -> None:
    """Give the blocks PyTorch's allocator keeps in reserve back to the GPU (the other worker
    of the slot, and the next task, may need them)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        gc.collect()
        torch.cuda.empty_cache()
