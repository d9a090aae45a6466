"""Timing in the worker: interleaved, synchronised, robust statistics.

All timed callables are measured round-robin (candidate, eager, compiled, candidate, ...), so
slow drifts of the machine (frequency, other load) hit each of them alike. On CUDA every call is
bracketed by device-wide synchronisations, and timed by CUDA events recorded on the current
stream right after an L2 flush: no call profits from the previous one's cache, work on side
streams is waited for, and while the GPU runs the flush (about 60 us) the host enqueues the
call, so the host's launch latency and its jitter (tens of microseconds in Python) stay out of
the measurement. Synchronising between the flush and the start event instead put that jitter
into every sample; A/A comparisons on the H200 were then only 93.5% within +-3%
(``benchmarks/gpu/aa_variants.py``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import perf_counter

import torch

# Bound when the worker starts, before any candidate code: a candidate that replaces
# time.perf_counter, torch.cuda.synchronize or torch.cuda.Event changes nothing here.
_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event

_L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than any current GPU's L2 (H200: 50 MB)


@dataclass(frozen=True)
class Timing:
    median_ms: float
    spread_ms: float  # half the interquartile range
    samples: int


def summarize(samples_ms: Sequence[float]) -> Timing:
    """Median and half-IQR of the samples."""
    ordered = sorted(samples_ms)
    if len(ordered) >= 4:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        spread = (q3 - q1) / 2
    else:
        spread = (ordered[-1] - ordered[0]) / 2
    return Timing(statistics.median(ordered), spread, len(ordered))


MIN_ROUNDS = 20  # before the precision rule may stop a measurement


def precise_enough(samples: Sequence[Sequence[float]], precision: float) -> bool:
    """Whether every callable's median is known to ``precision`` (relative): its standard
    error, estimated from the interquartile range as ``0.93 * IQR / sqrt(n)`` (the normal
    approximation: sigma = IQR / 1.349, SE(median) = 1.2533 * sigma / sqrt(n)), is at most
    ``precision * median``."""
    for values in samples:
        t = summarize(values)
        if (
            t.median_ms <= 0
            or 0.93 * 2 * t.spread_ms / len(values) ** 0.5 > precision * t.median_ms
        ):
            return False
    return True


def time_interleaved(
    fns: Sequence[Callable[[], object]],
    *,
    device: torch.device,
    warmup: int,
    repeats: int,
    budget_s: float,
    precision: float = 0.0,
) -> list[Timing]:
    """Time each callable ``repeats`` times, round-robin, after ``warmup`` calls of each.

    Stops early (after at least 5 rounds) when ``budget_s`` seconds have been spent, and (after
    at least ``MIN_ROUNDS``) when every median is known to ``precision`` (``precise_enough``;
    0: never): steady kernels of milliseconds need a fifth of the rounds.
    """
    for fn in fns:
        for _ in range(warmup):
            fn()
    if device.type == "cuda":
        _synchronize(device)
        measure = _cuda_timer(device)
    else:
        measure = _cpu_timer
    samples: list[list[float]] = [[] for _ in fns]
    start = perf_counter()
    for round_ in range(repeats):
        for i, fn in enumerate(fns):
            samples[i].append(measure(fn))
        if round_ >= 4 and perf_counter() - start > budget_s:
            break
        if precision > 0 and round_ + 1 >= MIN_ROUNDS and precise_enough(samples, precision):
            break
    return [summarize(s) for s in samples]


def _cpu_timer(fn: Callable[[], object]) -> float:
    t0 = perf_counter()
    fn()
    return (perf_counter() - t0) * 1e3


def _cuda_timer(device: torch.device) -> Callable[[Callable[[], object]], float]:
    flush = torch.empty(_L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
    start = _Event(enable_timing=True)
    end = _Event(enable_timing=True)

    def measure(fn: Callable[[], object]) -> float:
        _synchronize(device)  # nothing of the previous call is still running
        flush.zero_()  # keeps the GPU busy while the host enqueues the call
        start.record()
        fn()
        end.record()
        _synchronize(device)  # device-wide: work on any stream is included
        return float(start.elapsed_time(end))

    return measure
