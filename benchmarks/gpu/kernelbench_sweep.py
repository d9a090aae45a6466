"""Every KernelBench problem through the sandbox on the GPU, with its reference as its own
candidate (``ModelNew = Model``; static and runtime checks off, custom kernels not required).

    python benchmarks/gpu/kernelbench_sweep.py KERNELBENCH_DIR OUT.json [--levels 1,2,3]
        [--time-left S]

``KERNELBENCH_DIR`` holds ``level1/`` ... (KernelBench's ``KernelBench/`` folder). Each problem
file is loaded unchanged and evaluated at its own sizes with the default configuration (five
trials, the after-timing check, interleaved timing of candidate and eager; the
``torch.compile`` baseline is off: it costs seconds per problem and is the reference worker's,
not the evaluation's). One row per problem: ``problem``, ``status``, ``wall_s``, ``aa_ratio``
(candidate time over eager time of the same code: 1 is exact), ``peak_gb`` (the candidate
worker's peak GPU memory), ``outputs_via``, and the message of any failure.

The output is rewritten after every problem and problems already in it are skipped, so a run
cut at a device call's time limit resumes in the next call with the same command.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, load_task


def problems(root: Path, levels: list[int]) -> list[Path]:
    def number(path: Path) -> int:
        head = path.name.split("_", 1)[0]
        return int(head) if head.isdigit() else 10**6

    found = []
    for level in levels:
        found += sorted((root / f"level{level}").glob("*.py"), key=number)
    return found


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_level: dict[str, Any] = {}
    for level in sorted({r["problem"].split("/")[0] for r in rows}):
        mine = [r for r in rows if r["problem"].startswith(level + "/")]
        walls = [r["wall_s"] for r in mine]
        ratios = [r["aa_ratio"] for r in mine if r["aa_ratio"] is not None]
        by_level[level] = {
            "problems": len(mine),
            "ok": sum(r["status"] == "ok" for r in mine),
            "median_wall_s": statistics.median(walls) if walls else None,
            "max_wall_s": max(walls) if walls else None,
            "aa_within_3pct": (
                sum(abs(x - 1) <= 0.03 for x in ratios) / len(ratios) if ratios else None
            ),
            "max_peak_gb": max((r["peak_gb"] or 0) for r in mine) if mine else None,
        }
    return {
        "problems": len(rows),
        "ok": sum(r["status"] == "ok" for r in rows),
        "not_ok": [
            f"{r['problem']}: {r['status']}: {r['message'][:160]}"
            for r in rows
            if r["status"] != "ok"
        ],
        "levels": by_level,
    }


def evaluate(sandbox: Sandbox, path: Path, root: Path) -> dict[str, Any]:
    name = str(path.relative_to(root).with_suffix(""))
    started = time.perf_counter()
    try:
        task = load_task(path)
    except Exception as exc:  # a problem file the loader refuses is a finding, not a crash
        return {"problem": name, "status": "load_error", "message": str(exc)[:500],
                "wall_s": time.perf_counter() - started, "aa_ratio": None, "peak_gb": None}  # fmt: skip
    result = sandbox.evaluate(task, task.source + "\n\nModelNew = Model\n")
    cand, eager = result.candidate_time_ms, result.eager_time_ms
    peak = result.extra.get("peak_gpu_bytes")
    return {
        "problem": name,
        "status": result.status,
        "message": "" if result.status == "ok" else result.message[:500],
        "wall_s": result.wall_seconds,
        "aa_ratio": cand / eager if cand and eager else None,
        "eager_ms": eager,
        "peak_gb": peak / 1e9 if isinstance(peak, int | float) else None,
        "outputs_via": result.extra.get("outputs_via"),
        "seconds": result.extra.get("seconds"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--levels", default="1,2,3")
    parser.add_argument(
        "--time-left",
        type=float,
        default=1e9,
        help="stop starting problems after this many seconds",
    )
    args = parser.parse_args()
    begun = time.monotonic()
    report: dict[str, Any] = {"rows": []}
    if args.out.exists():
        report = json.loads(args.out.read_text())
    done = {r["problem"] for r in report["rows"]}
    report.update(
        benchmark="kernelbench_sweep",
        date=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        command="python benchmarks/gpu/kernelbench_sweep.py KernelBench/KernelBench OUT.json "
        f"--levels {args.levels}",
        commit=os.environ.get("CUDA_AGENT_COMMIT", "unknown"),
        gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        torch=torch.__version__,
        config="SandboxConfig(backend='cuda', workers=1, static_checks=False, "
        "runtime_checks=False, require_custom_kernel=False, time_compile=False)",
    )
    config = SandboxConfig(
        backend="cuda" if torch.cuda.is_available() else "cpu",
        workers=1,
        static_checks=False,
        runtime_checks=False,
        require_custom_kernel=False,
        time_compile=False,
    )
    todo = [p for p in problems(args.root, [int(x) for x in args.levels.split(",")])
            if str(p.relative_to(args.root).with_suffix("")) not in done]  # fmt: skip
    with Sandbox(config) as sandbox:
        sandbox.warm_up()
        for path in todo:
            if time.monotonic() - begun > args.time_left:
                print(f"stopping: {len(todo)} problems were left, time is up")
                break
            row = evaluate(sandbox, path, args.root)
            report["rows"].append(row)
            report["summary"] = summary(report["rows"])
            args.out.write_text(json.dumps(report, indent=1))
            aa = f"{row['aa_ratio']:.3f}" if row["aa_ratio"] else "-"
            print(f"{row['problem']:60s} {row['status']:14s} {row['wall_s']:7.2f}s aa={aa}",
                  row["message"][:100] if row["status"] != "ok" else "", flush=True)  # fmt: skip
    report["summary"] = summary(report["rows"])
    args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report["summary"], indent=1))


if __name__ == "__main__":
    main()
