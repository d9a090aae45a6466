"""Tolerance presets: ``SandboxConfig(tolerance=...)``, with explicit numbers over them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cuda_agent.kernel_sandbox import TOLERANCE_PRESETS, Sandbox, SandboxConfig, builtin_tasks


def _resolved(**kwargs: object) -> SandboxConfig:
    return SandboxConfig(backend="cpu", **kwargs).resolved()  # type: ignore[arg-type]


def test_presets_resolve_to_their_numbers():
    default = _resolved()
    assert default.tolerance == "cuda-agent"
    assert (default.atol, default.rtol, dict(default.dtype_tolerances)) == (1e-2, 1e-2, {})
    kernelbench = _resolved(tolerance="kernelbench")
    assert (kernelbench.atol, kernelbench.rtol) == (1e-4, 1e-4)
    # KernelBench's half-precision tolerance, per output dtype
    assert kernelbench.dtype_tolerances == {"float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2)}
    assert set(TOLERANCE_PRESETS) == {"cuda-agent", "kernelbench"}


def test_explicit_numbers_override_the_preset():
    # What code that passed atol= or rtol= before the presets got, it still gets.
    assert (_resolved(atol=1e-3).atol, _resolved(atol=1e-3).rtol) == (1e-3, 1e-2)
    assert (_resolved(rtol=0.0).atol, _resolved(rtol=0.0).rtol) == (1e-2, 0.0)
    mixed = _resolved(tolerance="kernelbench", atol=0.5, dtype_tolerances={"float16": (0.1, 0.2)})
    assert (mixed.atol, mixed.rtol) == (0.5, 1e-4)
    assert mixed.dtype_tolerances == {"float16": (0.1, 0.2), "bfloat16": (1e-2, 1e-2)}
    # Resolving is idempotent, and a preset chosen by replace() on an unresolved config counts.
    assert mixed.resolved() == mixed
    assert replace(SandboxConfig(backend="cpu"), tolerance="kernelbench").resolved().atol == 1e-4


def test_unknown_preset_and_negative_numbers_are_refused():
    with pytest.raises(ValueError, match="'cuda-agent', 'kernelbench'"):
        SandboxConfig(tolerance="torchbench")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="atol must be >= 0"):
        SandboxConfig(atol=-1e-3)


def test_the_sandbox_judges_at_the_preset():
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    off_by = relu.solutions["cpu"].replace("0.f ? x[i] : 0.f", "0.f ? x[i] + 1e-3f : 1e-3f")
    config = SandboxConfig(backend="cpu", workers=1, repeats=5, tolerance="kernelbench")
    with Sandbox(config) as sandbox:
        result = sandbox.evaluate(relu, off_by)  # within 1e-2 (the default), not 1e-4
    assert result.status == "incorrect"
    assert "atol=0.0001, rtol=0.0001" in result.message
