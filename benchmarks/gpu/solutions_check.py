"""Check and time every built-in CUDA solution in the sandbox, at GPU sizes and at odd sizes.

    python benchmarks/gpu/solutions_check.py OUT.json [task ...]

Per task: the sandbox verdict and speedups at the task's GPU sizes (5 correctness trials against
the fp32 eager reference, atol = rtol = 1e-2, then interleaved timing), and a correctness-only
verdict at odd sizes (every size >= 16 shrunk to n // 4 + 3), which exercises the scalar
tails and partial tiles. Writes JSON as it goes (OUT.json.partial survives a cut-short run).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from pathlib import Path

import torch

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks


def odd_sizes(sizes: dict[str, int]) -> dict[str, int]:
    return {k: (v // 4 + 3 if v >= 16 else v) for k, v in sizes.items()}


def back_to_back_us(task, calls: int = 20) -> dict[str, float]:
    """Per-call time of `calls` back-to-back forwards (launches overlap the GPU work, so this is
    about the kernels' own time), solution vs eager, in the driver process."""
    import types

    def load(source: str, label: str) -> types.ModuleType:
        module = types.ModuleType(label)
        exec(compile(source, label, "exec"), module.__dict__)
        return module

    ref_mod = load(task.source, f"{task.name}_task")
    new_mod = load(task.solutions["cuda"], f"{task.name}_new")
    torch.manual_seed(0)
    ref = ref_mod.Model(*ref_mod.get_init_inputs()).cuda()
    new = new_mod.ModelNew(*ref_mod.get_init_inputs()).cuda()
    new.load_state_dict(ref.state_dict())
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref_mod.get_inputs()]
    figures = {}
    with torch.no_grad():
        for label, model in (("ours_us", new), ("eager_us", ref)):
            for _ in range(3):
                model(*inputs)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                model(*inputs)
            end.record()
            torch.cuda.synchronize()
            figures[label] = start.elapsed_time(end) * 1e3 / calls
    return figures


def main() -> None:
    out = Path(sys.argv[1])
    wanted = set(sys.argv[2:])
    tasks = [t for t in builtin_tasks() if not wanted or t.name in wanted]
    rows = []
    started = time.perf_counter()
    with Sandbox(SandboxConfig(backend="cuda", workers=1)) as sandbox:
        sandbox.warm_up()
        for task in tasks:
            src = task.solutions["cuda"]
            full = sandbox.evaluate(task, src)
            odd = odd_sizes(task.sizes)
            small = sandbox.evaluate(task, src, sizes=odd, measure_time=False)
            rows.append(
                {
                    "task": task.name,
                    "status": full.status,
                    "message": full.message[:600],
                    "max_abs_error": full.max_abs_error,
                    "candidate_ms": full.candidate_time_ms,
                    "candidate_spread_ms": full.candidate_time_spread_ms,
                    "eager_ms": full.eager_time_ms,
                    "compile_ms": full.compile_time_ms,
                    "speedup_vs_eager": full.speedup_vs_eager,
                    "speedup_vs_compile": full.speedup_vs_compile,
                    "odd_sizes": odd,
                    "odd_status": small.status,
                    "odd_message": small.message[:600],
                    "odd_max_abs_error": small.max_abs_error,
                    "eval_s": full.wall_seconds,
                }
            )
            r = rows[-1]
            print(
                f"{task.name:22s} {r['status']:8s} x{r['speedup_vs_eager'] or 0:6.3f} eager "
                f"x{r['speedup_vs_compile'] or 0:6.3f} compile  ours {r['candidate_ms'] or 0:8.4f} ms "
                f"eager {r['eager_ms'] or 0:8.4f} ms  err {r['max_abs_error']}  odd {r['odd_status']} "
                f"{r['odd_message'][:200]} {r['message'][:300]}",
                flush=True,
            )
            out.with_suffix(".partial").write_text(json.dumps(rows, indent=2) + "\n")
    b2b = {}
    for task in tasks:
        if task.name in (
            "relu",
            "add_mul",
            "row_sum",
            "softmax",
            "layernorm",
            "matmul",
            "attention",
        ):
            b2b[task.name] = back_to_back_us(task)
            print("back-to-back", task.name, b2b[task.name], flush=True)
    report = {
        "benchmark": "solutions_check",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python benchmarks/gpu/solutions_check.py OUT.json",
        "machine": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "seconds": time.perf_counter() - started,
        "all_ok": all(r["status"] == "ok" and r["odd_status"] == "ok" for r in rows),
        "tasks": rows,
        "back_to_back_us": b2b,
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}: all ok = {report['all_ok']}")


if __name__ == "__main__":
    main()
