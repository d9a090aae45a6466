"""One RL step of our trainer against TRL's ``GRPOTrainer``, on the same configuration (issue 17).

    python benchmarks/gpu/rl_step_throughput.py OUT.json                       # the H200 figure
    python benchmarks/gpu/rl_step_throughput.py OUT.json --shape tiny --device cpu \\
        --prompt-tokens 16 --new-tokens 16                                     # a CPU smoke run

The configuration (the issue's): a randomly initialised model of the Qwen2.5-0.5B shape
(``benchmarks/policy/throughput.py``'s published config, a numbered tokenizer of the same
vocabulary), bf16 on CUDA, full fine-tuning, ``prompts`` x ``samples`` = 8 x 8 sequences,
``prompt-tokens`` = 256 prompt tokens and up to ``new-tokens`` = 512 new tokens at temperature
1, a cheap reward (the share of even token ids in the completion) instead of the sandbox, and
one optimizer step (AdamW, lr 1e-6) over the 64 sequences in micro-batches of ``micro-batch``.

- **ours**: ``Policy.generate`` (n = samples per prompt), the reward, episodes collated by
  ``cuda_agent.agent.collate`` and ``runner.trainer.update.update`` with GRPO group advantages: the RL
  step of ``cuda-agent train``. The first step compiles the decoding loop and is not timed.
- **trl**: ``trl.GRPOTrainer`` with ``per_device_train_batch_size = micro-batch``,
  ``gradient_accumulation_steps = 64 / micro-batch`` (one generation of 8 prompts x 8 samples
  per optimizer step), ``max_completion_length = new-tokens``, ``bf16``, no vLLM. A step is
  timed from the end of the previous optimizer step to the end of its own (its generation
  included); the first step is not timed.

- **sandbox** (``--parts sandbox``): our step with the sandbox in the loop on the starter
  suite's tasks (``run_sandbox``): the step's wall-time split and how much of the sandbox's
  work overlapped the sampling.

Tokens per second = (prompt + completion tokens of the step's 64 sequences) / the step's wall
seconds; peak memory is ``torch.cuda.max_memory_allocated`` over the timed steps. Each part runs
in a subprocess of its own (a fresh CUDA context and a clean peak), and the JSON is rewritten
after each part, so a part that fails or runs out of time leaves the others' figures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "policy"))
sys.path.insert(0, str(HERE))

from decode_shapes import SMOLLM2  # noqa: E402
from gpu_util import UtilisationLog  # noqa: E402
from throughput import SHAPES  # noqa: E402

SHAPES = {
    **SHAPES,
    # SmolLM2-135M's dimensions in Qwen2's architecture (Qwen2Config takes them all).
    "smollm2-135m": {
        k: v for k, v in SMOLLM2.items() if k not in ("rope_theta", "max_position_embeddings")
    },
    "tiny": {  # a CPU smoke shape: the same architecture, small
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
        "tie_word_embeddings": True,
    },
}


# ----------------------------------------------------------------------------- shared parts
def build_model(shape: str, device: str, seed: int) -> tuple[Any, Any]:
    """The randomly initialised model (bf16 on CUDA, fp32 on the CPU) and its tokenizer."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from cuda_agent.policy import testing

    tokenizer = testing.numbered_tokenizer(SHAPES[shape]["vocab_size"])
    config = Qwen2Config(
        **SHAPES[shape],
        max_position_embeddings=32768,
        rope_theta=1e6,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(dtype)
    return model, tokenizer


def prompt_ids(vocab: int, count: int, length: int, seed: int) -> list[list[int]]:
    """``count`` prompts of ``length`` ordinary tokens (ids 3 and up: no special tokens)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (count, length), generator=gen).tolist()


def cheap_reward(token_ids: list[int]) -> float:
    """The share of even token ids: a reward that varies between samples at no cost."""
    return sum(1 for t in token_ids if t % 2 == 0) / max(len(token_ids), 1)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _peak_gb(device: str) -> float | None:
    return torch.cuda.max_memory_allocated() / 1e9 if device.startswith("cuda") else None


def _reset_peak(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


# ------------------------------------------------------------------------------------- ours
def run_ours(args: argparse.Namespace) -> dict[str, Any]:
    from cuda_agent.agent import collate
    from cuda_agent.agent.episode import Episode, Turn
    from cuda_agent.policy import Policy, PolicyConfig
    from cuda_agent.runner.config import TrainConfig
    from cuda_agent.runner.trainer.update import update

    model, tokenizer = build_model(args.shape, args.device, args.seed)
    policy = Policy.from_model(model, tokenizer, PolicyConfig(device=args.device, lora_rank=0))
    optimizer = policy.optimizer(lr=1e-6)
    config = TrainConfig(micro_batch=args.micro_batch, lora_rank=0)
    vocab = SHAPES[args.shape]["vocab_size"]

    def step(k: int) -> dict[str, Any]:
        prompts = prompt_ids(vocab, args.prompts, args.prompt_tokens, args.seed + k)
        _sync(args.device)
        t0 = time.perf_counter()
        groups = policy.generate(
            prompts, n=args.samples, max_new_tokens=args.new_tokens, temperature=1.0, seed=k
        )
        _sync(args.device)
        t1 = time.perf_counter()
        episodes = []
        for g, samples in enumerate(groups):
            for s in samples:
                reward = cheap_reward(list(s.response_ids))
                turn = Turn(
                    index=0,
                    context_ids=tuple(s.prompt_ids),
                    response_ids=tuple(s.response_ids),
                    sampler_logprobs=tuple(float(x) for x in s.sampler_logprobs),
                    text="",
                    finish_reason=s.finish_reason,
                    candidate=None,
                    result=None,
                    reward=reward,
                    feedback="",
                )
                episodes.append(Episode(f"p{g}", g, "full", (turn,), "max_turns"))
        batch = collate(episodes)
        t2 = time.perf_counter()
        record = update(policy, optimizer, batch, config.update_config(), log=lambda _m: None)
        _sync(args.device)
        t3 = time.perf_counter()
        tokens = sum(len(s.prompt_ids) + len(s.response_ids) for g in groups for s in g)
        completion = sum(len(s.response_ids) for g in groups for s in g)
        return {
            "seconds": t3 - t0,
            "split_s": {"sample": t1 - t0, "score_and_collate": t2 - t1, "update": t3 - t2},
            "tokens": tokens,
            "completion_tokens": completion,
            "tokens_per_s": tokens / (t3 - t0),
            "updates": record["updates"],
            "skipped_updates": record["skipped_updates"],
        }

    first = step(0)
    _reset_peak(args.device)
    timed = [step(k) for k in range(1, args.steps + 1)]
    return _summary(first, timed, args.device)


# -------------------------------------------------------------------------- with the sandbox
def run_sandbox(args: argparse.Namespace) -> dict[str, Any]:
    """Our step with the sandbox in the loop on real built-in tasks. A random model writes no
    kernels, so each sample's answer is replaced by its task's reference solution (the sampling
    cost is the real one; the sandbox judges real candidates). As the agent's loop does, the
    prompts go in two micro-batches: the first one's answers are evaluated while the second
    samples; the update waits for every verdict. Overlap = the share of the sandbox's busy time
    (the verdicts' wall seconds over its slots) that ran while the policy sampled."""
    from concurrent.futures import ThreadPoolExecutor

    from cuda_agent.agent import collate
    from cuda_agent.agent.episode import Episode, Turn
    from cuda_agent.kernel_sandbox import STARTER_SUITE, Sandbox, SandboxConfig, builtin_tasks
    from cuda_agent.policy import Policy, PolicyConfig
    from cuda_agent.reward import milestone_reward
    from cuda_agent.runner.config import TrainConfig
    from cuda_agent.runner.trainer.update import update

    backend = "cuda" if args.device.startswith("cuda") else "cpu"
    if args.task_set == "compositions":  # the training compositions, compact solutions
        from cuda_agent.data import load_embedded

        tasks = load_embedded().tasks()[: args.prompts]
        answer = {t.name: t.compact_solutions.get(backend) or t.solutions[backend] for t in tasks}
    else:
        by_name = {t.name: t for t in builtin_tasks()}
        tasks = [by_name[n] for n in STARTER_SUITE][: args.prompts]
        answer = {t.name: t.solutions[backend] for t in tasks}
    # A share of the answers is another task's kernel (plausible code, wrong for this task:
    # judged incorrect or failing), as a policy's answers are in part.
    wrong = {t.name: answer[tasks[(i + 1) % len(tasks)].name] for i, t in enumerate(tasks)}
    model, tokenizer = build_model(args.shape, args.device, args.seed)
    policy = Policy.from_model(model, tokenizer, PolicyConfig(device=args.device, lora_rank=0))
    optimizer = policy.optimizer(lr=1e-6)
    config = TrainConfig(micro_batch=args.micro_batch, lora_rank=0)
    vocab = SHAPES[args.shape]["vocab_size"]
    sandbox = Sandbox(
        SandboxConfig(backend=backend, lanes_per_gpu=args.lanes or "auto")  # type: ignore[arg-type]
    )
    if backend == "cuda":
        sandbox.measure_baselines(tasks)  # ahead, as cuda-agent train does
    slots = sandbox.config.workers * int(sandbox.config.lanes_per_gpu)
    pool = ThreadPoolExecutor(max_workers=2)
    gpu = UtilisationLog().start() if backend == "cuda" else None

    def step(k: int) -> dict[str, Any]:
        prompts = prompt_ids(vocab, len(tasks), args.prompt_tokens, args.seed + k)
        halves = [list(range(len(tasks)))[m::2] for m in range(2)]
        t0 = time.perf_counter()
        sample_s, futures, groups = 0.0, [], {}
        submitted = 0.0
        for half in halves:
            s0 = time.perf_counter()
            out = policy.generate(
                [prompts[i] for i in half],
                n=args.samples,
                max_new_tokens=args.new_tokens,
                temperature=1.0,
                seed=k * 2 + len(futures),
            )
            _sync(args.device)
            sample_s += time.perf_counter() - s0
            groups.update(zip(half, out, strict=True))
            jobs = [
                (tasks[i], wrong[tasks[i].name] if j < args.wrong_share * len(out[0]) else
                 answer[tasks[i].name])
                for i in half
                for j in range(len(out[0]))
            ]  # fmt: skip
            submitted = submitted or time.perf_counter()
            futures.append(pool.submit(sandbox.evaluate_many, jobs))
        sampled_at, sampled_mono = time.perf_counter(), time.monotonic()
        verdicts = [r for f in futures for r in f.result()]
        evaluated_at, evaluated_mono = time.perf_counter(), time.monotonic()
        order = [i for half in halves for i in half]
        episodes, rewards = [], []
        samples = [(i, s) for i in order for s in groups[i]]
        for (i, smp), result in zip(samples, verdicts, strict=True):
            reward = milestone_reward(result)
            rewards.append(reward)
            turn = Turn(0, tuple(smp.prompt_ids), tuple(smp.response_ids),
                        tuple(float(x) for x in smp.sampler_logprobs), "", smp.finish_reason,
                        None, result, reward, "")  # fmt: skip
            episodes.append(Episode(tasks[i].name, i, "full", (turn,), "max_turns"))
        batch = collate(episodes)
        u0 = time.perf_counter()
        update(policy, optimizer, batch, config.update_config(), log=lambda _m: None)
        _sync(args.device)
        end = time.perf_counter()
        busy = sum(r.wall_seconds for r in verdicts) / slots
        waited = evaluated_at - sampled_at
        sandbox_wall = evaluated_at - submitted  # first answers in to last verdict out
        alone = gpu.mean(sampled_mono, evaluated_mono) if gpu else None
        tokens = sum(len(s.prompt_ids) + len(s.response_ids) for _, s in samples)
        return {
            "seconds": end - t0,
            "split_s": {
                "sample": sample_s,
                "evaluation_after_sampling": waited,
                "score_and_collate": u0 - evaluated_at,
                "update": end - u0,
            },
            "sandbox_busy_s": busy,
            "overlap": max(0.0, min(1.0, (busy - waited) / busy)) if busy else None,
            "evaluations": len(verdicts),
            "evaluations_per_minute": 60 * len(verdicts) / sandbox_wall,
            # sandbox time that did not overlap sampling, over the step's wall time
            "sandbox_share": waited / (end - t0),
            # GPU utilisation (NVML) while only the sandbox ran (sampling done)
            "gpu_busy_share_sandbox_alone": alone,
            "statuses": {
                v: [r.status for r in verdicts].count(v) for v in {r.status for r in verdicts}
            },
            "mean_reward": sum(rewards) / len(rewards),
            "tokens": tokens,
            "tokens_per_s": tokens / (end - t0),
        }

    try:
        first = step(0)
        _reset_peak(args.device)
        timed = [step(k) for k in range(1, args.steps + 1)]
    finally:
        pool.shutdown()
        sandbox.close()
        if gpu:
            gpu.close()
    out = _summary(first, timed, args.device)
    out["slots"] = slots
    out["lanes_per_gpu"] = sandbox.config.lanes_per_gpu
    out["task_set"] = args.task_set
    out["wrong_share"] = args.wrong_share
    for key in ("evaluations_per_minute", "sandbox_share", "gpu_busy_share_sandbox_alone"):
        values = [t[key] for t in timed if t.get(key) is not None]
        out[key] = sum(values) / len(values) if values else None
    out["tasks"] = [t.name for t in tasks]
    return out


# -------------------------------------------------------------------------------------- TRL
def run_trl(args: argparse.Namespace) -> dict[str, Any]:
    import trl
    from datasets import Dataset
    from transformers import TrainerCallback

    model, tokenizer = build_model(args.shape, args.device, args.seed)
    vocab = SHAPES[args.shape]["vocab_size"]
    total_steps = args.steps + 1
    texts = [
        tokenizer.decode(ids)
        for k in range(total_steps)
        for ids in prompt_ids(vocab, args.prompts, args.prompt_tokens, args.seed + k)
    ]
    dataset = Dataset.from_dict({"prompt": texts})
    per_device = args.micro_batch
    sequences = args.prompts * args.samples
    if sequences % per_device:
        raise SystemExit(f"--micro-batch must divide {sequences}")

    def reward(completion_ids: list[list[int]], **_: Any) -> list[float]:
        return [cheap_reward(list(ids)) for ids in completion_ids]

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.ends: list[float] = []
            self.logs: list[dict[str, Any]] = []
            self.peaks: list[float | None] = []

        def on_train_begin(self, *a: Any, **k: Any) -> None:
            _sync(args.device)
            self.ends.append(time.perf_counter())

        def on_step_end(self, *a: Any, **k: Any) -> None:
            _sync(args.device)
            self.ends.append(time.perf_counter())
            self.peaks.append(_peak_gb(args.device))
            _reset_peak(args.device)

        def on_log(
            self, _args: Any, _state: Any, _control: Any, logs: Any = None, **k: Any
        ) -> None:
            self.logs.append(dict(logs or {}))

    clock = Clock()
    with tempfile.TemporaryDirectory() as out:
        config = trl.GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=per_device,
            gradient_accumulation_steps=sequences // per_device,
            num_generations=args.samples,
            max_completion_length=args.new_tokens,
            temperature=1.0,
            learning_rate=1e-6,
            bf16=args.device.startswith("cuda"),
            use_cpu=not args.device.startswith("cuda"),
            max_steps=total_steps,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            seed=args.seed,
            shuffle_dataset=False,
            dataloader_num_workers=0,
        )
        trainer = trl.GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[clock],
        )
        trainer.train()
    seconds = [b - a for a, b in zip(clock.ends, clock.ends[1:], strict=False)]
    cumulative = [log["num_tokens"] for log in clock.logs if "num_tokens" in log]
    per_step = [b - a for a, b in zip([0.0, *cumulative], cumulative, strict=False)]
    lengths = [log.get("completions/mean_length") for log in clock.logs if "num_tokens" in log]
    steps = []
    for i, s in enumerate(seconds):
        tokens = per_step[i] if i < len(per_step) else None
        steps.append(
            {
                "seconds": s,
                "tokens": tokens,
                "completion_mean_length": lengths[i] if i < len(lengths) else None,
                "tokens_per_s": tokens / s if tokens else None,
                "peak_gb": clock.peaks[i] if i < len(clock.peaks) else None,
            }
        )
    if len(steps) < 2:
        raise RuntimeError(f"TRL ran {len(steps)} steps; {total_steps} were asked for")
    out = _summary(steps[0], steps[1:], args.device)
    out["peak_gb"] = max((s["peak_gb"] or 0.0) for s in steps[1:]) or None
    out["trl"] = trl.__version__
    return out


def _summary(first: dict[str, Any], timed: list[dict[str, Any]], device: str) -> dict[str, Any]:
    tokens = sum(s["tokens"] or 0 for s in timed)
    seconds = sum(s["seconds"] for s in timed)
    return {
        "tokens_per_s": tokens / seconds if seconds else None,
        "step_s": seconds / len(timed),
        "peak_gb": _peak_gb(device),
        "first_step": first,
        "steps": timed,
    }


# ------------------------------------------------------------------------------------- main
def _environment() -> dict[str, Any]:
    import transformers

    env = {"torch": torch.__version__, "transformers": transformers.__version__}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    env["machine"] = platform.node() and platform.machine()
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--shape", default="qwen2.5-0.5b", choices=sorted(SHAPES))
    parser.add_argument("--device", default="auto")
    parser.add_argument("--parts", default="ours,trl", help="of ours, trl, sandbox")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2, help="timed steps after the first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task-set", default="starter", choices=("starter", "compositions"))
    parser.add_argument("--wrong-share", type=float, default=0.5, help="sandbox part")
    parser.add_argument("--lanes", type=int, default=0, help="sandbox lanes per GPU (0: auto)")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per part")
    parser.add_argument("--part", default="", help=argparse.SUPPRESS)  # a subprocess's part
    args = parser.parse_args()
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.part:
        result = {"ours": run_ours, "trl": run_trl, "sandbox": run_sandbox}[args.part](args)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        return

    out = Path(args.out)
    argv = [a for a in sys.argv[2:]]
    report: dict[str, Any] = {
        "benchmark": "rl_step_throughput",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": os.environ.get("CUDA_AGENT_COMMIT", ""),
        "command": "python benchmarks/gpu/rl_step_throughput.py OUT.json " + " ".join(argv),
        "config": {k: v for k, v in vars(args).items() if k not in ("out", "part")},
        **_environment(),
    }
    for part in args.parts.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            part_json = Path(tmp) / "part.json"
            cmd = [sys.executable, __file__, str(part_json), *argv, "--part", part]
            started = time.perf_counter()
            try:
                done = subprocess.run(cmd, timeout=args.timeout_s, capture_output=True, text=True)
                if done.returncode == 0:
                    report[part] = json.loads(part_json.read_text())
                else:
                    report[part] = {"error": f"exit {done.returncode}", "log": done.stderr[-4000:]}
            except subprocess.TimeoutExpired:
                report[part] = {"error": f"timed out after {args.timeout_s:.0f} s"}
            report[part]["wall_s"] = time.perf_counter() - started
        print(part, json.dumps({k: v for k, v in report[part].items() if k != "log"})[:600])
        if "error" in report[part]:
            print(report[part].get("log", ""), file=sys.stderr)
        ours, trl_ = report.get("ours", {}), report.get("trl", {})
        if ours.get("tokens_per_s") and trl_.get("tokens_per_s"):
            report["ours_tokens_per_s"] = ours["tokens_per_s"]
            report["trl_tokens_per_s"] = trl_["tokens_per_s"]
            report["ratio"] = ours["tokens_per_s"] / trl_["tokens_per_s"]
            report["ours_peak_gb"] = ours.get("peak_gb")
            report["trl_peak_gb"] = trl_.get("peak_gb")
        out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
