"""What a ``load_inline`` candidate costs to build: plain torch against the sandbox's build.

    python benchmarks/gpu/load_inline_cost.py OUT.json

Runs, concurrently and each with its own empty cache, the documented CUDA ``load_inline``
example (``kernel_sandbox/examples/load_inline_cuda.py``, ``-O3 --use_fast_math`` as
KernelBench candidates write it):

- ``plain``: ``torch.utils.cpp_extension.load_inline`` in a fresh build directory, as every
  peer harness calls it;
- ``sandbox``: the sandbox's CUDA backend with default settings (compile workers build the
  extension ahead of the GPU job): a miss, then the same candidate again in the same worker,
  then in a new sandbox (new processes): the hits.

(The 2026-11-29 figures also hold a ``sandbox_host_opt`` run, from a version of the sandbox that
dropped host-side ``-O`` flags of CUDA extensions: it saved nothing, 64.2 s against 65.7 s, and
was removed.)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLE = (
    Path(__file__).resolve().parents[2]
    / "packages/kernel_sandbox/src/cuda_agent/kernel_sandbox/examples/load_inline_cuda.py"
)


def plain() -> dict[str, float]:
    import torch  # noqa: F401  (imported before the clock starts, like a warm harness)

    source = EXAMPLE.read_text()
    from torch.utils import cpp_extension

    original = cpp_extension.load_inline

    def fresh(*args, **kwargs):
        kwargs["build_directory"] = tempfile.mkdtemp()
        return original(*args, **kwargs)

    cpp_extension.load_inline = fresh
    started = time.perf_counter()
    exec(compile(source, "model_new.py", "exec"), {"__name__": "model_new"})
    return {"build_s": time.perf_counter() - started}


def sandbox() -> dict[str, object]:
    from cuda_agent.kernel_sandbox import Deadlines, Sandbox, SandboxConfig, builtin_tasks

    relu = next(t for t in builtin_tasks() if t.name == "relu")
    config = SandboxConfig(
        backend="cuda", workers=1, time_compile=False, deadlines=Deadlines(load=600.0)
    )
    out: dict[str, object] = {}
    with Sandbox(config) as sb:
        sb.warm_up()
        out["compile_workers"] = sb.config.compile_workers
        for label in ("miss", "hit_same_worker"):
            r = sb.evaluate(relu, EXAMPLE)
            out[label] = {"status": r.status, "build_s": r.build_seconds, "wall_s": r.wall_seconds}
    with Sandbox(config) as sb:
        sb.warm_up()
        r = sb.evaluate(relu, EXAMPLE)
        out["hit_new_worker"] = {
            "status": r.status,
            "build_s": r.build_seconds,
            "wall_s": r.wall_seconds,
        }
    return out


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] in ("--plain", "--sandbox"):
        result = plain() if sys.argv[1] == "--plain" else sandbox()
        Path(sys.argv[2]).write_text(json.dumps(result))
        return
    out_path = Path(sys.argv[1])
    runs = {
        "plain": ("--plain", {}),
        "sandbox": ("--sandbox", {}),
    }
    procs = {}
    tmp = Path(tempfile.mkdtemp())
    for name, (mode, extra_env) in runs.items():
        env = {**os.environ, **extra_env, "CUDA_AGENT_CACHE": str(tmp / name / "cache")}
        env["TORCH_EXTENSIONS_DIR"] = str(tmp / name / "torch_extensions")
        procs[name] = subprocess.Popen(
            [sys.executable, __file__, mode, str(tmp / f"{name}.json")], env=env
        )
    report: dict[str, object] = {
        "benchmark": "load_inline_cost",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python benchmarks/gpu/load_inline_cost.py OUT.json",
        "note": "the runs build concurrently on one host (16 cores), each with an empty cache",
    }
    for name, proc in procs.items():
        code = proc.wait()
        path = tmp / f"{name}.json"
        report[name] = json.loads(path.read_text()) if path.exists() else {"exit_code": code}
        print(name, json.dumps(report[name]), flush=True)
    out_path.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
