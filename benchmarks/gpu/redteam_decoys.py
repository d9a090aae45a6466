"""The decoy red-team cases on the GPU (``library_decoy_cuda``, ``cupy_decoy``), with the
static checks on and off, and the honest built-in relu beside them, on one pool each.

    python benchmarks/gpu/redteam_decoys.py OUT.json

Writes each verdict with the device-time shares and the host time split behind it.
"""

import json
import sys
import tomllib
from pathlib import Path

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks

R = Path("packages/kernel_sandbox/redteam")
cases = [
    c
    for c in tomllib.loads((R / "cases.toml").read_text())["case"]
    if "decoy" in c["name"] and "cuda" in c.get("backends", [])
]
relu = next(t for t in builtin_tasks() if t.name == "relu")
out = {}
for static in (True, False):
    with Sandbox(
        SandboxConfig(backend="cuda", workers=1, time_compile=False, static_checks=static)
    ) as sb:
        for c in cases:
            r = sb.evaluate(relu, (R / "cases" / f"{c['name']}.py").read_text())
            out[f"{c['name']} static={static}"] = [
                r.status,
                list(r.flags),
                r.message[:200],
                r.extra.get("device_time_shares"),
                r.extra.get("host_time_split"),
            ]
        h = sb.evaluate(relu, relu.solutions["cuda"])
        out[f"honest static={static}"] = [
            h.status,
            list(h.flags),
            h.message[:100],
            h.extra.get("device_time_shares"),
            h.extra.get("host_time_split"),
            h.extra.get("outputs_via"),
        ]
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
for k, v in out.items():
    print(k, v[:3])
