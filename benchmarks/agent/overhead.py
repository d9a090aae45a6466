"""Where a multi-turn batch's wall time goes: sampling, evaluation, and the agent's own work
(prompt and delta rendering, parsing, feedback, bookkeeping).

    python benchmarks/agent/overhead.py OUT.json [--model M] [--tasks 2] [--n 2] [--turns 3]
        [--max-new-tokens 256] [--scripted]

``--scripted`` answers every turn with the task's built-in solution (as real tokens of the
model's tokenizer), so every turn is evaluated: the evaluation-heavy case. Target (issue 14):
the agent's share under 5% of the wall time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
from pathlib import Path
from typing import Any

from cuda_agent.agent import AgentConfig, SamplingParams, run_episodes
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.policy import Policy, PolicyConfig, Sample


class Scripted:
    """The model's tokenizer, answering with each task's solution."""

    def __init__(self, tokenizer: Any, answers: dict[str, str]) -> None:
        self.tokenizer, self.answers = tokenizer, answers

    def generate(self, prompts, *, n=1, **kwargs):
        rows = []
        for prompt in prompts:
            text = self.tokenizer.decode(prompt)
            name = next(k for k in self.answers if f"task `{k}`" in text)
            answer = f"```python\n{self.answers[name]}```"
            ids = [*self.tokenizer.encode(answer, add_special_tokens=False),
                   self.tokenizer.eos_token_id]  # fmt: skip
            rows.append([Sample(list(prompt), ids, answer, "stop", [0.0] * len(ids))] * n)
        return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", default="smollm2-135m-gguf")
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--n", type=int, default=2)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--scripted", action="store_true")
    args = parser.parse_args()
    tasks = builtin_tasks("starter")[: args.tasks]
    policy: Any = Policy.load(PolicyConfig(model=args.model))
    if args.scripted:
        policy = Scripted(policy.tokenizer, {t.name: t.solutions["cpu"] for t in tasks})
    config = AgentConfig(max_turns=args.turns, max_malformed=args.turns, stop_on_repeat=False,
                         target_reward=99.0)  # fmt: skip
    sampling = SamplingParams(n=args.n, max_new_tokens=args.max_new_tokens, seed=0)
    with Sandbox(SandboxConfig(backend="cpu", workers=2)) as sandbox:
        sandbox.warm_up()
        batch = run_episodes(policy, sandbox, tasks, sampling, config)
    seconds = batch.seconds
    report = {
        "benchmark": "agent_overhead",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "commit": os.environ.get("CUDA_AGENT_COMMIT", "unknown"),
        "command": "python benchmarks/agent/overhead.py OUT.json "
        f"--tasks {args.tasks} --n {args.n} --turns {args.turns} "
        f"--max-new-tokens {args.max_new_tokens}" + (" --scripted" if args.scripted else ""),
        "model": args.model,
        "seconds": seconds,
        "agent_share": seconds["agent"] / seconds["total"],
        "turns": sum(len(e.turns) for e in batch.episodes),
        "evaluated_turns": sum(t.result is not None for e in batch.episodes for t in e.turns),
        "tokens": sum(e.n_tokens for e in batch.episodes),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
