"""One short feedback text per evaluation, the way the next turn (or a human) reads it."""

from __future__ import annotations

from cuda_agent.kernel_sandbox import EvalResult

LOOP_NOTE = "Your answer was stopped: it fell into a loop, repeating the same text."
"""Said before the verdict of an answer the policy ended for repeating itself
(``finish_reason == "repetition"``: the policy's ``repetition_stop``)."""


def feedback(
    result: EvalResult | None, truncated_at: int | None = None, looped: bool = False
) -> str:
    """``PASS``/``FAIL`` plus the reason, and one line of timings when measured.

    ``truncated_at``: the answer budget in tokens when the answer was cut by it
    (``finish_reason == "length"``); the text then says so, since a cut answer and a wrong one
    need different fixes (write less, not differently). ``looped``: the answer was ended for
    repeating itself (``finish_reason == "repetition"``); `LOOP_NOTE` comes first.
    """
    if looped:
        return f"{LOOP_NOTE} {feedback(result, truncated_at)}"
    if result is None:
        if truncated_at is not None:
            return (
                f"FAIL: the answer was cut at {truncated_at} tokens (the answer budget) before "
                "ModelNew was complete; write a shorter answer."
            )
        return "FAIL: no ```python block defining class ModelNew was found in the answer."
    text = _verdict(result)
    if truncated_at is not None:
        text += f" (the answer was cut at {truncated_at} tokens, the answer budget)"
    return text


def _verdict(result: EvalResult) -> str:
    if result.status != "ok" or result.flags:
        head = f"FAIL ({result.status}): {result.message}"
        return head if not result.flags else f"{head} [flags: {', '.join(result.flags)}]"
    if result.candidate_time_ms is None:
        return "PASS: correct (not timed)"
    parts = [f"PASS: candidate {result.candidate_time_ms:.4g} ms"]
    if result.eager_time_ms is not None:
        parts.append(
            f"eager {result.eager_time_ms:.4g} ms "
            f"({_speedup(result.speedup_vs_eager, result.speedup_vs_eager_range)})"
        )
    if result.compile_time_ms is not None:
        parts.append(
            f"torch.compile {result.compile_time_ms:.4g} ms "
            f"({_speedup(result.speedup_vs_compile, result.speedup_vs_compile_range)})"
        )
    return ", ".join(parts)


def _speedup(value: float | None, noise: tuple[float, float] | None) -> str:
    """``1.23x`` with its noise range when the two ends differ visibly."""
    if value is None:
        return "speedup unknown"
    text = f"{value:.2f}x"
    if noise is not None and f"{noise[0]:.2f}" != f"{noise[1]:.2f}":
        text += f", noise range {noise[0]:.2f}-{noise[1]:.2f}x"
    return text


def profile_lines(result: EvalResult) -> list[str]:
    """Where the time went, per kernel: device time from the profiler on a GPU, the CPU time
    of each launched kernel on the CPU backend (what the ``profile`` tool answers)."""
    shares = result.extra.get("device_time_shares")
    if isinstance(shares, dict) and shares.get("kernels"):
        lines = ["profile (device time of one forward):"]
        for name, us, kind in shares["kernels"]:
            lines.append(f"  {float(us):9.1f} us  {kind:8s} {name}")
        return lines
    by_name = result.extra.get("kernel_seconds_by_name")
    if isinstance(by_name, dict) and by_name:
        lines = ["profile (CPU time inside each kernel, all checked calls):"]
        for name, seconds in sorted(by_name.items(), key=lambda kv: -kv[1])[:8]:
            lines.append(f"  {float(seconds) * 1e3:9.3f} ms  {name}")
        return lines
    return ["profile: no per-kernel times (the kernels did not run, or checks were off)"]
