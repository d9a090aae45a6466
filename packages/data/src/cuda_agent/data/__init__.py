"""cuda_agent.data: kernel tasks as data, importable without the trainer.

Loaders (KernelBench directories, CUDA-Agent-Ops-6K parquet rows), task sets with family splits
(``TaskSet``), synthesis by operator composition (``compose``, ``synthesize``), the filters run
in the sandbox (``run_filters``) and decontamination by normalised-AST similarity.
"""

from .catalogue import Op, catalogue
from .compose import OP_COUNTS, Composition, CompositionError, compose
from .filters import SANDBOX_FILTERS, Filters, FilterVerdict, run_filters
from .loaders import load_embedded, load_kernelbench, load_ops6k
from .similarity import decontaminate, deduplicate, nearest, normalized_ast, similarity
from .sizing import WINDOWS
from .solutions import can_write, cpu_solution
from .synth import SynthReport, synthesize
from .taskset import TaskEntry, TaskSet, family_of

__all__ = [
    "OP_COUNTS",
    "SANDBOX_FILTERS",
    "WINDOWS",
    "Composition",
    "CompositionError",
    "FilterVerdict",
    "Filters",
    "Op",
    "SynthReport",
    "TaskEntry",
    "TaskSet",
    "can_write",
    "catalogue",
    "compose",
    "cpu_solution",
    "decontaminate",
    "deduplicate",
    "family_of",
    "load_embedded",
    "load_kernelbench",
    "load_ops6k",
    "nearest",
    "normalized_ast",
    "run_filters",
    "similarity",
    "synthesize",
]

__version__ = "0.1.0"
