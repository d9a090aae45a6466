"""Comparing candidate outputs with expected ones, and fingerprinting inputs.

Runs in the reference worker (``_reference/jobs.py``), which never runs candidate code; the
candidate worker only uses ``fingerprint`` to prove it drew the same inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

INF = float("inf")


def mismatch(got: torch.Tensor, want: torch.Tensor) -> str:
    """Why two outputs cannot be compared value by value ("" when they can)."""
    if got.shape != want.shape:
        return f"has shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if got.dtype != want.dtype:
        return f"has dtype {got.dtype}, expected {want.dtype}"
    if got.device != want.device:
        return f"is on {got.device}, expected {want.device}"
    if bool((~torch.isfinite(got) & torch.isfinite(want)).any()):
        return "has NaN or Inf where the reference is finite"
    return ""


def tolerance(
    dtype: torch.dtype, atol: float, rtol: float, per_dtype: dict[str, Any] | None
) -> tuple[float, float]:
    """(atol, rtol) for outputs of ``dtype``: a per-dtype override, else the defaults."""
    name = str(dtype).removeprefix("torch.")
    override = (per_dtype or {}).get(name)
    return (float(override[0]), float(override[1])) if override else (atol, rtol)


def compare(
    got: list[torch.Tensor],
    want: list[torch.Tensor],
    atol: float,
    rtol: float,
    per_dtype: dict[str, Any] | None = None,
    per_output: Sequence[Sequence[float] | None] | None = None,
) -> tuple[bool, float, float, str]:
    """(passed, max_abs_error, max_rel_error, message) for one trial.

    An element passes when ``|got - want| <= atol + rtol * |want|`` (``torch.isclose``),
    computed in float32 (float64 for float64 and integer outputs, whose values float32 cannot
    all hold); NaN passes only where the reference is NaN too. ``per_output[i]``, when given,
    is output i's (atol, rtol) over the others (the trivial-answer rule's scaled tolerance).
    """
    if len(got) != len(want):
        return False, INF, INF, f"returned {len(got)} outputs, expected {len(want)}"
    worst_abs = worst_rel = 0.0
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        problem = mismatch(g.detach(), w.detach())
        if problem:
            return False, INF, INF, f"output {i} {problem}"
        a_tol, r_tol = tolerance(w.dtype, atol, rtol, per_dtype)
        override = per_output[i] if per_output and i < len(per_output) else None
        if override:
            a_tol, r_tol = float(override[0]), float(override[1])
        work = torch.float64 if _exact(w.dtype) else torch.float32
        shape = tuple(_as_real(w.detach()).shape)
        g_flat = _as_real(g.detach()).reshape(-1)  # a copy only if not contiguous
        w_flat = _as_real(w.detach()).reshape(-1)
        n_bad, first = 0, None
        for lo in range(0, max(w_flat.numel(), 1), CHUNK):
            part = _compare_chunk(g_flat, w_flat, lo, work, a_tol, r_tol)
            worst_abs, worst_rel = max(worst_abs, part[0]), max(worst_rel, part[1])
            n_bad += part[2]
            if first is None and part[3] is not None:
                first = part[3]
        if n_bad:
            at = first or 0
            got_v, want_v = float(g_flat[at].to(work)), float(w_flat[at].to(work))
            msg = (
                f"output {i} mismatch: {n_bad}/{w_flat.numel()} elements outside "
                f"atol={a_tol}, rtol={r_tol}; first at {_unravel(at, shape)}: got {got_v:.6g}, "
                f"expected {want_v:.6g}; max abs error {worst_abs:.3g}"
            )
            return False, worst_abs, worst_rel, msg
    return True, worst_abs, worst_rel, ""


# Elements compared at a time: the temporaries of a comparison stay near 1.5 GB however large
# the output (a 6.4 GB output would otherwise need about five copies of itself).
CHUNK = 1 << 26


def _compare_chunk(
    g: torch.Tensor, w: torch.Tensor, lo: int, work: torch.dtype, a_tol: float, r_tol: float
) -> tuple[float, float, int, int | None]:
    """(max abs error, max rel error, elements outside the tolerance, flat index of the first
    of them) over elements ``lo`` to ``lo + CHUNK`` of the flat ``g`` and ``w``."""
    g64 = g[lo : lo + CHUNK].to(work)
    w64 = w[lo : lo + CHUNK].to(work)
    raw = (g64 - w64).abs()
    scale = w64.abs()
    # isclose, in fewer passes: within atol + rtol * |want|, or equal (infinities), or NaN on
    # both sides. (NaN differences fail the first test and are sorted out after.)
    ok = raw <= a_tol + r_tol * scale
    finite = w64.isfinite()
    if not bool(finite.all()):
        ok &= finite  # an infinite reference is matched only by equality
    if not bool(ok.all()):
        ok |= (g64 == w64) | (g64.isnan() & w64.isnan())
    diff = raw.nan_to_num(0.0)
    worst_abs = worst_rel = 0.0
    if diff.numel():
        worst_abs = float(diff.max())
        worst_rel = float((diff / scale.clamp_min(1e-12)).max())
    if bool(ok.all()):
        return worst_abs, worst_rel, 0, None
    bad = ~ok
    return worst_abs, worst_rel, int(bad.sum()), lo + int(bad.nonzero()[0, 0])


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size if size else 0)
        flat //= size if size else 1
    return tuple(reversed(index))


def _exact(dtype: torch.dtype) -> bool:
    """Whether comparing in float32 could lose this dtype's values."""
    return dtype in (torch.float64, torch.complex128) or not (
        dtype.is_floating_point or dtype.is_complex
    )


def _as_real(x: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(x) if x.is_complex() else x


_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _int_view(x: torch.Tensor) -> torch.Tensor | None:
    """A floating or complex tensor's bytes as integers of its element's size (so that equal
    means the same bytes), or None where no such integer type exists (complex128)."""
    as_int = _SAME_SIZE_INT.get(x.element_size())
    return x.view(as_int) if as_int is not None else None


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors of one shape and dtype hold the same bytes, element by element: a
    NaN equals the same NaN (``torch.equal`` says a NaN differs from itself, so an input
    holding one would look modified), and -0.0 differs from 0.0 (it was written)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not (a.is_floating_point() or a.is_complex()):
        return torch.equal(a, b)
    if (ia := _int_view(a)) is not None and (ib := _int_view(b)) is not None:
        return torch.equal(ia, ib)
    a, b = torch.view_as_real(a), torch.view_as_real(b)  # complex128: two float64 each
    return torch.equal(a.view(torch.int64), b.view(torch.int64))


def bits_changed(before: torch.Tensor, after: torch.Tensor) -> str:
    """Which elements of a tensor changed, for a message: how many (of how many), and the
    first, with its value before and after ("" when they could not be counted, for want of
    memory say). For tensors of one shape and dtype that ``same_bits`` says differ."""
    try:
        was_bits, now_bits = _int_view(before), _int_view(after)
        if (
            was_bits is None
            or now_bits is None
            or not (before.is_floating_point() or before.is_complex())
        ):
            changed = (before != after).reshape(-1)
        else:
            changed = (was_bits != now_bits).reshape(-1)
        count = int(changed.sum())
        first = int(changed.to(torch.uint8).argmax())  # (flat index in logical order)
        was, now = before.reshape(-1)[first].item(), after.reshape(-1)[first].item()
    except (RuntimeError, ValueError):  # out of memory, an unviewable dtype
        return ""
    return f"{count} of {before.numel()} elements changed, the first at {first}: {was!r} -> {now!r}"


def fingerprint(inputs: list[Any]) -> list[Any]:
    """A cheap summary of a list of inputs (shape, dtype, the sum and the sum of squares per
    tensor, the value of anything else) that two processes drawing the same inputs agree on."""
    out: list[Any] = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            v = x.detach()
            if v.is_complex():
                v = torch.view_as_real(v)
            flat, total, squares = v.reshape(-1), 0.0, 0.0
            for lo in range(0, flat.numel(), CHUNK):  # float64 copies of a chunk at a time
                part = flat[lo : lo + CHUNK].double().nan_to_num(0.0, 1e300, -1e300)
                total += float(part.sum())
                squares += float(part.square().sum())
            out.append([list(x.shape), str(x.dtype), total, squares])
        elif isinstance(x, bool | int | float | str) or x is None:
            out.append(x)
        else:
            out.append(type(x).__name__)
    return out


def same_fingerprint(a: list[Any], b: list[Any]) -> bool:
    """Whether two fingerprints match (sums to a relative 1e-9: thread counts may differ)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, list) and isinstance(y, list) and len(x) == len(y) == 4:
            if x[:2] != y[:2]:
                return False
            for p, q in zip(x[2:], y[2:], strict=True):
                if abs(p - q) > 1e-9 * max(1.0, abs(p), abs(q)):
                    return False
        elif x != y:
            return False
    return True
