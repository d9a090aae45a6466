"""One honest raw-CUDA candidate for KernelBench ``level1/19_ReLU`` at its own size
(4096 x 393216 floats: 6.4 GB a tensor), outputs on the device (CUDA IPC) against through the
host, on a warm pool with every check on.

    python benchmarks/gpu/large_outputs.py KERNELBENCH_DIR OUT.json [--paths device,host]

Target (issue 13): the evaluation in at most 5 s (33.6 s through the host before).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
from pathlib import Path

import torch

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, load_task

CANDIDATE = r'''
import torch
from torch import nn
from cuda_agent.kernel_sandbox.launch import cuda_kernel

relu = cuda_kernel(r"""
extern "C" __global__ void relu(float* out, const float* x, long long n) {
    long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (i + 3 < n) {
        float4 v = *reinterpret_cast<const float4*>(x + i);
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        *reinterpret_cast<float4*>(out + i) = v;
    } else {
        for (; i < n; ++i) out[i] = fmaxf(x[i], 0.f);
    }
}""", "relu")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu(grid=((n + 1023) // 1024,), block=(256,), args=(out, x, n))
        return out
'''


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--paths", default="device,host", help="which output paths to time")
    args = parser.parse_args()
    paths = args.paths.split(",")
    task = load_task(args.root / "level1" / "19_ReLU.py")
    report: dict[str, object] = {
        "benchmark": "large_outputs",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python benchmarks/gpu/large_outputs.py KernelBench/KernelBench OUT.json",
        "commit": os.environ.get("CUDA_AGENT_COMMIT", "unknown"),
        "gpu": torch.cuda.get_device_name(0),
        "problem": "level1/19_ReLU",
        "sizes": task.sizes,
        "target_s": 5.0,
    }
    if args.out.exists():  # another call's figures for the other path are kept
        report = {**json.loads(args.out.read_text()), **report}
    for on_device in [p == "device" for p in paths]:
        config = SandboxConfig(
            backend="cuda", workers=1, time_compile=False, device_exchange=on_device
        )
        runs = []
        with Sandbox(config) as sandbox:
            sandbox.warm_up()
            for _ in range(2):  # the first also compiles the kernel and fills the caches
                r = sandbox.evaluate(task, CANDIDATE)
                runs.append(
                    {
                        "status": r.status,
                        "message": r.message[:300],
                        "wall_s": r.wall_seconds,
                        "speedup_vs_eager": r.speedup_vs_eager,
                        "outputs_via": r.extra.get("outputs_via"),
                        "peak_gb": (r.extra.get("peak_gpu_bytes") or 0) / 1e9,
                        "seconds": r.extra.get("seconds"),
                    }
                )
                print("device" if on_device else "host", json.dumps(runs[-1]), flush=True)
        report["device" if on_device else "host"] = runs
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
