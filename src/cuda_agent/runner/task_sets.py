"""The run's training tasks and held-out tasks, which never meet.

By default the training set is the built-in starter suite and the held-out set a fixed list of
built-in tasks whose operators the starter suite does not have (``HELDOUT``). ``--tasks`` and
``--eval-tasks`` take a directory or file each (KernelBench directories load as they are) or a
named set, several joined by ``+``:

- training sets (``TRAINING_SETS``): ``builtin`` (every built-in task; with the default
  held-out set, less the held-out ones), ``compact`` (the built-in tasks with a compact
  reference solution: elementwise operators and row reductions whose warm-start answers fit a
  768-token budget), ``starter``, ``synth`` (the 200 synthesized compositions shipped with
  cuda-agent-data), ``synth-variants`` (the 47 of them with a variant solution: the row
  reductions, whose warp-per-row layout a warm start with ``--warmstart-solutions
  compact+variants`` teaches beside the block-per-row one; RL from that warm start on these
  tasks has two answers per prompt to choose between), ``synth-axes`` (the compositions
  shipped with cuda-agent-data that reduce or normalise along the axis an integer
  constructor argument names, ``dim``, as KernelBench's level-1 reductions and softmax do: a
  middle axis of a 3-D input or the last);
- evaluation sets (``EVAL_SETS``): ``heldout-ops`` (the six built-in held-out tasks, the
  default), ``heldout-compositions`` (compositions shipped with cuda-agent-data whose operator
  combinations no training set has: ``data.load_embedded("heldout_compositions")``),
  ``heldout-axes`` (their counterpart for ``synth-axes``: axis reductions and normalisations
  whose operator combinations no training set has) and
  ``kernelbench-l1-subset`` (``kernelbench_subset.L1_SUBSET`` from a KernelBench checkout).

A named set followed by ``:N`` is its first N tasks, in the set's own order (a fixed subset:
``heldout-compositions:6``; the CPU default evaluates it beside ``heldout-ops``).

A task in both sets, by name or by source, is refused.

With ``train_sizes = "small"`` each training task that has a smaller GPU variant
(``Task.small_sizes``, or ``small_sizes`` in an embedded compositions' manifest) is trained
on at those sizes (``Task.resized``); with ``eval_sizes = "small"`` each held-out task that has
one is evaluated at them (the held-out compositions: their manifest's ``small_sizes``, made by
the training compositions' rule). Otherwise every task keeps its module's sizes.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from cuda_agent.kernel_sandbox import Task, builtin_tasks, load_tasks

from .config import TrainConfig


class TaskSetError(ValueError):
    """The training and held-out sets meet."""


TRAINING_SETS = ("builtin", "starter", "compact", "synth", "synth-variants", "synth-axes")
EVAL_SETS = ("heldout-ops", "heldout-compositions", "heldout-axes", "kernelbench-l1-subset")
BUILTIN_SETS = set(TRAINING_SETS)
# the named sets shipped with cuda-agent-data (``data.load_embedded``)
EMBEDDED_SETS = {
    "synth": "cpu_compositions",
    "synth-axes": "axis_compositions",
    "heldout-compositions": "heldout_compositions",
    "heldout-axes": "heldout_axis_compositions",
}
# Built-in tasks never trained on by default: elementwise activations and row reductions
# beside the starter suite's relu, silu, gelu_tanh and row_sum, none of them in it.
HELDOUT = ("leaky_relu", "elu", "tanh", "hardswish", "row_max", "row_mean")


HELDOUT_EMBEDDED = ("heldout_compositions", "heldout_axis_compositions")


def heldout_guard(leave_out: Collection[str] = ()) -> tuple[set[str], dict[str, str]]:
    """What synthesized training tasks must stay clear of: the operator combinations of the
    evaluation sets shipped here (the built-in held-out tasks and ``HELDOUT_EMBEDDED``, less
    the ones named in ``leave_out``: a held-out set made again must not be kept clear of
    itself; ``cuda_agent.data`` families) and their sources (by name)."""
    from cuda_agent.data import family_of, load_embedded

    heldout = [t for t in builtin_tasks() if t.name in HELDOUT]
    families = {family_of(t) for t in heldout}
    sources = {t.name: t.source for t in heldout}
    for name in (n for n in HELDOUT_EMBEDDED if n not in leave_out):
        for entry in load_embedded(name).entries:
            families.add(entry.family)
            sources[entry.name] = entry.task.source
    return families, sources


def set_and_count(source: str) -> tuple[str, int | None]:
    """``(name, N)`` for a named set's first N tasks (``NAME:N``), else ``(source, None)``;
    ValueError when N is not a positive integer."""
    name, colon, count = source.rpartition(":")
    if not colon or name not in (*TRAINING_SETS, *EVAL_SETS):
        return source, None
    if not count.isdigit() or int(count) < 1:
        raise ValueError(f"{source}: a set's subset is its first N tasks, N a positive integer")
    return name, int(count)


def load_set(source: str, kernelbench: str = "") -> list[Task]:
    """Tasks of ``source``: a named set (module docstring), a directory or file, or several
    joined by ``+``. ``kernelbench`` is the KernelBench checkout ``kernelbench-l1-subset``
    loads from (empty: ``$CUDA_AGENT_KERNELBENCH``)."""
    if "+" in source:
        return [task for part in source.split("+") for task in load_set(part, kernelbench)]
    name, count = set_and_count(source)
    if count is not None:
        return load_set(name, kernelbench)[:count]
    if source == "builtin":
        return builtin_tasks()
    if source == "starter":
        return builtin_tasks("starter")
    if source == "compact":
        return [t for t in builtin_tasks() if t.compact_solutions and t.name not in HELDOUT]
    if source == "heldout-ops":
        return [t for t in builtin_tasks() if t.name in HELDOUT]
    if source == "synth-variants":
        return [t for t in load_set("synth") if t.variant_solutions]
    if source in EMBEDDED_SETS:
        from cuda_agent.data import load_embedded

        return load_embedded(EMBEDDED_SETS[source]).tasks()
    if source == "kernelbench-l1-subset":
        from .kernelbench_subset import load_l1_subset

        return load_l1_subset(kernelbench)
    return load_tasks(source)


def named_parts(source: str, kernelbench: str = "") -> dict[str, list[str]]:
    """Each ``+``-joined part of ``source`` and its task names, when there are several (the
    held-out table then shows each set apart); ``{}`` for one."""
    parts = source.split("+")
    if len(parts) < 2:
        return {}
    return {part: [t.name for t in load_set(part, kernelbench)] for part in parts}


def at_small_sizes(tasks: list[Task]) -> list[Task]:
    """``tasks``, each at its smaller GPU variant where it has one (its ``SMALL_SIZES``, else
    the embedded compositions' manifest entry for its source), else as it is."""
    from cuda_agent.data import load_embedded

    shipped = {
        entry.task.source: entry.metadata["small_sizes"]
        for name in EMBEDDED_SETS.values()
        for entry in load_embedded(name).entries
        if entry.metadata.get("small_sizes")
    }
    resized = []
    for task in tasks:
        small = task.small_sizes or shipped.get(task.source)
        resized.append(task.resized(small) if small else task)
    return resized


def labelled_parts(
    source: str, tasks: Sequence[Task], kernelbench: str = ""
) -> list[tuple[str, list[str]]]:
    """``tasks`` (names) by the ``+``-joined part of ``source`` each comes from, in the
    parts' order (a task in the first part that names it; tasks of none last, unlabelled); one
    unlabelled part of all when ``source`` names one set. An evaluation judges each part as
    its own chunk (``evaluate.evaluate_tasks``' ``parts``)."""
    names = [t.name for t in tasks]
    left = set(names)
    out = []
    for label, part in named_parts(source, kernelbench).items() if source else ():
        mine = [n for n in part if n in left]
        left -= set(mine)
        if mine:
            out.append((label, mine))
    rest = [n for n in names if n in left]
    return [*out, ("", rest)] if rest or not out else out


def task_sets(config: TrainConfig) -> tuple[list[Task], list[Task]]:
    """(training tasks, held-out tasks) of ``config``; TaskSetError when they meet."""
    if config.eval_tasks:
        heldout = load_set(config.eval_tasks, config.kernelbench)
    elif not config.tasks or set(config.tasks.split("+")) <= BUILTIN_SETS:
        heldout = load_set("heldout-ops")
    else:
        heldout = []  # a task directory of the user's and no held-out set: nothing to split
    train = load_set(config.tasks or "starter", config.kernelbench)
    if not config.eval_tasks and "builtin" in config.tasks.split("+"):
        train = [t for t in train if t.name not in HELDOUT]
    names = {t.name for t in heldout} & {t.name for t in train}
    sources = {t.source for t in heldout} & {t.source for t in train}  # (before any resizing)
    if names or sources:
        both = sorted(names) or sorted(t.name for t in train if t.source in sources)
        raise TaskSetError(
            f"the training and held-out task sets must not meet; in both: {', '.join(both)}"
        )
    if config.train_sizes == "small":
        train = at_small_sizes(train)
    if config.eval_sizes == "small":
        heldout = at_small_sizes(heldout)
    if config.eval_limit:
        heldout = heldout[: config.eval_limit]
    return train, heldout
