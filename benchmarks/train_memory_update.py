"""Peak resident memory of one RL update (`runner.trainer.update.update`) of the CPU default's policy,
on a synthetic batch shaped like the default run's RL step, without a sandbox or sampling.

    python benchmarks/train_memory_update.py --episodes 2 --prompt 450 --answer 576 \
        --feedback 600 --turns 2 [--micro-batch 1] [--before] [--out-json update_memory.json]

Each episode is one full-history row: a prompt, then ``turns`` answers of ``--answer`` policy
tokens with ``--feedback`` tokens of feedback between two of them (not in the loss mask),
random token ids. The policy is the embedded SmolLM2-135M with the preset's LoRA and gradient
checkpointing; the update is the cpu-default preset's (``rl`` stage). The peak resident set is
read (``VmHWM``) and reset (``/proc/self/clear_refs``) around the phases, and around each
micro-batch's forward and backward (``PolicyOptimizer.backward`` wrapped), so each phase's own
peak is exact. A second update runs after the first (the optimizer state then exists).
``--before`` undoes, in this process, the three changes of issue 29 (see ``--help``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_memory import _header, reset_peak, status_kb


def _batch(args: argparse.Namespace, vocab: int) -> Any:
    from cuda_agent.agent import EpisodeBatch
    from cuda_agent.agent.batch import _Row

    gen = torch.Generator().manual_seed(0)
    rows = []
    for e in range(args.episodes):
        prompt = torch.randint(0, vocab, (args.prompt,), generator=gen).tolist()
        response: list[int] = []
        mask: list[int] = []
        turn: list[int] = []
        for k in range(args.turns):
            if k:
                response += torch.randint(0, vocab, (args.feedback,), generator=gen).tolist()
                mask += [0] * args.feedback
                turn += [-1] * args.feedback
            response += torch.randint(0, vocab, (args.answer,), generator=gen).tolist()
            mask += [1] * args.answer
            turn += [k] * args.answer
        sampler = [-1.0 * m for m in mask]
        rows.append(_Row(prompt, response, mask, turn, sampler, e))
    rewards = torch.tensor([[-1.0, 0.0], [0.0, -1.0]] * args.episodes)[: args.episodes]
    rewards = rewards[:, : args.turns]
    mask_ek = torch.ones_like(rewards, dtype=torch.bool)
    return EpisodeBatch(tuple(rows), tuple(0 for _ in rows), rewards, mask_ek)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=450)
    parser.add_argument("--answer", type=int, default=576)
    parser.add_argument("--feedback", type=int, default=600)
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--updates", type=int, default=2)
    parser.add_argument("--out-json", default="")
    parser.add_argument(
        "--mmap-threshold",
        type=int,
        default=0,
        help="glibc's fixed mmap threshold in bytes instead of the policy's (128 KiB)",
    )
    parser.add_argument(
        "--dynamic-mmap-threshold",
        action="store_true",
        help="leave glibc's mmap threshold dynamic (as before the policy fixed it on the CPU)",
    )
    parser.add_argument(
        "--entropy-grad",
        action="store_true",
        help="score the update's entropy with gradient (as the update did before)",
    )
    parser.add_argument(
        "--logit-chunk-elements",
        type=int,
        default=0,
        help="the CPU's logit chunk (0: the policy's; 2**26 = 67108864 was the CPU's before)",
    )
    parser.add_argument(
        "--before",
        action="store_true",
        help="all three as before issue 29's fix: --dynamic-mmap-threshold --entropy-grad "
        "--logit-chunk-elements 67108864",
    )
    args = parser.parse_args()
    if args.before:
        args.dynamic_mmap_threshold = args.entropy_grad = True
        args.logit_chunk_elements = 2**26
    if args.logit_chunk_elements:
        from cuda_agent.policy import _scoring

        _scoring._CPU_LOGIT_CHUNK_ELEMENTS = args.logit_chunk_elements
    if args.dynamic_mmap_threshold:
        import cuda_agent.policy._policy as policy_module

        policy_module.fix_cpu_mmap_threshold = lambda *a, **k: False  # type: ignore[assignment]
    elif args.mmap_threshold:
        import cuda_agent.policy._policy as policy_module

        fix = policy_module.fix_cpu_mmap_threshold
        policy_module.fix_cpu_mmap_threshold = lambda *a, **k: fix(args.mmap_threshold)  # type: ignore[assignment]

    from cuda_agent.policy import Policy, PolicyConfig
    from cuda_agent.runner.config import TrainConfig, read_toml
    from cuda_agent.runner.trainer import update as U

    marks: list[dict[str, Any]] = []
    current = ["start"]
    t0 = time.monotonic()

    def mark(name: str) -> None:
        s = status_kb()
        marks.append(
            {
                "part": current[0],
                "hwm_mb": s.get("VmHWM", 0) >> 10,
                "rss_end_mb": s.get("VmRSS", 0) >> 10,
                "t": round(time.monotonic() - t0, 1),
            }
        )
        print(json.dumps(marks[-1]), flush=True)
        current[0] = name
        reset_peak()

    reset_peak()
    mark("load")
    preset = TrainConfig(**read_toml("cpu-default"))
    settings = preset.update_config("rl")
    # random tokens are far from the sampler's log-probs: the guard would skip every step
    guard = dataclasses.replace(settings.guard, max_ratio=float("inf"), min_ess=0.0)
    settings = dataclasses.replace(settings, micro_batch=args.micro_batch, guard=guard)
    policy = Policy.load(
        PolicyConfig(
            lora_rank=preset.lora_rank,
            lora_alpha=preset.lora_alpha,
            gradient_checkpointing=preset.gradient_checkpointing,
        )
    )
    batch = _batch(args, policy.tokenizer.vocab_size)
    if args.entropy_grad:
        scored = policy.token_logprobs

        def with_entropy_grad(*a: Any, **k: Any) -> Any:
            k["entropy_grad"] = True
            return scored(*a, **k)

        policy.token_logprobs = with_entropy_grad  # type: ignore[method-assign]
    mark("optimizer")
    optimizer = policy.optimizer(lr=preset.lr, max_grad_norm=preset.max_grad_norm)
    backward, step = optimizer.backward, optimizer.step
    micro = [0]

    def wrapped_backward(loss: torch.Tensor) -> None:
        mark(f"backward {micro[0]}")
        backward(loss)
        micro[0] += 1
        mark(f"forward {micro[0]}")

    def wrapped_step() -> dict[str, float]:
        mark("optimizer step")
        out = step()
        mark("after step")
        return out

    optimizer.backward = wrapped_backward  # type: ignore[method-assign]
    optimizer.step = wrapped_step  # type: ignore[method-assign]
    records = []
    for n in range(args.updates):
        micro[0] = 0
        mark(f"update {n}: forward 0")
        records.append(U.update(policy, optimizer, batch, settings, log=print))
    mark("end")
    record = _header(sys.argv[1:], "python benchmarks/train_memory_update.py")
    record.update(
        settings=vars(args),
        row_tokens=[len(r.prompt_ids) + len(r.response_ids) for r in batch.rows],
        peak_mb=max(m["hwm_mb"] for m in marks),
        load_rss_mb=next(m["rss_end_mb"] for m in marks if m["part"] == "load"),
        marks=marks,
        updates=[{k: v for k, v in r.items() if isinstance(v, (int, float))} for r in records],
    )
    print(json.dumps({k: v for k, v in record.items() if k != "marks"}, indent=1))
    if args.out_json:
        Path(args.out_json).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
