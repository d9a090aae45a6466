"""Planning one evaluation (the parent): the job a candidate worker gets, and the checks its
candidate must pass, in order."""

from __future__ import annotations

from collections.abc import Mapping

from .._shared.protocol import Check, Job, JobConfig
from ..config import SandboxConfig
from ..tasks import Task

# Seeds of each stage's inputs, offset from ``SandboxConfig.seed``.
TRIAL_SEED, INPLACE_SEED, DISTRIBUTION_SEED = 1000, 2000, 3000
CONFIG_SEED, REVERIFY_SEED, AFTER_TIMING_SEED = 5000, 7000, 9000


def plan_job(
    task: Task,
    candidate: str | dict[str, str],
    config: SandboxConfig,
    sizes: Mapping[str, int] | None,
    distribution: str,
    measure_time: bool,
) -> Job:
    """The job for ``candidate`` on ``task``: the task's CPU-sized variant on the CPU backend,
    then the caller's ``sizes`` over it (the property checks)."""
    if config.atol is None or config.rtol is None or config.time_compile is None:
        raise ValueError("plan_job needs a resolved SandboxConfig (SandboxConfig.resolved())")
    base = {**(task.cpu_sizes if config.backend == "cpu" else {}), **(sizes or {})}
    return Job(
        task=task.source,
        task_name=task.name,
        candidate=candidate,
        sizes=base,
        checks=plan_checks(task, config, base, bool(sizes), measure_time),
        config=JobConfig(
            backend=config.backend,
            device="cuda:0" if config.backend == "cuda" else "cpu",
            trials=config.trials,
            atol=config.atol,
            rtol=config.rtol,
            dtype_tolerances={k: list(v) for k, v in config.dtype_tolerances.items()},
            seed=config.seed,
            warmup=config.warmup,
            repeats=config.repeats,
            timing_budget_s=config.timing_budget_s,
            timing_precision=config.timing_precision,
            time_compile=config.time_compile,
            require_custom_kernel=config.require_custom_kernel,
            runtime_checks=config.runtime_checks,
            allowed_torch_ops=tuple(config.allowed_torch_ops),
            reverify_speedup=config.reverify_speedup,
            device_exchange=config.device_exchange,
            max_output_tensor_bytes=config.max_output_tensor_bytes,
            task_digest=task.digest,
            distribution=distribution,
            measure_time=measure_time,
        ),
    )


def plan_checks(
    task: Task,
    config: SandboxConfig,
    base_sizes: Mapping[str, int],
    caller_sizes: bool,
    measure_time: bool,
) -> tuple[Check, ...]:
    """The checks a candidate must pass, in order.

    ``trial``: ``trials`` draws from ``get_inputs()``, then (unless the caller chose the sizes or
    runtime checks are off) one per ``extra_distributions`` (heavy tails catch work skipped
    where tolerances allow) and ``inplace``: the same input tensors overwritten with new
    values (catches results cached by tensor identity). ``config``: one per declared input
    configuration. ``reverify``: fresh draws, run only when the measured speedup exceeds
    ``reverify_speedup`` (``_shared.protocol.needs_reverify``). ``after``: fresh inputs after timing
    (catches warm-up detection).
    """
    seed, sizes = config.seed, dict(base_sizes)
    plan = [Check("trial", seed + TRIAL_SEED + t, sizes) for t in range(config.trials)]
    if not caller_sizes and config.runtime_checks:
        for k, distribution in enumerate(config.extra_distributions):
            label = f"with {distribution} inputs: "
            plan.append(Check("trial", seed + DISTRIBUTION_SEED + k, sizes, distribution, label))
        label = "after new values were written into the same input tensors: "
        plan.append(Check("inplace", seed + INPLACE_SEED, sizes, label=label))
    if not caller_sizes:
        for k, extra in enumerate(task.input_configs):
            label = f"with sizes {dict(extra)}: "
            plan.append(
                Check("config", seed + CONFIG_SEED + k, {**base_sizes, **extra}, label=label)
            )
    if measure_time:
        if config.runtime_checks:
            plan += [Check("reverify", seed + REVERIFY_SEED + k, sizes) for k in range(3)]
        plan.append(Check("after", seed + AFTER_TIMING_SEED, sizes))
    return tuple(plan)
