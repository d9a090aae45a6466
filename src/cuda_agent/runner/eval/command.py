"""``cuda-agent eval``: load the tasks, the policy (local model, a trained adapter or an
OpenAI-compatible endpoint) and the sandbox, then ``evaluate.evaluate_tasks``.

A user's mistake (tasks or adapter not there, endpoint unreachable) raises TaskError,
ValueError, ModelNotAvailableError or RemotePolicyError before any work is done.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, get_args

from cuda_agent.kernel_sandbox import Task, TaskError

from ..checkpoint import job_log_path, trained_weights
from ..config import Backend, check_repetition_stop, parse_set_samples


@dataclass(frozen=True)
class EvalOptions:
    tasks: str = "starter"  # a directory, a file or a named set (``eval_tasks_from``)
    kernelbench: str = ""  # the checkout of "kernelbench-l1-subset" ("": $CUDA_AGENT_KERNELBENCH)
    model: str = ""  # "" = the adapter's base model, else smollm2-135m-gguf
    adapter: str = ""  # a directory written by Policy.save, or a run directory holding adapter/
    endpoint: str = ""  # an OpenAI-compatible API root, instead of a local model
    api_model: str = ""
    device: str = "auto"
    turns: int = 1
    samples: int = 1
    # other sample counts for some '+'-joined sets of ``tasks``: "SET=N[,SET=N...]"
    set_samples: str = ""
    temperature: float = 0.0
    max_new_tokens: int = 512
    # end an answer in an exact loop (PolicyConfig.repetition_stop's window; 0: off, also for an
    # adapter trained with it)
    repetition_stop: int = 0
    out: str = ""  # "" = runs/eval-<timestamp>
    backend: Backend = "auto"
    time_compile: bool = False  # False = the sandbox's default (timed on CUDA only)
    seed: int = 0
    batch: int = 4
    sizes: str = "full"  # "small": each task at its smaller GPU variant where it has one
    # the episodes in turns of sampling and judging (0: 2 on the CUDA backend, as train's)
    micro_batches: int = 0

    def __post_init__(self) -> None:
        if self.micro_batches < 0:
            raise ValueError(f"--micro-batches must be 0 (auto) or more, not {self.micro_batches}")
        check_repetition_stop(self.repetition_stop)
        if self.backend not in get_args(Backend):
            raise ValueError(f"--backend must be cpu, cuda or auto, not {self.backend!r}")
        if self.sizes not in ("full", "small"):
            raise ValueError(f"--sizes must be full or small, not {self.sizes!r}")
        parse_set_samples(self.set_samples, self.tasks, "--set-samples")  # ValueError if amiss


def eval_tasks_from(spec: str, kernelbench: str = "") -> list[Task]:
    """The tasks ``--tasks`` names: a task directory or file, or a named set of
    ``task_sets`` ("builtin" or "all", "starter", "compact", "synth", "heldout-ops",
    "heldout-compositions", "kernelbench-l1-subset" read from ``kernelbench``; ``set:N`` its first
    N), several joined by "+"."""
    from ..task_sets import EVAL_SETS, TRAINING_SETS, load_set, set_and_count

    named = {*TRAINING_SETS, *EVAL_SETS, "all"}
    parts = spec.split("+")
    for part in parts:
        if set_and_count(part)[0] not in named and not Path(part).exists():
            raise TaskError(
                f"no task file or directory {part} (or name a set: {', '.join(sorted(named))})"
            )
    return load_set("+".join("builtin" if p == "all" else p for p in parts), kernelbench)


def tasks_of(options: EvalOptions) -> list[Task]:
    """The tasks ``options`` name, at their smaller GPU variants with ``sizes="small"`` (as
    ``cuda-agent train --eval-sizes small`` evaluates them: ``task_sets.at_small_sizes``)."""
    from ..task_sets import at_small_sizes

    tasks = eval_tasks_from(options.tasks, options.kernelbench)
    return at_small_sizes(tasks) if options.sizes == "small" else tasks


def load_policy(options: EvalOptions) -> tuple[Any, str]:
    """The policy to evaluate and its name."""
    if options.endpoint:
        if options.adapter:
            raise ValueError("--adapter needs a local model: not with --endpoint")
        from cuda_agent.policy import RemotePolicy

        remote = RemotePolicy(options.endpoint, model=options.api_model or "default")
        served = remote.models()  # also checks that the endpoint answers, before any work
        name = options.api_model or (served[0] if served else "")
        if not name:
            raise ValueError(f"{options.endpoint} serves no model; name one with --api-model")
        return RemotePolicy(options.endpoint, model=name), name
    from cuda_agent.policy import DEFAULT_MODEL, Policy, PolicyConfig

    settings: dict[str, Any] = {"model": DEFAULT_MODEL}
    # --adapter: a run directory (its adapter/, or its last checkpoint's) or an adapter's
    where = trained_weights(options.adapter) if options.adapter else None
    if where is not None and (where / "policy_config.json").is_file():
        saved = json.loads((where / "policy_config.json").read_text())
        known = {f.name for f in fields(PolicyConfig)}
        settings.update({k: v for k, v in saved.items() if k in known})
    if options.model:
        settings["model"] = options.model
    settings["device"] = options.device
    settings["repetition_stop"] = options.repetition_stop
    policy = Policy.load(PolicyConfig(**settings))
    if where is not None:
        policy.load_adapter(where)
    name = str(settings["model"]) + (f" + {where}" if where is not None else "")
    return policy, name


def run_eval(
    options: EvalOptions, progress: bool = True, log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Evaluate as ``options`` say; returns the ``eval.json`` dict. Progress lines and the
    closing table (``report.terminal.eval_table``) go to ``log`` (default: ``tqdm.write``)."""
    from tqdm import tqdm

    from cuda_agent.agent import AgentConfig
    from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig

    from ..report.terminal import eval_table
    from ..task_sets import labelled_parts
    from .evaluate import evaluate_tasks, micro_batches

    started = time.perf_counter()

    tasks = tasks_of(options)
    # each '+'-joined set a chunk of its own (``batch`` tasks at a time), with its samples
    spec = "+".join("builtin" if p == "all" else p for p in options.tasks.split("+"))
    parts = labelled_parts(spec, tasks, options.kernelbench)
    samples = parse_set_samples(options.set_samples, options.tasks, "--set-samples")
    samples = {("builtin" if k == "all" else k): v for k, v in samples.items()}
    policy, name = load_policy(options)
    out = Path(options.out or time.strftime("runs/eval-%Y%m%d-%H%M%S"))
    config = SandboxConfig(
        backend=options.backend,
        time_compile=True if options.time_compile else None,
    )
    say = log or tqdm.write
    out.mkdir(parents=True, exist_ok=True)
    with Sandbox(config, job_log=job_log_path(out)) as sandbox:
        say(f"evaluating {name} on {len(tasks)} tasks ({sandbox.backend}); writing {out}")
        result = evaluate_tasks(
            policy,
            sandbox,
            tasks,
            turns=options.turns,
            samples=options.samples,
            temperature=options.temperature,
            max_new_tokens=options.max_new_tokens,
            out_dir=out,
            log=say,
            seed=options.seed,
            batch=options.batch,
            parts=parts,
            part_samples=samples,
            model=name,
            progress=progress,
            agent_config=AgentConfig(
                micro_batches=micro_batches(options.micro_batches, sandbox.backend)
            ),
        )
    say(eval_table(result, out, time.perf_counter() - started))
    return result
