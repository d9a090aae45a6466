"""What the policy's sampling on the GPU does to the sandbox's timings, and what keeping them
apart (``Sandbox.device_work``, ``AgentConfig.quiet_timing``) costs.

    python benchmarks/gpu/timing_beside_sampling.py OUT.json [--kernelbench DIR]
        [--modes idle,beside,held] [--shape smollm2-135m] [--batch 16] [--new-tokens 256]
        [--sampler static|generate] [--backend cuda] [--limit N]

Each task's reference is timed against itself (the A/A check: ``ModelNew = Model``, checks
off, the ratio of the two medians should be 1), one task at a time, in three modes:

- ``idle``: nothing else on the device;
- ``beside``: this process samples without pause meanwhile (a randomly initialised model of
  ``--shape``, ``--batch`` rows of ``--new-tokens`` tokens a call, by the trainer's own decoder,
  ``cuda_agent.policy._decoding.StaticDecoder``: compiled into CUDA graphs on CUDA, its first
  call made before the mode's timings start; ``--sampler generate``: transformers' uncompiled
  ``generate``, as this benchmark sampled until 2026-12-05, when on the H200 one such call
  took about 30 s and the held mode waited for each), as the trainer's next micro-batch samples
  while the sandbox judges the previous one;
- ``held``: the same sampling, each call inside ``sandbox.device_work(device)``: no timing
  beside it (the trainer's default since ``quiet_timing``).

For each mode: ``n``, ``within_3pct``, ``within_1pct``, ``max_deviation`` of the A/A ratios,
the wall ``seconds`` the mode took, the sampling calls made, their median seconds
(``sampling_call_s``: how long a held call keeps timings waiting) and the seconds the sampler
waited to enter the gate (``guest_wait_s``). The tasks: the ``.py`` problems under ``--kernelbench``
(a folder of KernelBench files, e.g. the A/A sample of ``lanes.py``'s ``aa`` part), else the
built-in suite at its GPU sizes (or CPU sizes on the CPU backend).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance
from rl_step_throughput import SHAPES, build_model, prompt_ids

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks, load_task
from cuda_agent.policy._decoding import StaticDecoder, Warp

AA_MODEL_NEW = "\n\nclass ModelNew(Model):\n    pass\n"
MODES = ("idle", "beside", "held")


def tasks_of(args: argparse.Namespace) -> list[Any]:
    if args.kernelbench:
        tasks = [load_task(p) for p in sorted(Path(args.kernelbench).rglob("*.py"))]
    else:
        tasks = builtin_tasks()
    return tasks[: args.limit] if args.limit else tasks


class Sampler:
    """Samples without pause on ``device`` until stopped, each call inside ``hold()``."""

    def __init__(self, args: argparse.Namespace, device: str, hold: Any) -> None:
        self.model, tokenizer = build_model(args.shape, device, args.seed)
        vocab = SHAPES[args.shape]["vocab_size"]
        ids = prompt_ids(vocab, args.batch, 64, args.seed)
        self.inputs = torch.tensor(ids, device=device)
        self.pad = tokenizer.pad_token_id
        self.new_tokens, self.hold = args.new_tokens, hold
        self.decoder = None
        if args.sampler == "static":
            self.decoder = StaticDecoder(self.model, compile=device.startswith("cuda"))
        self.calls, self.call_seconds, self.stop = 0, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self._sample()  # the first call compiles (on CUDA): before any timing, outside the hold

    def _sample(self) -> None:
        with torch.no_grad():
            mask = torch.ones_like(self.inputs)
            if self.decoder is not None:  # every row runs its whole length (no eos)
                self.decoder.decode(self.inputs, mask, max_new_tokens=self.new_tokens,
                                    warp=Warp(temperature=0.7), eos_ids=[], pad_id=self.pad)  # fmt: skip
            else:
                self.model.generate(
                    self.inputs,
                    attention_mask=mask,
                    max_new_tokens=self.new_tokens,
                    min_new_tokens=self.new_tokens,
                    do_sample=True,
                    pad_token_id=self.pad,
                )
            if self.inputs.is_cuda:
                torch.cuda.synchronize()  # its work ends inside the hold

    def _run(self) -> None:
        while not self.stop.is_set():
            with self.hold():
                started = time.perf_counter()
                self._sample()
                self.call_seconds.append(time.perf_counter() - started)
            self.calls += 1

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(600)


def run_mode(args: argparse.Namespace, mode: str, tasks: list[Any]) -> dict[str, Any]:
    config = SandboxConfig(
        backend=args.backend,
        static_checks=False,
        runtime_checks=False,
        require_custom_kernel=False,
        time_compile=False,
    )
    device = "cuda:0" if args.backend == "cuda" else "cpu"
    ratios: list[float] = []
    rows = []
    started = time.perf_counter()
    with Sandbox(config) as sandbox:
        sandbox.warm_up()
        hold = (lambda: sandbox.device_work(device)) if mode == "held" else nullcontext
        sampler = Sampler(args, device, hold) if mode != "idle" else None
        with sampler if sampler is not None else nullcontext():
            for task in tasks:
                r = sandbox.evaluate(task, task.source + AA_MODEL_NEW)
                ratio = None
                if r.status == "ok" and r.candidate_time_ms and r.eager_time_ms:
                    ratio = r.candidate_time_ms / r.eager_time_ms
                    ratios.append(ratio)
                rows.append({"task": task.name, "status": r.status, "aa_ratio": ratio,
                             "eager_ms": r.eager_time_ms})  # fmt: skip
                print(f"{mode:7s} {task.name:45s} {r.status:10s} {ratio}", flush=True)
        gate = sandbox.gate_stats()[0]
    return {
        "n": len(rows),
        "within_3pct": sum(abs(x - 1) <= 0.03 for x in ratios),
        "within_1pct": sum(abs(x - 1) <= 0.01 for x in ratios),
        "max_deviation": max((abs(x - 1) for x in ratios), default=None),
        "seconds": round(time.perf_counter() - started, 1),
        "sampling_calls": sampler.calls if sampler is not None else 0,
        "sampling_call_s": statistics.median(sampler.call_seconds)
        if sampler is not None and sampler.call_seconds
        else None,
        "guest_wait_s": round(gate["guest_wait_s"], 3),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--kernelbench", default="")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--shape", default="smollm2-135m", choices=sorted(SHAPES))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--sampler", default="static", choices=("static", "generate"))
    parser.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--limit", type=int, default=0, help="the first N tasks (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes takes some of {', '.join(MODES)}")
    tasks = tasks_of(args)
    command = "python benchmarks/gpu/timing_beside_sampling.py " + " ".join(argv or sys.argv[1:])
    gpus = 1 if args.backend == "cuda" else 0
    report: dict[str, Any] = {**provenance("timing_beside_sampling", command, gpus),
                              "shape": args.shape, "batch": args.batch,
                              "new_tokens": args.new_tokens, "sampler": args.sampler,
                              "tasks": len(tasks)}  # fmt: skip
    for mode in modes:
        report[mode] = run_mode(args, mode, tasks)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    brief = {m: {k: report[m][k] for k in ("within_3pct", "n", "max_deviation")} for m in modes}
    print(json.dumps(brief))
    return 0


if __name__ == "__main__":
    sys.exit(main())
