"""The heavy-tailed input check's draw (`student_t2_like`): Student-t with 2 degrees of freedom,
reproducible from the trial's seed, finite, in the input's shape and dtype, and lean: drawing
it holds two chunks beside the result, not temporaries of the input's size."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from cuda_agent.kernel_sandbox._shared import task_runtime
from cuda_agent.kernel_sandbox._shared.task_runtime import student_t2_like


def _t2_cdf(t: torch.Tensor) -> torch.Tensor:
    """Student-t's CDF with 2 degrees of freedom, closed form: 1/2 + t / (2 sqrt(2 + t^2))."""
    return 0.5 + t / (2 * torch.sqrt(2 + t * t))


@pytest.mark.parametrize("chunk", [task_runtime.HEAVY_TAILED_CHUNK, 4096], ids=["one", "many"])
def test_the_draw_is_student_t_with_two_degrees_of_freedom(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """Kolmogorov-Smirnov distance to the t(2) CDF over 100,000 draws: about 0.003 by chance
    (0.0062 is the 0.1% critical value); a normal draw is at 0.05, a Cauchy (t(1)) at 0.04.
    In many chunks too (every element drawn, none left as allocated)."""
    monkeypatch.setattr(task_runtime, "HEAVY_TAILED_CHUNK", chunk)
    torch.manual_seed(0)
    draws = student_t2_like(torch.zeros(100_000)).double().sort().values
    n = draws.numel()
    cdf = _t2_cdf(draws)
    upper = torch.arange(1, n + 1, dtype=torch.float64) / n
    distance = max(float((upper - cdf).max()), float((cdf - (upper - 1 / n)).max()))
    assert distance < 0.0062, distance
    normal = torch.randn(n, dtype=torch.float64).sort().values
    assert float((upper - _t2_cdf(normal)).abs().max()) > 0.02  # the check can fail


def test_the_draw_keeps_shape_dtype_and_is_finite_and_reproducible() -> None:
    x = torch.zeros(6, 50, dtype=torch.float16).t()  # a transposed view: not contiguous
    torch.manual_seed(3)
    a = student_t2_like(x)
    torch.manual_seed(3)
    b = student_t2_like(x)
    assert a.shape == x.shape and a.dtype == torch.float16 and a.is_contiguous()
    assert torch.equal(a, b)
    assert bool(torch.isfinite(student_t2_like(torch.zeros(1 << 20))).all())
    assert student_t2_like(torch.zeros(())).shape == ()
    assert student_t2_like(torch.zeros(0, 3)).shape == (0, 3)
    torch.manual_seed(3)
    assert not torch.equal(student_t2_like(x), a * 0), "the draw is all zeros"


def test_heavy_tails_reach_far_beyond_normal_inputs() -> None:
    """What the check is for: rare huge values (P(|T| > 30) = 1.1e-3 for t(2), 0 for normal)."""
    torch.manual_seed(0)
    big = float((student_t2_like(torch.zeros(200_000)).abs() > 30).double().mean())
    want = 1 - 2 * (float(_t2_cdf(torch.tensor(30.0, dtype=torch.float64))) - 0.5)
    assert math.isclose(big, want, rel_tol=0.2), (big, want)


def test_drawing_a_heavy_tailed_input_holds_two_chunks_beside_the_result() -> None:
    """On the CPU, in a process of its own (its peak resident set): a 256 MiB input's draw
    may add the result and two 64 MiB chunks; ``torch.distributions.StudentT`` added about
    four times the input."""
    code = (
        "import resource, torch\n"
        "from cuda_agent.kernel_sandbox._shared.task_runtime import student_t2_like\n"
        "x = torch.ones(1 << 26)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "out = student_t2_like(x)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    extra = int(done.stdout.split()[-1]) * 1024  # (kB on Linux)
    assert extra <= (256 << 20) + 2 * (64 << 20) + (32 << 20), extra / 2**20


@pytest.mark.gpu
def test_drawing_a_heavy_tailed_input_on_the_gpu_holds_two_chunks_beside_the_result() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    x = torch.zeros(1 << 28, device="cuda")  # 1 GiB
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = student_t2_like(x)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before
    chunk_bytes = task_runtime.HEAVY_TAILED_CHUNK * 4
    assert extra <= out.numel() * 4 + 2 * chunk_bytes + (1 << 20), extra / 2**30
