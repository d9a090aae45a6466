"""``cuda-agent solve TASK``: the agent on one operator of yours, turn by turn, live.

Composes the packages: a task file (a KernelBench problem as it is), a policy (the embedded or
a local model, or any OpenAI-compatible endpoint), the sandbox and the multi-turn loop. Writes
``OUT/episode.json`` and the best kernel as ``OUT/best_model_new.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.agent import AgentConfig, Episode, SamplingParams, Turn, run_episodes
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, load_task


@dataclass(frozen=True)
class SolveOptions:
    task: str
    out: str = "solve-out"
    model: str = "smollm2-135m-gguf"
    endpoint: str = ""  # an OpenAI-compatible API root (http://host:port/v1): used instead
    api_model: str = ""
    turns: int = 4
    protocol: str = "fenced"
    backend: str = ""  # "" = cuda when a GPU is visible, else cpu
    max_new_tokens: int = 1024
    temperature: float = 0.7
    seed: int = 0


def episode_json(episode: Episode) -> dict[str, Any]:
    """The episode as ``episode.json`` holds it."""

    def turn(t: Turn) -> dict[str, Any]:
        r = t.result
        return {
            "response": t.text,
            "candidate": t.candidate,
            "action": t.action,
            "status": r.status if r is not None else "malformed",
            "flags": list(r.flags) if r is not None else [],
            "reward": t.reward,
            "feedback": t.feedback,
            "speedup_vs_eager": r.speedup_vs_eager if r is not None else None,
            "speedup_vs_compile": r.speedup_vs_compile if r is not None else None,
            "candidate_time_ms": r.candidate_time_ms if r is not None else None,
            "finish_reason": t.finish_reason,
            "tokens": len(t.response_ids),
        }

    return {
        "task": episode.task,
        "stop_reason": episode.stop_reason,
        "turns": [turn(t) for t in episode.turns],
        "best_turn": episode.best_turn,
        "best_reward": episode.best_reward,
    }


def _policy(options: SolveOptions) -> Any:
    if options.endpoint:
        from cuda_agent.policy import RemotePolicy

        remote = RemotePolicy(options.endpoint, model=options.api_model or "default")
        if not options.api_model:  # the server's first (usually only) model
            served = remote.models()
            if not served:
                raise ValueError(f"{options.endpoint} serves no model; name one with --api-model")
            remote = RemotePolicy(options.endpoint, model=served[0])
        return remote
    from cuda_agent.policy import Policy, PolicyConfig

    return Policy.load(PolicyConfig(model=options.model))


def _show(console: Any, index: int, turn: Turn) -> None:
    from rich.panel import Panel
    from rich.syntax import Syntax

    r = turn.result
    status = r.status if r is not None else "no code"
    color = "green" if r is not None and r.correct else "red"
    if isinstance(turn.candidate, str):
        body: Any = Syntax(turn.candidate, "python", line_numbers=False, word_wrap=True)
    else:
        body = turn.text[-1500:] or "(empty answer)"
    console.print(Panel(body, title=f"turn {turn.index + 1}: {status}", border_style=color))
    console.print(f"[{color}]{turn.feedback.splitlines()[0]}[/]  reward {turn.reward:+.1f}")


def solve(options: SolveOptions, live: bool = True) -> Episode:
    from rich.console import Console

    console = Console(quiet=not live)
    task = load_task(options.task)
    if options.backend not in ("", "auto", "cpu", "cuda"):
        raise ValueError(f"--backend must be cpu or cuda, not {options.backend!r}")
    backend: Any = options.backend or "auto"
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    policy = _policy(options)
    config = AgentConfig(max_turns=options.turns, protocol=options.protocol)
    sampling = SamplingParams(
        n=1,
        max_new_tokens=options.max_new_tokens,
        temperature=options.temperature,
        seed=options.seed,
    )
    with Sandbox(SandboxConfig(backend=backend, workers=1)) as sandbox:
        console.print(
            f"[bold]{task.name}[/] on {sandbox.config.backend}, up to {options.turns} turns"
        )
        batch = run_episodes(
            policy, sandbox, [task], sampling, config, on_turn=lambda i, t: _show(console, i, t)
        )
    [episode] = batch.episodes
    (out / "episode.json").write_text(json.dumps(episode_json(episode), indent=1))
    best = episode.best_turn
    if best is not None and isinstance(episode.turns[best].candidate, str):
        (out / "best_model_new.py").write_text(str(episode.turns[best].candidate))
    console.print(
        f"stopped: {episode.stop_reason}; best turn {None if best is None else best + 1} "
        f"(reward {episode.best_reward}); wrote {out / 'episode.json'}"
    )
    return episode
