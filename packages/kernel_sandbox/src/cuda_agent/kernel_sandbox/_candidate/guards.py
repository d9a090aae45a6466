"""Guard regions: writes outside a tensor's bounds, caught in the candidate worker.

A kernel that hard-codes a size, or misses the bounds check on a tail, writes past the end (or
before the start) of a buffer. The write corrupts whatever lies there, which nothing else
notices: the outputs can still be right. So every tensor a checked forward receives (its
inputs) and, up to a budget, every tensor it allocates (``torch.empty``, ``empty_like``,
``zeros``, ``clone``, ... from Python or from C++ through ``at::``) lives in a buffer with
``PAD_BYTES`` of a canary pattern on each side; after the call the pads are read back, and a
changed byte names the tensor and the side. The tensor the candidate sees has the sizes,
strides and contents it would have had, and the same alignment (the pad is a multiple of 512
bytes); only its storage is larger and starts earlier.

Reads out of bounds are not seen, nor writes farther than the pad (they may still crash the
worker, which is reported as such). Allocations are guarded only in the checks of correctness,
never while timing. Runs only in candidate workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

PAD_BYTES = 64 << 10  # per side; a multiple of every element size and of 512-byte alignment
MAX_GUARDED = 64  # allocations guarded per forward; later ones run unguarded
MIN_BUDGET_BYTES = 64 << 20  # guarded allocations kept until the check: at least this much
# aten operators whose result is a new tensor the candidate may write into.
ALLOCATORS = frozenset(
    [
        "empty",
        "empty_like",
        "empty_strided",
        "empty_permuted",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "new_zeros",
        "ones",
        "ones_like",
        "new_ones",
        "full",
        "full_like",
        "new_full",
        "clone",
        "_to_copy",
    ]
)

SALTS = 251  # distinct canaries: windows of one random sequence, shifted by 0..250 bytes
_sequences: dict[str, torch.Tensor] = {}
_patterns: dict[tuple[str, int], torch.Tensor] = {}


def _pattern(device: torch.device, salt: int) -> torch.Tensor:
    """A canary of ``PAD_BYTES`` fixed pseudo-random bytes, none 0x00 or 0xFF (so writing zeros,
    NaN or all-ones changes every byte it covers). Each ``salt`` gives another one: a kernel
    that copies one tensor's pad into another's (``out[i] = x[i]`` past both ends) changes
    the bytes it writes."""
    key = str(device)
    if key not in _sequences:
        generator = torch.Generator().manual_seed(0x5EED)
        values = torch.randint(1, 255, (PAD_BYTES + SALTS,), generator=generator, dtype=torch.uint8)
        _sequences[key] = values.to(device)
    start = salt % SALTS
    if (key, start) not in _patterns:  # a tensor of its own: aligned, for ``_intact``
        _patterns[key, start] = _sequences[key][start : start + PAD_BYTES].clone()
    return _patterns[key, start]


def _intact(side: torch.Tensor, pattern: torch.Tensor) -> bool:
    """Whether the pad ``side`` (starting on 64 bytes) still holds ``pattern``, compared 8 bytes at
    a time: ``torch.equal`` on bytes is about 15 times slower on the CPU."""
    return torch.equal(side.view(torch.int64), pattern.view(torch.int64))


@dataclass(eq=False)
class Guard:
    """One guarded tensor: ``buffer`` (flat bytes) holds a pad, the tensor's storage
    (``span`` bytes), and after it ``slack`` canary bytes (to the next multiple of 64) and a pad:
    the canary after the tensor is ``slack + PAD_BYTES`` long."""

    what: str  # "input 0", "a tensor from empty_like"
    buffer: torch.Tensor
    span: int
    pattern: torch.Tensor  # the canary in each pad
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def slack(self) -> int:
        return -self.span % 64

    def owns(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` lies in this guard's buffer (a view of the guarded tensor)."""
        return bool(
            tensor.device == self.buffer.device
            and tensor.untyped_storage().data_ptr() == self.buffer.untyped_storage().data_ptr()
        )

    def holds(self, tensor: torch.Tensor) -> bool:
        """Whether every element of ``tensor`` (one in this buffer) lies between the pads."""
        if tensor.numel() == 0:
            return True
        size = tensor.element_size()
        start = tensor.storage_offset() * size
        steps = zip(tensor.shape, tensor.stride(), strict=True)
        last = start + sum((n - 1) * s for n, s in steps) * size
        return start >= PAD_BYTES and last + size <= PAD_BYTES + self.span

    def damage(self) -> tuple[str, bool]:
        """("", False) while both pads are intact; else which side changed and how far from the
        tensor, and whether the change reaches a pad's far end (the writes may go on beyond it,
        into memory no guard covers)."""
        pattern, slack = self.pattern, self.slack
        before = self.buffer[:PAD_BYTES]
        after = self.buffer[PAD_BYTES + self.span :]
        sides: list[str] = []
        beyond = False
        if not _intact(before, pattern):
            changed = (before != pattern).nonzero()
            reach = PAD_BYTES - int(changed.min())
            beyond |= reach == PAD_BYTES
            sides.append(f"{len(changed)} bytes before its start changed, up to {reach} before it")
        if not (torch.equal(after[:slack], pattern[:slack]) and _intact(after[slack:], pattern)):
            changed = (after != torch.cat([pattern[:slack], pattern])).nonzero()
            reach = int(changed.max()) + 1
            beyond |= reach == len(after)
            sides.append(f"{len(changed)} bytes after its end changed, up to {reach} past it")
        return "; ".join(sides), beyond

    def describe(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        return f"{self.what} ({dtype}, shape {list(self.shape)})"


def guarded(tensor: torch.Tensor, what: str, salt: int = 0) -> tuple[torch.Tensor, Guard]:
    """A copy of ``tensor`` (its whole storage, so the same sizes, strides and offset) in a
    buffer with a canary pad on each side (the canary of ``salt``), and its ``Guard``."""
    storage = tensor.untyped_storage()
    span = storage.nbytes()
    device = tensor.device
    pattern = _pattern(device, salt)
    slack = -span % 64
    buffer = torch.empty(2 * PAD_BYTES + span + slack, dtype=torch.uint8, device=device)
    buffer[:PAD_BYTES].copy_(pattern)
    buffer[PAD_BYTES + span : PAD_BYTES + span + slack].copy_(pattern[:slack])
    buffer[PAD_BYTES + span + slack :].copy_(pattern)
    if span:
        raw = torch.empty(0, dtype=torch.uint8, device=device).set_(storage)
        buffer[PAD_BYTES : PAD_BYTES + span].copy_(raw)
    offset = PAD_BYTES // tensor.element_size() + tensor.storage_offset()
    copy = torch.empty(0, dtype=tensor.dtype, device=device).set_(
        buffer.untyped_storage(), offset, tensor.size(), tensor.stride()
    )
    return copy, Guard(what, buffer, span, pattern, tensor.dtype, tuple(tensor.shape))


def guardable(tensor: Any, device: torch.device) -> bool:
    """A plain, materialised, strided tensor on ``device``'s kind of device."""
    return (
        type(tensor) is torch.Tensor
        and tensor.layout == torch.strided
        and not tensor.is_meta
        and not tensor.is_quantized
        and not tensor.requires_grad
        and tensor.device.type == device.type
    )


def guard_inputs(pristine: list[Any], device: torch.device) -> tuple[list[Any], list[Guard]]:
    """Guarded copies of a check's pristine inputs (what a clone would give the candidate: a
    tensor that shares its storage with others is cloned first, so it gets a storage of its
    own), and their guards."""
    inputs: list[Any] = []
    guards: list[Guard] = []
    for i, x in enumerate(pristine):
        if not isinstance(x, torch.Tensor):
            inputs.append(x)
            continue
        if not guardable(x, device):
            inputs.append(x.clone())
            continue
        compact = x.storage_offset() == 0 and x.untyped_storage().nbytes() == (
            x.numel() * x.element_size()
        )
        copy, guard = guarded(x if compact else x.clone(), f"input {i}", salt=2 * i + 1)
        inputs.append(copy)
        guards.append(guard)
    return inputs, guards


class AllocationGuards(TorchDispatchMode):
    """While active, replaces each new tensor (``ALLOCATORS``) on ``device`` with a guarded copy,
    up to ``MAX_GUARDED`` of them and ``budget`` bytes: the guards keep their buffers alive until
    they are checked, so a forward's freed temporaries stay allocated until then.

    A guarded tensor that an operator resizes in place (``resize_``, an ``out=`` argument) may
    grow into its pad, where its storage has room: that guard is dropped, since the tensor's own
    writes land there now. Entered below ``runtime_checks.OpRecorder`` (before it): the recorder
    sees the candidate's operators only, and the copies count as the time of the allocation
    that caused them."""

    def __init__(self, device: torch.device, budget: int) -> None:
        super().__init__()
        self.device = device
        self.budget = max(budget, MIN_BUDGET_BYTES)
        self.held = 0
        self.guards: list[Guard] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        written = _written(func, args, kwargs)
        if written:  # writes into tensors it was given: none is new
            if self.guards:
                self._forget_grown(written)
            return out
        name = func.overloadpacket.__name__
        if (
            name not in ALLOCATORS
            or len(self.guards) >= MAX_GUARDED
            or not guardable(out, self.device)
        ):
            return out
        span = out.untyped_storage().nbytes()
        if self.held + span > self.budget:
            return out
        copy, guard = guarded(out, f"a tensor from {name}", salt=2 * len(self.guards) + 2)
        self.held += span
        self.guards.append(guard)
        return copy

    def _forget_grown(self, tensors: list[torch.Tensor]) -> None:
        for tensor in tensors:
            for guard in self.guards:
                if guard.owns(tensor) and not guard.holds(tensor):
                    self.guards.remove(guard)
                    break


def _written(func: Any, args: Any, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors an operator writes into (``self`` of an in-place one, ``out=`` arguments)."""
    found: list[torch.Tensor] = []
    for index, arg in enumerate(func._schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = kwargs.get(arg.name) if arg.kwarg_only or index >= len(args) else args[index]
        values = value if isinstance(value, list | tuple) else [value]
        found.extend(v for v in values if isinstance(v, torch.Tensor))
    return found


def first_damage(
    input_guards: list[Guard], allocations: list[Guard], outputs: list[torch.Tensor]
) -> tuple[str, bool]:
    """A message naming the first guarded tensor whose pads changed ("" when none did), and
    whether those writes reached a pad's far end; an allocation the forward returned is named
    as that output."""
    for guard in [*input_guards, *allocations]:
        damage, beyond = guard.damage()
        if not damage:
            continue
        what = guard.describe()
        returned = [i for i, out in enumerate(outputs) if guard.owns(out)]
        if returned:
            what = f"output {returned[0]}, {what}"
        message = (
            f"ModelNew wrote outside the bounds of {what}: {damage}. A kernel indexes beyond "
            "the tensor (a size hard-coded from the visible problem, or no bounds check on the "
            "tail?): take every size from the tensors it is given"
        )
        return message, beyond
    return "", False
