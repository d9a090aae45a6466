"""cuda_agent.kernel_sandbox: compile, verify and time candidate kernels, isolated in workers."""

from .config import TOLERANCE_PRESETS, Deadlines, SandboxConfig, Tolerances
from .errors import CandidateError, CompileError, TaskError
from .ray_sandbox import RaySandbox
from .result import STATUSES, EvalResult, Status, TrialOutcome
from .sandbox import BaselineStatus, Sandbox, evaluate_solutions
from .tasks import STARTER_SUITE, Task, builtin_tasks, load_task, load_tasks, task_from_source
from .validate import (
    TaskFinding,
    TaskValidation,
    TaskValidator,
    validate_task,
    validate_tasks,
)

__all__ = [
    "STARTER_SUITE",
    "STATUSES",
    "TOLERANCE_PRESETS",
    "BaselineStatus",
    "CandidateError",
    "CompileError",
    "Deadlines",
    "EvalResult",
    "RaySandbox",
    "Sandbox",
    "SandboxConfig",
    "Status",
    "Task",
    "TaskError",
    "TaskFinding",
    "TaskValidation",
    "TaskValidator",
    "Tolerances",
    "TrialOutcome",
    "builtin_tasks",
    "evaluate_solutions",
    "load_task",
    "load_tasks",
    "task_from_source",
    "validate_task",
    "validate_tasks",
]

__version__ = "0.1.0"
