"""The answer budget (``max_new_tokens``) and the warm start's examples, checked against each other.

Why this exists (measured on the H200, 2026-12-01): the CUDA reference solutions of the starter
suite are 600 to 2,800 SmolLM2 tokens, the budget was a fixed 512, so after the warm start every
greedy answer was cut before ``class ModelNew`` and nothing parsed; the run learned nothing and
said nothing. A warm start teaches the policy to write answers of its examples' length, so the
budget must hold the longest of them: ``max_new_tokens = 0`` (auto) derives it, and an explicit
budget that is too small is refused before any work is done.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.agent import AgentConfig, answer_text, first_prompt_ids
from cuda_agent.kernel_sandbox import Task
from cuda_agent.policy import Policy, end_of_turn_id

from .checkpoint import write_json_atomic

# Sampled answers (temperature 1) come out a little longer or shorter than the example they
# imitate; the margin keeps a sampled answer of a learned solution inside the budget.
AUTO_MARGIN = 1.25
AUTO_FLOOR = 512  # the budget for tasks without solutions (and the old default)
AUTO_ROUND = 64


class BudgetError(ValueError):
    """The answer budget cannot hold what the warm start teaches."""


@dataclass(frozen=True)
class WarmStartExample:
    task: str
    prompt_ids: list[int]
    response_ids: list[int]  # the fenced solution and the end-of-turn token


def warmstart_solution(task: Task, backend: str, choice: str) -> str | None:
    """The solution the warm start teaches for ``task``: ``"compact"`` prefers the task's
    compact solution and falls back to its primary one; ``"primary"`` takes the primary one;
    ``"compact+variants"`` the compact one here (``warmstart_solutions``: and the variants)."""
    if choice in ("compact", "compact+variants") and backend in task.compact_solutions:
        return task.compact_solutions[backend]
    return task.solutions.get(backend)


def warmstart_solutions(task: Task, backend: str, choice: str) -> list[str]:
    """Every solution the warm start teaches for ``task``: ``warmstart_solution``'s, and with
    ``"compact+variants"`` each of the task's variant solutions for ``backend`` as well (by
    style name; e.g. a reduction's warp-per-row layout beside its block-per-row one), each an
    example of its own: the policy learns both, and RL can prefer the faster."""
    first = warmstart_solution(task, backend, choice)
    variants = task.variant_solutions.get(backend, {}) if choice == "compact+variants" else {}
    return [*([first] if first is not None else []), *(variants[k] for k in sorted(variants))]


def warmstart_examples(
    policy: Policy, tasks: Sequence[Task], backend: str, choice: str = "compact"
) -> list[WarmStartExample]:
    """One example per solution the warm start teaches (``warmstart_solutions``: one per task
    with a reference solution for ``backend``, more with variants): the task's first prompt
    as rollouts render it (``first_prompt_ids``, the agent's default protocol) and the answer
    in the format rollouts parse (``answer_text``) with the end-of-turn token."""
    eos = end_of_turn_id(policy.tokenizer)  # the chat template's, not the tokenizer's eos
    proto = AgentConfig().protocol
    return [
        WarmStartExample(
            task=t.name,
            prompt_ids=first_prompt_ids(policy.tokenizer, t, backend, proto),
            response_ids=[
                *policy.tokenizer(answer_text(solution), add_special_tokens=False)["input_ids"],
                eos,
            ],
        )
        for t in tasks
        for solution in warmstart_solutions(t, backend, choice)
    ]


def auto_budget(longest_answer: int) -> int:
    """``max(512, ceil(1.25 * longest / 64) * 64)`` tokens."""
    fitted = math.ceil(longest_answer * AUTO_MARGIN / AUTO_ROUND) * AUTO_ROUND
    return max(AUTO_FLOOR, fitted)


BUDGET_FILE = "answer_budget.json"  # beside an adapter the trainer saved: its run's budget


def write_budget(adapter_dir: Path, budget: int) -> None:
    """Record beside a saved adapter the answer budget its run wrote answers within, so that
    a run started from the adapter directory alone (copied elsewhere, say) inherits it."""
    write_json_atomic(adapter_dir / BUDGET_FILE, {"max_new_tokens": budget})


def inherited_budget(init_from: str) -> int:
    """The resolved answer budget of the weights ``--init-from`` names, or 0 where they name
    none (an unreadable file, an adapter of another program's). A run directory's is its
    ``config.json``'s ``max_new_tokens``; an adapter directory's is the ``BUDGET_FILE`` the
    trainer writes beside every adapter it saves (``write_budget``), else that of the run it
    lies in (``RUN/adapter``, ``RUN/checkpoints/NAME/adapter``). (On the H100, 2026-12-06, an
    evaluation started from a warm start's adapter brought back alone got the 512-token floor
    against answers taught at 1,024 tokens, and cut 10 of its 23.)"""
    if not init_from:
        return 0
    path = Path(init_from)
    candidates = [path / "config.json", path / BUDGET_FILE]
    candidates += [p / "config.json" for p in (path.parent, path.parent.parent.parent)]
    for file in candidates:
        try:
            value = json.loads(file.read_text()).get("max_new_tokens")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def resolve_budget(
    requested: int,
    examples: Sequence[WarmStartExample],
    backend: str,
    warm_start: bool,
    inherited: int = 0,
) -> int:
    """The answer budget of the run: ``requested``, or derived when ``requested == 0``: with a
    warm start, ``auto_budget`` of its longest answer; else the budget of the run the weights
    come from (``inherited``, ``inherited_budget``): weights warm-started elsewhere write
    answers of their examples' length (on the H100, 2026-12-05, an RL run started from a
    warm start's weights got the 512-token floor against its 612-token answers, and cut a
    quarter of them); else the floor.

    Raises ``BudgetError`` when the warm start is on and one of its answers would not fit in an
    explicit budget: the policy would be taught answers it can never finish.
    """
    longest = max((len(e.response_ids) for e in examples), default=0)
    if requested == 0:
        if warm_start:
            return max(auto_budget(longest), inherited)
        return inherited or AUTO_FLOOR
    too_long = sorted(
        ((len(e.response_ids), e.task) for e in examples if len(e.response_ids) > requested),
        reverse=True,
    )
    if warm_start and too_long:
        listed = ", ".join(f"{name} ({n})" for n, name in too_long[:5])
        more = f" and {len(too_long) - 5} more" if len(too_long) > 5 else ""
        raise BudgetError(
            f"--max-new-tokens {requested} cannot hold the warm start's {backend} answers: "
            f"{len(too_long)} of {len(examples)} are longer (tokens: {listed}{more}); every "
            f"greedy answer to those tasks would be cut before ModelNew is complete. Use "
            f"--max-new-tokens 0 (auto: {auto_budget(longest)} here), a budget of at least "
            f"{longest}, or --warmstart-steps 0."
        )
    return requested
