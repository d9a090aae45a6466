"""Tasks in KernelBench format: a module defining ``Model``, ``get_inputs``, ``get_init_inputs``.

A task is kept as source text (it travels to worker processes and is hashed for caches); the
caller's process only checks it statically and never executes it.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from .errors import TaskError

_REQUIRED = ("Model", "get_inputs", "get_init_inputs")
BACKENDS = ("cpu", "cuda")


@dataclass(frozen=True)
class Task:
    """A reference operator. ``solutions`` maps a backend to a known-good candidate source.

    ``compact_solutions`` maps a backend to a shorter known-good candidate (plain kernels, no
    tuning): correct like the primary one, often slower, and a fraction of its tokens. A warm
    start can teach these (``TrainConfig.warmstart_solutions``). ``variant_solutions`` maps a
    backend to other known-good candidates by style name (another layout of the same work,
    e.g. ``warp``: a warp per row where the compact one has a block): a warm start that
    teaches them too leaves the policy a choice that RL can settle by speed.
    """

    name: str
    source: str
    solutions: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    compact_solutions: Mapping[str, str] = field(default_factory=dict)
    variant_solutions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """Content hash of the task source (keys baseline and result caches)."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @functools.cached_property
    def _assignments(self) -> tuple[tuple[str, ast.expr], ...]:
        """Top-level ``NAME = value`` statements, in order: parsed once per task, then shared
        by ``sizes``, ``cpu_sizes`` and ``input_configs`` (read on every evaluation)."""
        return tuple(
            (node.targets[0].id, node.value)
            for node in ast.parse(self.source).body
            if isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        )

    @property
    def sizes(self) -> dict[str, int]:
        """Module-level integer constants (the problem sizes), read without running the code."""
        return {
            name: value.value
            for name, value in self._assignments
            if isinstance(value, ast.Constant) and type(value.value) is int
        }

    @property
    def cpu_sizes(self) -> dict[str, int]:
        """Sizes the CPU backend uses instead of the module's (``CPU_SIZES = {...}`` in the task).

        KernelBench problems are sized for GPUs; a task may declare a CPU-sized variant so the
        same file serves both backends. Empty when the task declares none.
        """
        return self._size_map("CPU_SIZES")

    @property
    def small_sizes(self) -> dict[str, int]:
        """Smaller GPU sizes a trainer may use instead of the module's (``SMALL_SIZES = {...}``
        in the task): sized for a shorter eager time (a fraction of a millisecond on an H200)
        whose timing is still reliable, so that a sandbox's lanes run many at once. ``resized``
        makes the task at them. Empty when the task declares none."""
        return self._size_map("SMALL_SIZES")

    def _size_map(self, name: str) -> dict[str, int]:
        """The literal ``name = {SIZE: int, ...}`` over module-level sizes, or {} when absent."""
        value = self._literal(name)
        if value is None:
            return {}
        sizes = self.sizes
        if not isinstance(value, dict) or any(
            k not in sizes or type(v) is not int or v < 1 for k, v in value.items()
        ):
            raise TaskError(
                f"task {self.name!r}: {name} must map module-level integer sizes "
                f"({sorted(sizes)}) to positive ints"
            )
        return dict(value)

    def resized(self, sizes: Mapping[str, int]) -> Task:
        """This task with its module-level sizes set to ``sizes`` in its source (so a prompt
        shows them, and caches key on them); solutions and name kept. Raises ``TaskError`` for
        a name that is not a module-level integer size."""
        known = self.sizes
        unknown = sorted(set(sizes) - set(known))
        if unknown or any(type(v) is not int or v < 1 for v in sizes.values()):
            raise TaskError(
                f"task {self.name!r}: cannot resize {unknown or dict(sizes)}: sizes are "
                f"module-level integers ({sorted(known)}) set to positive ints"
            )
        lines = self.source.splitlines(keepends=True)
        for name, value in self._assignments:
            if (
                name in sizes
                and isinstance(value, ast.Constant)
                and value.lineno == value.end_lineno
            ):
                row, end = value.lineno - 1, value.end_col_offset
                assert end is not None
                text = lines[row].encode()  # ast offsets count UTF-8 bytes
                new = str(sizes[name]).encode()
                lines[row] = (text[: value.col_offset] + new + text[end:]).decode()
        return replace(self, source="".join(lines))

    @property
    def input_configs(self) -> list[dict[str, int]]:
        """Extra size configurations every candidate must also be correct on
        (``INPUT_CONFIGS = [{"BATCH": 1, "DIM": 17}, ...]`` in the task); empty when none."""
        value = self._literal("INPUT_CONFIGS")
        if value is None:
            return []
        sizes = self.sizes
        if not isinstance(value, list) or not all(
            isinstance(c, dict)
            and all(k in sizes and type(v) is int and v >= 1 for k, v in c.items())
            for c in value
        ):
            raise TaskError(
                f"task {self.name!r}: INPUT_CONFIGS must be a list of dicts mapping module-level "
                f"integer sizes ({sorted(sizes)}) to positive ints"
            )
        return [dict(c) for c in value]

    def _literal(self, name: str) -> object | None:
        """The literal value first assigned to ``name`` at module level, or ``None``."""
        for target, value in self._assignments:
            if target == name:
                try:
                    return ast.literal_eval(value)
                except ValueError as exc:
                    raise TaskError(f"task {self.name!r}: {name} must be a literal") from exc
        return None

    def sizes_for(self, backend: str) -> dict[str, int]:
        """The problem sizes used on ``backend`` ("cpu" applies ``cpu_sizes``)."""
        return {**self.sizes, **self.cpu_sizes} if backend == "cpu" else self.sizes


def task_from_source(source: str, name: str = "task", **kwargs: object) -> Task:
    """Build a ``Task`` from module source, checking the KernelBench contract statically."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TaskError(
            f"task {name!r} is not valid Python: {exc.msg} (line {exc.lineno})"
        ) from exc
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    }
    defined |= {
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    missing = [n for n in _REQUIRED if n not in defined]
    if missing:
        raise TaskError(
            f"task {name!r} does not define {', '.join(missing)}; a KernelBench task module "
            "defines class Model(nn.Module), get_inputs() and get_init_inputs()"
        )
    return Task(name=name, source=source, **kwargs)  # type: ignore[arg-type]


def load_task(path: str | Path) -> Task:
    """Load a task from a ``.py`` file, or from a directory holding ``task.py`` and solutions.

    In a directory, ``solution_cpu.py`` / ``solution_cuda.py`` are read as reference solutions,
    ``solution_<backend>_compact.py`` as compact ones, any other ``solution_<backend>_<style>.py``
    as the variant of that style.
    """
    path = Path(path)
    if path.is_dir():
        task_file = path / "task.py"
        if not task_file.is_file():
            raise TaskError(f"{path} is a directory without task.py")
        solutions = {
            b: (path / f"solution_{b}.py").read_text()
            for b in BACKENDS
            if (path / f"solution_{b}.py").is_file()
        }
        compact = {
            b: (path / f"solution_{b}_compact.py").read_text()
            for b in BACKENDS
            if (path / f"solution_{b}_compact.py").is_file()
        }
        variants = {
            b: {
                f.stem.removeprefix(f"solution_{b}_"): f.read_text()
                for f in sorted(path.glob(f"solution_{b}_*.py"))
                if f.stem != f"solution_{b}_compact"
            }
            for b in BACKENDS
        }
        return task_from_source(
            task_file.read_text(),
            name=path.name,
            solutions=solutions,
            compact_solutions=compact,
            variant_solutions={b: v for b, v in variants.items() if v},
        )
    if not path.is_file():
        raise TaskError(f"task file {path} does not exist")
    return task_from_source(path.read_text(), name=path.stem)


def load_tasks(path: str | Path) -> list[Task]:
    """Load every task under a directory (``*.py`` files and task directories), sorted by name."""
    path = Path(path)
    if path.is_file():
        return [load_task(path)]
    tasks = []
    for child in sorted(path.iterdir()):
        if (child.is_dir() and (child / "task.py").is_file()) or (
            child.suffix == ".py" and not child.name.startswith("_")
        ):
            tasks.append(load_task(child))
    if not tasks:
        raise TaskError(f"no tasks found under {path}")
    return tasks


# A small, CPU-quick subset: the embedded default training run uses it.
STARTER_SUITE = (
    "add_mul",
    "gelu_tanh",
    "layernorm",
    "linear_relu",
    "relu",
    "row_sum",
    "scale_shift_relu",
    "silu",
    "softmax",
)


def builtin_tasks(suite: str = "all") -> list[Task]:
    """The built-in tasks, each with reference solutions for the CPU and CUDA backends.

    ``suite="all"`` returns every task; ``suite="starter"`` the small ``STARTER_SUITE``.
    """
    if suite not in ("all", "starter"):
        raise ValueError(f"unknown built-in suite {suite!r}; use 'all' or 'starter'")
    root = resources.files("cuda_agent.kernel_sandbox") / "builtin"
    tasks = []
    for child in sorted(root.iterdir(), key=lambda p: p.name):
        if suite == "starter" and child.name not in STARTER_SUITE:
            continue
        if child.is_dir() and (child / "task.py").is_file():
            tasks.append(load_task(Path(str(child))))
    return tasks
