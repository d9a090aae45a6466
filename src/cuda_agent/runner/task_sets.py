"""The run's training tasks and held-out tasks, which never meet.

By default the training set is the built-in starter suite and the held-out set a fixed list of
built-in tasks whose operators the starter suite does not have (``HELDOUT``). ``--tasks`` and
``--eval-tasks`` take a directory or file each (KernelBench directories load as they are),
``builtin`` (every built-in task; with the default held-out set, less the held-out ones),
``compact`` (the built-in tasks with a compact reference solution: elementwise operators and
row reductions whose warm-start answers fit a 768-token budget) or ``starter``. A task in both sets, by name or by source, is refused.
"""

from __future__ import annotations

from cuda_agent.kernel_sandbox import Task, builtin_tasks, load_tasks

from .config import TrainConfig


# Built-in tasks never trained on by default: elementwise activations and row reductions
# beside the starter suite's relu, silu, gelu_tanh and row_sum, none of them in it.
class TaskSetError(ValueError):
    """The training and held-out sets meet."""


BUILTIN_SETS = {"builtin", "starter", "compact", "synth"}
HELDOUT = ("leaky_relu", "elu", "tanh", "hardswish", "row_max", "row_mean")


def heldout_guard() -> tuple[set[str], dict[str, str]]:
    """What synthesized training tasks must stay clear of: the operator combinations of the
    built-in held-out tasks (``cuda_agent.data`` families) and their sources (by name)."""
    from cuda_agent.data import family_of

    heldout = [t for t in builtin_tasks() if t.name in HELDOUT]
    return {family_of(t) for t in heldout}, {t.name: t.source for t in heldout}


def _load(source: str) -> list[Task]:
    """Tasks of ``source``: ``builtin``, ``starter``, ``compact``, ``synth`` (the synthesized
    compositions shipped with cuda-agent-data), a directory or file, or several joined by
    ``+``."""
    if "+" in source:
        return [task for part in source.split("+") for task in _load(part)]
    if source == "builtin":
        return builtin_tasks()
    if source == "starter":
        return builtin_tasks("starter")
    if source == "compact":
        return [t for t in builtin_tasks() if t.compact_solutions and t.name not in HELDOUT]
    if source == "synth":
        from cuda_agent.data import load_embedded

        return load_embedded().tasks()
    return load_tasks(source)


def task_sets(config: TrainConfig) -> tuple[list[Task], list[Task]]:
    """(training tasks, held-out tasks) of ``config``; TaskSetError when they meet."""
    if config.eval_tasks:
        heldout = _load(config.eval_tasks)
    elif not config.tasks or set(config.tasks.split("+")) <= BUILTIN_SETS:
        heldout = [t for t in builtin_tasks() if t.name in HELDOUT]
    else:
        heldout = []  # a task directory of the user's and no held-out set: nothing to split
    train = _load(config.tasks or "starter")
    if not config.eval_tasks and "builtin" in config.tasks.split("+"):
        train = [t for t in train if t.name not in HELDOUT]
    names = {t.name for t in heldout} & {t.name for t in train}
    sources = {t.source for t in heldout} & {t.source for t in train}
    if names or sources:
        both = sorted(names) or sorted(t.name for t in train if t.source in sources)
        raise TaskSetError(
            f"the training and held-out task sets must not meet; in both: {', '.join(both)}"
        )
    if config.eval_limit:
        heldout = heldout[: config.eval_limit]
    return train, heldout
