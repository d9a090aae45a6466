"""What the warm start could teach, measured: each starter task's primary (tuned) and compact
CUDA solution through the sandbox (status, speedups, milestone reward) and its length in the
embedded model's tokens. Decides ``TrainConfig.warmstart_solutions`` (see runner/budget.py).

    python benchmarks/gpu/warmstart_solutions.py OUT.json --gguf /tmp/smol.gguf
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from pathlib import Path

import torch

from cuda_agent.agent import answer_text
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.reward import milestone_reward


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--gguf", required=True)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    path = Path(args.gguf)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    tasks = builtin_tasks("starter")
    rows = []
    started = time.perf_counter()
    with Sandbox(SandboxConfig(backend="cuda")) as sandbox:
        for kind in ("primary", "compact"):
            sources = [(t.solutions if kind == "primary" else t.compact_solutions)["cuda"]
                       for t in tasks]  # fmt: skip
            results = sandbox.evaluate_many(list(zip(tasks, sources, strict=True)))
            for task, source, result in zip(tasks, sources, results, strict=True):
                tokens = len(tokenizer(answer_text(source), add_special_tokens=False)["input_ids"])
                rows.append({
                    "task": task.name, "kind": kind, "chars": len(source), "tokens": tokens + 1,
                    "status": result.status, "message": result.message[:200],
                    "speedup_vs_eager": result.speedup_vs_eager,
                    "speedup_vs_compile": result.speedup_vs_compile,
                    "reward": milestone_reward(result),
                })  # fmt: skip
                print(rows[-1])
    by_kind = {
        kind: {
            "mean_reward": statistics.fmean(r["reward"] for r in rows if r["kind"] == kind),
            "total_tokens": sum(r["tokens"] for r in rows if r["kind"] == kind),
            "max_tokens": max(r["tokens"] for r in rows if r["kind"] == kind),
            "all_ok": all(r["status"] == "ok" for r in rows if r["kind"] == kind),
        }
        for kind in ("primary", "compact")
    }
    args.out.write_text(json.dumps({
        "benchmark": "warmstart_solutions",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "python benchmarks/gpu/warmstart_solutions.py OUT.json --gguf smol.gguf",
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "seconds": time.perf_counter() - started, "by_kind": by_kind, "rows": rows,
    }, indent=2))  # fmt: skip
    print(json.dumps(by_kind, indent=2))


if __name__ == "__main__":
    main()
