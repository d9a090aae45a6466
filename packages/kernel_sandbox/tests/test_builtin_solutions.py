"""The built-in tasks and their reference solutions: well formed, and correct against the task.

The CPU solutions run here, at each task's CPU sizes (``CPU_SIZES``, as the CPU sandbox applies
them); the CUDA solutions run only where a GPU (and CuPy) is present, at the module (GPU) sizes.
"""

from __future__ import annotations

import ast
import copy
import itertools
import types
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from cuda_agent.kernel_sandbox.launch import launch_count
from cuda_agent.kernel_sandbox.tasks import BACKENDS, Task, builtin_tasks

TASKS = builtin_tasks()
_ids = itertools.count()
# (task, backend, kind): every reference solution, primary and compact.
SOLUTIONS = [
    (t, b, kind)
    for t in TASKS
    for kind, solutions in (("primary", t.solutions), ("compact", t.compact_solutions))
    for b in solutions
]


def _solution_id(case: tuple[Task, str, str]) -> str:
    task, backend, kind = case
    return f"{task.name}-{backend}" + ("-compact" if kind == "compact" else "")


def _source(task: Task, backend: str, kind: str) -> str:
    return (task.solutions if kind == "primary" else task.compact_solutions)[backend]


# ATen ops a solution may run itself: allocation and views. Everything else must be a kernel.
_ALLOWED_OPS = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "view",
    "_unsafe_view",
    "reshape",
    "alias",
    "detach",
    "expand",
    "unsqueeze",
    "squeeze",
    "as_strided",
}


class _OpRecorder(TorchDispatchMode):
    """Records the name of every ATen op dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(
        self,
        func: Any,
        _types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        self.ops.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def _load(source: str, label: str) -> types.ModuleType:
    """Execute module source under a fresh, unique module name."""
    module = types.ModuleType(f"_builtin_{label}_{next(_ids)}")
    exec(compile(source, f"<{label}>", "exec"), module.__dict__)
    return module


def _load_task(task: Task, backend: str) -> types.ModuleType:
    """The task module with ``backend``'s problem sizes set, as the sandbox does (CPU_SIZES on
    the CPU backend, the module's own sizes on CUDA) before get_init_inputs()/get_inputs()."""
    module = _load(task.source, f"{task.name}_task")
    for name, value in task.sizes_for(backend).items():
        setattr(module, name, value)
    return module


def _models(
    task: Task, backend: str, seed: int = 0, kind: str = "primary"
) -> tuple[nn.Module, nn.Module, Any]:
    """The reference Model and the solution's ModelNew, sharing (perturbed) weights."""
    ref_mod = _load_task(task, backend)
    new_mod = _load(_source(task, backend, kind), f"{task.name}_solution_{backend}_{kind}")
    torch.manual_seed(seed)
    ref = ref_mod.Model(*ref_mod.get_init_inputs())
    torch.manual_seed(seed)
    new = new_mod.ModelNew(*ref_mod.get_init_inputs())
    # Default inits (LayerNorm's ones and zeros) would hide a solution that ignores a weight.
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.1 * torch.randn_like(p))
    new.load_state_dict(ref.state_dict())
    return ref.eval(), new.eval(), ref_mod


def _run_solution(new: nn.Module, inputs: list[Any]) -> tuple[torch.Tensor, set[str]]:
    before = launch_count()
    with torch.no_grad(), _OpRecorder() as recorder:
        out = new(*inputs)
    assert launch_count() > before, "the solution launched no kernel"
    return out, recorder.ops


def test_builtin_suite_has_unique_tasks() -> None:
    names = [t.name for t in TASKS]
    assert len(names) >= 8
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_task_is_well_formed(task: Task) -> None:
    assert set(task.solutions) == set(BACKENDS)
    tree = ast.parse(task.source)
    assert ast.get_docstring(tree), "task.py starts with a docstring describing the op"
    assert task.sizes, "problem sizes are module-level integers"


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_task_declares_cpu_sizes(task: Task) -> None:
    # GPU-scale module sizes, and a CPU-sized variant of every one of them, never larger.
    gpu, cpu = task.sizes, task.cpu_sizes
    assert set(cpu) == set(gpu), f"CPU_SIZES must cover {sorted(gpu)}; it has {sorted(cpu)}"
    bigger = {n: (cpu[n], gpu[n]) for n in gpu if cpu[n] > gpu[n]}
    assert not bigger, f"CPU sizes exceed the GPU sizes: {bigger}"
    assert task.sizes_for("cpu") == cpu and task.sizes_for("cuda") == gpu


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_gpu_sized_inputs_fit(task: Task) -> None:
    # Shapes only (meta tensors, nothing allocated): every GPU-size input is at most 512 MB.
    task_mod = _load_task(task, "cuda")
    with torch.device("meta"):
        inputs = task_mod.get_inputs()
    for x in inputs:
        assert x.numel() * x.element_size() <= 512 * 2**20, f"input {tuple(x.shape)} is too big"


def _calls(source: str, func: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == func
    ]


def _defines_model_new(source: str) -> bool:
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.parse(source).body)


def test_the_starter_suite_has_compact_cuda_solutions() -> None:
    # The GPU warm start teaches these (a 135M model and 3,600-token GEMMs: see runner/budget.py).
    starter = builtin_tasks("starter")
    assert all("cuda" in t.compact_solutions for t in starter)
    for t in starter:
        assert len(t.compact_solutions["cuda"]) < len(t.solutions["cuda"])


@pytest.mark.parametrize("case", SOLUTIONS, ids=_solution_id)
def test_solutions_use_the_launcher(case: tuple[Task, str, str]) -> None:
    task, backend, kind = case
    source = _source(task, backend, kind)
    assert _defines_model_new(source)
    if backend == "cpu":
        assert _calls(source, "cpu_kernel"), "the CPU solution builds its kernel with cpu_kernel"
        return
    kernels = _calls(source, "cuda_kernel")
    assert kernels, "the CUDA solution builds its kernel with cuda_kernel"
    for call in kernels:
        src, name = (a.value if isinstance(a, ast.Constant) else None for a in call.args[:2])
        assert isinstance(src, str) and isinstance(name, str)
        assert 'extern "C" __global__' in src
        assert f"void {name}(" in src


@pytest.mark.parametrize("case", [c for c in SOLUTIONS if c[1] == "cpu"], ids=_solution_id)
def test_cpu_solution_matches_reference(case: tuple[Task, str, str]) -> None:
    task, _, kind = case
    ref, new, task_mod = _models(task, "cpu", kind=kind)
    for trial in range(3):
        torch.manual_seed(100 + trial)
        inputs = task_mod.get_inputs()
        with torch.no_grad():
            expected = ref(*inputs)
        out, ops = _run_solution(new, inputs)
        assert ops <= _ALLOWED_OPS, f"the solution computes with torch ops: {ops - _ALLOWED_OPS}"
        assert out.shape == expected.shape and out.dtype == expected.dtype
        err = (out - expected).abs().max().item()
        assert torch.allclose(out, expected, atol=1e-4, rtol=1e-4), f"max abs error {err:.3g}"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", [c for c in SOLUTIONS if c[1] == "cuda"], ids=_solution_id)
def test_cuda_solution_matches_reference(case: tuple[Task, str, str]) -> None:
    pytest.importorskip("cupy")
    task, _, kind = case
    ref, new, task_mod = _models(task, "cuda", kind=kind)
    # The float64 reference runs on the GPU too: at GPU sizes it would be slow on the CPU.
    ref, new = ref.cuda(), new.cuda()
    ref64 = copy.deepcopy(ref).double()
    for trial in range(3):
        torch.manual_seed(100 + trial)
        inputs = [x.cuda() for x in task_mod.get_inputs()]
        with torch.no_grad():
            expected32 = ref(*inputs)
            expected = ref64(*[x.double() for x in inputs])
        out, ops = _run_solution(new, inputs)
        torch.cuda.synchronize()
        assert ops <= _ALLOWED_OPS, f"the solution computes with torch ops: {ops - _ALLOWED_OPS}"
        assert out.is_cuda
        assert out.shape == expected32.shape and out.dtype == expected32.dtype
        out64, expected = out.double(), expected.double()  # int outputs (argmax) too
        err = (out64 - expected).abs().max().item()
        assert torch.allclose(out64, expected, atol=1e-4, rtol=1e-4), f"max abs error {err:.3g}"


def test_no_taught_cuda_kernel_is_named_after_its_task_or_a_math_function():
    """The compact CUDA solutions are what a warm start teaches, and a policy copies their
    habits: taught kernels named after their task (``relu``) made a warm-started SmolLM2 name
    the held-out ``tanh`` task's kernel ``tanh`` too, which libm already declares, a compile
    error on every sample. So no taught kernel bears its task's name or a C math function's."""
    import re

    math_names = {"tanh", "exp", "log", "sin", "cos", "sqrt", "pow", "erf", "fabs", "abs",
                  "floor", "ceil", "round", "max", "min", "fmax", "fmin", "sinh", "cosh"}  # fmt: skip
    for task in TASKS:
        source = task.compact_solutions.get("cuda")
        if source is None:
            continue
        kernels = re.findall(r'extern "C" __global__ void (\w+)\(', source)
        assert kernels, task.name
        for kernel in kernels:
            assert kernel != task.name and kernel not in math_names, (task.name, kernel)
