"""Measure ahead the ``torch.compile`` baselines of named task sets, as ``cuda-agent train``'s
baselines stage would (``Sandbox.measure_baselines``: parallel lanes, each timing alone on its
GPU), into ``CUDA_AGENT_CACHE``. A learning run that starts later on the same machine with the
same cache finds them kept and spends no step on them.

    python benchmarks/gpu/baselines_ahead.py OUT.json SET [SET ...] [--lanes N] [--backend B]
        [--sizes small] [--kernelbench DIR]

SET is any ``--tasks`` value of ``cuda-agent train`` (``compact+synth``,
``heldout-compositions:32``, a directory). ``--sizes small`` measures each task at its smaller
GPU variant, as ``train --train-sizes small`` / ``--eval-sizes small`` judge it (the cache is
keyed by sizes, so the run finds exactly these). Writes the statuses' counts, the seconds, the
failed tasks and the provenance to OUT.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch
from provenance import provenance

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig
from cuda_agent.runner.task_sets import at_small_sizes, load_set


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("sets", nargs="+")
    parser.add_argument("--lanes", type=int, default=0, help="lanes per GPU (0: auto)")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--sizes", choices=("full", "small"), default="full")
    parser.add_argument(
        "--kernelbench", default="", help="the KernelBench checkout of kernelbench-l1-subset"
    )
    args = parser.parse_args()
    tasks = [task for source in args.sets for task in load_set(source, args.kernelbench)]
    if args.sizes == "small":
        tasks = at_small_sizes(tasks)
    unique = list({task.digest: task for task in tasks}.values())
    started = time.perf_counter()
    config = SandboxConfig(backend=args.backend, lanes_per_gpu=args.lanes or "auto")
    with Sandbox(config) as sandbox:
        lanes = sandbox.config.lanes_per_gpu
        statuses = sandbox.measure_baselines(unique)
    seconds = time.perf_counter() - started
    report = {
        "sets": args.sets,
        "sizes": args.sizes,
        "tasks": len(unique),
        "lanes_per_gpu": lanes,
        "statuses": dict(Counter(s.status for s in statuses)),
        "seconds": seconds,
        "failed": {s.task: s.message for s in statuses if s.status == "failed"},
        **provenance(
            "baselines_ahead",
            "python benchmarks/gpu/baselines_ahead.py OUT "
            + " ".join(args.sets)
            + f" --sizes {args.sizes}",
            torch.cuda.device_count() if args.backend == "cuda" else 0,
        ),
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("tasks", "lanes_per_gpu", "statuses", "seconds")}))


if __name__ == "__main__":
    main()
