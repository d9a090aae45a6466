"""Host-side cost of one kernel launch: PyTorch op vs our launcher vs CuPy's own launch path.

    python benchmarks/gpu/launch_overhead.py OUT.json

Each figure is the median over 7 batches of 2000 back-to-back launches of a tiny kernel
(256 threads, one block), divided by 2000: it is what a candidate pays per launch on the CPU.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import sys
import time

import cupy
import torch

from cuda_agent.kernel_sandbox.launch import cuda_kernel

SOURCE = r"""
extern "C" __global__ void neg(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = -x[i];
}
"""


def per_launch_us(fn, launches: int = 2000, batches: int = 7) -> float:
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(launches):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / launches * 1e6)
    return statistics.median(samples)


def main() -> None:
    x = torch.randn(256, device="cuda")
    out = torch.empty_like(x)
    ours = cuda_kernel(SOURCE, "neg")
    raw = cupy.RawKernel(SOURCE, "neg")
    cx, cout = cupy.asarray(x), cupy.asarray(out)
    n = x.numel()
    figures = {
        "torch_neg_out_us": per_launch_us(lambda: torch.neg(x, out=out)),
        "cuda_agent_launcher_us": per_launch_us(
            lambda: ours(grid=(1,), block=(256,), args=(out, x, n))
        ),
        "cupy_rawkernel_us": per_launch_us(lambda: raw((1,), (256,), (cout, cx, cupy.int64(n)))),
    }
    assert torch.equal(out, -x)
    report = {
        "benchmark": "launch_overhead",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python benchmarks/gpu/launch_overhead.py OUT.json",
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cupy": cupy.__version__,
        **figures,
    }
    print(json.dumps(report, indent=2))
    with open(sys.argv[1], "w") as fh:
        json.dump(report, fh, indent=2)


if __name__ == "__main__":
    main()
