"""benchmarks/kernel_names.py's rule: an answer links when every kernel ``forward`` launches is
bound by ``cuda_kernel`` to a ``__global__`` function of its source; the identifier name of
a task (``prompt_name``) is an identifier in the training tasks' style, which every shipped
task's name already is."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from cuda_agent.agent.prompts import prompt_name, user_prompt
from cuda_agent.kernel_sandbox import builtin_tasks, task_from_source
from cuda_agent.runner.task_sets import load_set

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "kernel_names.py"


def _script() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent / "gpu"))
    spec = importlib.util.spec_from_file_location("kernel_names", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ANSWER = """
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cuda_kernel

l1_21_sigmoid_kernel = cuda_kernel(
    r\"\"\"
extern "C" __global__ void l1_21_sigmoid_kernel(float* out, const float* x, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 1.f / (1.f + expf(-x[i]));
}
\"\"\",
    "l1_21_sigmoid_kernel",
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        l1_21_sigmoid_kernel(grid=((n + 255) // 256,), block=(256,), args=(out, x, n))
        return out
"""


def test_an_answer_links_and_one_with_a_name_in_two_cases_does_not() -> None:
    links = _script().links
    assert links(ANSWER)["parses"] and links(ANSWER)["links"]
    # as on the H100: bound with a capital, launched without one
    mixed = ANSWER.replace("l1_21_sigmoid_kernel = ", "L1_21_sigmoid_kernel = ")
    assert links(mixed)["parses"] and not links(mixed)["links"]
    unknown = ANSWER.replace('"l1_21_sigmoid_kernel",', '"sigmoid_kernel",')
    assert not links(unknown)["links"]  # no __global__ function of that name
    assert links(ANSWER.replace("def forward(", "def forward(("))["parses"] is False
    assert not links(ANSWER.replace("(grid=", "(g=", 1))["links"]  # nothing launched


def test_the_identifier_name_is_what_every_shipped_task_is_already_named() -> None:
    assert prompt_name("L1_21_Sigmoid") == "l1_21_sigmoid"
    assert prompt_name("19_ReLU") == "task_19_relu"  # a C name cannot start with a digit
    assert prompt_name("my-op.v2") == "my_op_v2"
    for name in ("L1_21_Sigmoid", "19_ReLU", "my-op.v2", "Ä_op"):
        assert prompt_name(name).isidentifier() and prompt_name(name).isascii()
    # every shipped task already has such a name: their prompts are what training saw
    for named_set in ("builtin", "synth", "heldout-compositions", "heldout-ops"):
        for task in load_set(named_set):
            assert prompt_name(task.name) == task.name
            assert f"(task `{task.name}`)" in user_prompt(task)


def test_the_prompt_names_a_task_by_its_identifier_and_the_script_can_put_the_loaded_name_back() -> (
    None
):
    task = dataclasses.replace(builtin_tasks()[0], name="L1_21_Sigmoid")
    assert "(task `l1_21_sigmoid`)" in user_prompt(task)
    script = _script()
    loaded = script.messages(task, "as-loaded")[-1]["content"]
    assert "(task `L1_21_Sigmoid`)" in loaded and "l1_21_sigmoid" not in loaded
    assert script.messages(task, "identifier")[-1]["content"] == user_prompt(task)


KERNELBENCH_STYLE = """
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(4, 8, 5)]


def get_init_inputs():
    return [1]
"""


def test_the_script_can_show_kernelbenchs_super_of_model_again_and_reads_refusals() -> None:
    task = task_from_source(KERNELBENCH_STYLE, name="L1_47_Sum")
    script = _script()
    assert "super(Model" not in script.messages(task, "identifier")[-1]["content"]
    assert "super(Model, self)" in script.messages(task, "super-as-loaded")[-1]["content"]
    copied = ANSWER.replace(
        "class ModelNew(nn.Module):\n",
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super(Model, self).__init__()\n\n",
    )
    assert script.refusals(copied) == ["reference_model"] and script.refusals(ANSWER) == []
