"""A/A timing fidelity of two ways to time a CUDA call, in one process (no sandbox).

    python benchmarks/gpu/aa_variants.py OUT.json [--rounds 3]

For every built-in task at GPU size, the eager reference is timed against a copy of itself with
``_timing.time_interleaved`` (the sandbox's timer), under each variant:

- ``sync_after_flush``: flush L2, synchronise, record the start event, call, record the end
  event, synchronise (the sandbox's timer until 2026-11-29): the GPU is idle when the start
  event is recorded, so the host's time to enqueue the call is measured too;
- ``overlapped``: synchronise, flush L2, record start, call, record end, synchronise (the timer
  now): the host enqueues the call while the GPU runs the flush;

each with 30 and 100 repeats. Reports the share of A/A speedups within +-3%.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
from pathlib import Path

import torch

from cuda_agent.kernel_sandbox import builtin_tasks
from cuda_agent.kernel_sandbox._shared import task_runtime as _task_runtime
from cuda_agent.kernel_sandbox._shared import timing as _timing

_overlapped = _timing._cuda_timer


def _sync_after_flush(device: torch.device):
    flush = torch.empty(_timing._L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)

    def measure(fn) -> float:
        flush.zero_()
        torch.cuda.synchronize(device)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize(device)
        return float(start.elapsed_time(end))

    return measure


VARIANTS = {"sync_after_flush": _sync_after_flush, "overlapped": _overlapped}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    device = torch.device("cuda")
    rows = []
    for task in builtin_tasks():
        module = _task_runtime.load_task(task.source, Path(f"/tmp/aa_{task.name}.py"))
        model, _ = _task_runtime.build_reference(module, device, 0)
        twin = copy.deepcopy(model)
        inputs = _task_runtime.draw_inputs(module, device, 1000)

        def call(m=model, inputs=inputs):
            with torch.no_grad():
                return m(*inputs)

        def call_twin(m=twin, inputs=inputs):
            with torch.no_grad():
                return m(*inputs)

        for name, timer in VARIANTS.items():
            _timing._cuda_timer = timer
            for repeats in (30, 100):
                for k in range(args.rounds):
                    a, b = _timing.time_interleaved(
                        [call, call_twin], device=device, warmup=3, repeats=repeats, budget_s=2.0
                    )
                    rows.append(
                        {
                            "task": task.name,
                            "variant": name,
                            "repeats": repeats,
                            "round": k,
                            "ms": b.median_ms,
                            "speedup": b.median_ms / a.median_ms,
                        }
                    )
        _timing._cuda_timer = _overlapped
        print(task.name, rows[-1]["ms"], flush=True)
    summary = {}
    for name in VARIANTS:
        for repeats in (30, 100):
            sel = [r for r in rows if r["variant"] == name and r["repeats"] == repeats]
            within = sum(abs(r["speedup"] - 1) <= 0.03 for r in sel)
            summary[f"{name}/{repeats}"] = {
                "comparisons": len(sel),
                "within_3pct": within,
                "share": within / len(sel),
                "max_abs_deviation": max(abs(r["speedup"] - 1) for r in sel),
            }
    print(json.dumps(summary, indent=1))
    report = {
        "benchmark": "aa_variants",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": f"python benchmarks/gpu/aa_variants.py OUT.json --rounds {args.rounds}",
        "machine": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "summary": summary,
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
