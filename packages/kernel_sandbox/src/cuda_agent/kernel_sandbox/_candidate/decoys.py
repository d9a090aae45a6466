"""Decoy kernels: a candidate that launches a kernel of its own for show and computes the
answer somewhere else (NumPy or CuPy, a library called from its extension, plain Python).

The launch counter sees a launch and the operator recorder sees no PyTorch compute, so two
measurements judge where the work happened. Both run in the candidate worker, on the forwards
of the correctness checks, and only when custom kernels are required.

**Host time** (both backends). Each checked forward's CPU time on the calling thread
(``time.thread_time``: time the process spends preempted by others does not count) is split
into ``kernels`` (inside ``cpu_kernel`` / ``cuda_kernel`` calls, extension functions and Triton
launches; ``launch.kernel_seconds``), ``ops`` (inside the PyTorch operators a forward may run:
allocation, views, copies; ``OpRecorder.seconds``) and the rest::

    outside = total - kernels - ops - CALL_ALLOWANCE_S * calls

where ``calls`` counts the operator calls and kernel launches (each costs the interpreter and
the recorder a few microseconds outside the timed parts: about 7 us per operator and 4 us per
launch on the 2-core CI machine). With honest kernels ``outside`` is the rest of the
interpreter's overhead, tens of microseconds; with a library computing, it is the computation.
Judged on each figure's least measure over the checked forwards: ``outside`` of the forward
with the least of it (first calls pay one-time costs), and ``kernels``, the least time in
kernels of any forward::

    limit = OUTSIDE_FLOOR_S + min(LAUNCH_ALLOWANCE_S * launches, work)

where ``launches`` counts that forward's kernel launches and ``work`` is what its own kernels
did: their time on the CPU backend (``kernels``, their whole run on the calling thread), their
device time on CUDA (one profiled forward, ``own`` below; 0 when not measured). Rejected when
``outside > limit`` and ``outside > OUTSIDE_SHARE * (outside + kernels + CALL_ALLOWANCE_S *
calls)`` and, where the kernels run on the calling thread (the CPU backend),
``outside > KERNEL_RATIO * kernels``.

The floor is a tolerance, and what it lets through is said here: host computation under
``OUTSIDE_FLOOR_S`` a forward goes unseen (it keeps honest kernels on tiny property-test sizes,
all interpreter overhead, clear of the check). NumPy's ``relu`` over the relu task's CPU size
(64 x 4,096 floats) takes 0.13-0.17 ms with NumPy 2.4 on a 2-core machine, at the floor, so the
red-team case ``library_decoy`` is judged at 512 x 4,096 (about 1 ms of NumPy). Such a
candidate is no faster than the library it calls, which its speedup then shows.

Why the least of each, and not one forward's figures: load only ever adds CPU time (a thread
preempted in the middle of a call comes back to cold caches, and the refill is its CPU time;
under a hypervisor, stolen time can be too), and it adds it to whatever was running. A decoy's
show kernel takes about 8 us; on a busy machine one of its calls measured 97 us (over 200
forwards of the NumPy ``relu`` decoy, 2 cores, six CPU and memory hogs beside it). Since load
only raises ``outside``, the one way it can turn a rejection into ``ok`` is through the
judged forward's ``kernels``: it raises the limit, the share's denominator and, at 60 us
against that decoy's 500 us outside, the ratio's bound. Judged on one forward's figures, such
a call landing in the forward with the least ``outside`` lets the decoy through (issue 30 saw
the decoy ``ok`` once, in a full test run on a busy 2-core machine). The least measure of
each figure is the one least disturbed; it moves nothing for honest kernels, which do their
work in every forward (the built-in suite's CPU solutions stay ``ok`` beside four CPU and two
memory hogs on 2 cores).

The launch allowance is the host code every launch runs besides the timed driver call: the
candidate's Python around it and the launcher's argument conversion (kept outside ``kernels``
on purpose: a tensor subclass's ``data_ptr`` or ``is_contiguous`` can run any Python). One
launch of the built-in GEMM (18 arguments) with its wrapper costs 15 us of it on an idle 2-core
machine like CI's (the driver call stubbed). On the loaded H200 (4 compile workers and the
reference worker busy on 16 cores) the built-in ``mlp``, two such launches, spent 0.15 ms
outside its kernels, 77% and 80% of its own time (``results/2026-12-02-h200-issue19``): over
the floor alone, so rejected, though its forward runs 1.04 ms on the device
(``results/2026-11-29-h200``, ``solutions_rewrite.json``). Its limit is now 0.15 + 2 x 0.1 =
0.35 ms (100 us a launch: about three times what one cost at that load, 2.2 times its idle 15
us). The allowance is capped by ``work`` so that launches that do nothing buy nothing: NumPy's
``library_decoy_cuda`` spent 21.5 ms outside with 0.8 us of own device time (limit 0.15 ms, 140
times less); padded with 500 empty launches it would gain only their own device time, about a
microsecond each. What the allowance does let through: host computation of up to 100 us a
launch, hidden behind launches whose kernels really keep the device busy as long; such a
candidate is slower than its kernels alone, which the speedup then shows. On the CPU backend
the ratio bound keeps honest small kernels: their
interpreter overhead grows with the machine's load (on the loaded 2-core CI machine an honest
``relu`` spent 0.15 ms outside its kernels, three times its unloaded figure, and was rejected),
but stays within twice their kernels' time (1.9x at most over the built-in suite), while a
decoy's kernel does no work (NumPy's ``relu`` decoy: 58x; plain Python: 3,500x). The operators'
time is left out of the share: a copy to the host waits for the device (the wait is CPU time
when the driver spins), so a decoy could otherwise dilute its share with copies, and did under
load on the H200 (57% alone, under half with six test processes sharing the GPU).

A timed evaluation about to reject on host time first measures ``SECOND_LOOK_FORWARDS`` more
forwards on the last check's inputs and judges again over all of them: an honest forward whose
every checked call landed beside a busy neighbour gets more chances at an undisturbed one (an
honest ``layernorm`` was rejected at 0.20 ms against its 0.19 ms limit on the H100, in a soak
whose hanging candidates spun on the CPUs), while a decoy computes in every call.

**Device time** (CUDA). One profiled forward. Each kernel is

- ``own``: its name is an identifier of the sources the candidate built (``load_inline``,
  ``load``, work directories), a ``cuda_kernel`` or a Triton kernel it launched;
- ``torch``: PyTorch's own kernels and copies (``at::native::...``, memcpy, memset), which only
  the operators the recorder allowed can have launched;
- ``library``: cuBLAS, cuDNN, CUTLASS and the like: the candidate's only when
  ``SandboxConfig.allowed_torch_ops`` lets it call a library operator;
- ``foreign``: everything else (CuPy's kernels, kernels ``torch.compile`` generated).

Rejected when foreign kernels (and library ones not allowed) take at least
``FOREIGN_SHARE`` of the device time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from ..launch import IDENTIFIER

OUTSIDE_FLOOR_S = 150e-6
OUTSIDE_SHARE = 0.5
CALL_ALLOWANCE_S = 3e-6
LAUNCH_ALLOWANCE_S = 100e-6
KERNEL_RATIO = 10.0
FOREIGN_SHARE = 0.2
SECOND_LOOK_FORWARDS = 20  # more forwards measured before a host-time rejection


@dataclass(frozen=True)
class HostSplit:
    """One forward's CPU time on the calling thread, in seconds."""

    total: float
    kernels: float
    ops: float
    calls: int = 0  # operator calls and kernel launches
    launches: int = 0  # kernel launches (of ``calls``)

    @property
    def outside(self) -> float:
        # Operators called inside an extension function are timed twice: never below zero.
        timed = self.kernels + self.ops + CALL_ALLOWANCE_S * self.calls
        return max(0.0, self.total - timed)


def host_verdict(
    splits: Iterable[HostSplit], kernels_on_host: bool = False, device_work_s: float = 0.0
) -> tuple[dict[str, float], str]:
    """(report, message): the forward with the least time outside kernels and operators, and
    why that is a decoy ("" when it is not). ``kernels_on_host``: the kernels ran on the
    calling thread (the CPU backend), so their time is their work (``KERNEL_RATIO``).
    ``device_work_s``: the device time of the candidate's own kernels in one forward (CUDA),
    the work its launches' allowance is capped by.

    Each figure is its least measure over the forwards (load only adds CPU time): the least
    time outside, and the least time in kernels, which may come from another forward."""
    splits = list(splits)
    if not splits:
        return {}, ""
    best = min(splits, key=lambda s: s.outside)
    kernels = min(s.kernels for s in splits)
    work = kernels if kernels_on_host else device_work_s
    limit = OUTSIDE_FLOOR_S + min(LAUNCH_ALLOWANCE_S * best.launches, max(0.0, work))
    report = {
        "total_s": best.total,
        "kernels_s": best.kernels,
        "least_kernels_s": kernels,
        "ops_s": best.ops,
        "calls": best.calls,
        "launches": best.launches,
        "outside_s": best.outside,
        "limit_s": limit,
    }
    # The forward's time less the allowed operators', with its kernels at their least.
    own = best.outside + kernels + CALL_ALLOWANCE_S * best.calls
    idle_kernels = not kernels_on_host or best.outside > KERNEL_RATIO * kernels
    if best.outside > limit and best.outside > OUTSIDE_SHARE * own and idle_kernels:
        share = best.outside / own
        return report, (
            f"ModelNew.forward spent {best.outside * 1e3:.2f} ms outside its kernels "
            f"({share:.0%} of its time apart from PyTorch's allocation and copy operators; "
            f"{best.launches} launches allow {limit * 1e3:.2f} ms): the answer must be computed "
            "in the kernels it launches, not by another library or in Python"
        )
    return report, ""


# ------------------------------------------------------------------------------ device time
_COPIES = ("Memcpy", "Memset")
_TORCH = ("at::", "at_cuda_detail", "c10::", "native::")
_LIBRARY = (
    "cublas",
    "cudnn",
    "cutlass",
    "cutensor",
    "cufft",
    "cusparse",
    "gemm",
    "gemv",
    "xmma",
    "nvjet",
    "magma",
    "sm80_",
    "sm90_",
    "sm100_",
    "ampere_",
    "hopper_",
)
_TEMPLATE = re.compile(r"<[^<>]*>")


def base_name(kernel: str) -> str:
    """The function name in a (demangled) kernel name: ``void ns::relu<float>(float*, int)``
    gives ``relu``."""
    text = kernel.replace("(anonymous namespace)", "anonymous")
    while True:
        shorter = _TEMPLATE.sub("", text)
        if shorter == text:
            break
        text = shorter
    words = IDENTIFIER.findall(text.split("(")[0])
    return words[-1] if words else ""


def classify(kernel: str, own: frozenset[str] | set[str]) -> str:
    """``own``, ``torch``, ``library`` or ``foreign`` (see the module docstring)."""
    if kernel.startswith(_COPIES):
        return "torch"
    if base_name(kernel) in own:
        return "own"
    if any(mark in kernel for mark in _TORCH):
        return "torch"
    lowered = kernel.lower()
    if any(mark in lowered for mark in _LIBRARY):
        return "library"
    return "foreign"


def device_time_shares(
    call: Callable[[], Any], device: torch.device, own: Iterable[str]
) -> dict[str, Any] | None:
    """Shares of one ``call()``'s device time by kind of kernel, and the foreign kernels that
    took the most; None when the profiler cannot measure it."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    names = frozenset(own)
    spent: dict[str, float] = {"own": 0.0, "torch": 0.0, "library": 0.0, "foreign": 0.0}
    others: dict[str, float] = {}
    kernels: dict[str, list[Any]] = {}  # name -> [device us, kind]
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.no_grad():
            call()
            torch.cuda.synchronize(device)
        for event in prof.events():
            if getattr(event, "device_type", None) != DeviceType.CUDA:
                continue
            duration = float(event.device_time_total or 0)
            if duration <= 0:
                continue
            kind = classify(event.key, names)
            spent[kind] += duration
            entry = kernels.setdefault(event.key, [0.0, kind])
            entry[0] += duration
            if kind in ("library", "foreign"):
                others[event.key] = others.get(event.key, 0.0) + duration
    except Exception:
        return None
    total = sum(spent.values())
    if total <= 0:
        return None
    shares: dict[str, Any] = {kind: value / total for kind, value in spent.items()}
    shares["device_us"] = total
    shares["other_kernels"] = [k[:120] for k in sorted(others, key=others.__getitem__)[::-1][:3]]
    ranked = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:8]
    shares["kernels"] = [[name[:120], us, kind] for name, (us, kind) in ranked]
    return shares


def device_verdict(shares: dict[str, Any] | None, library_allowed: bool) -> str:
    """Why the profiled forward is a decoy ("" when it is not, or was not measured)."""
    if not shares:
        return ""
    foreign = shares["foreign"] + (0.0 if library_allowed else shares["library"])
    if foreign < FOREIGN_SHARE:
        return ""
    names = ", ".join(shares["other_kernels"]) or "unnamed kernels"
    return (
        f"{foreign:.0%} of ModelNew.forward's device time was spent in kernels that did not "
        f"come from its own sources ({names}): the answer must be computed by the kernels it "
        "builds, not by another library"
    )
