"""Loading tasks in KernelBench format, and clear errors for broken task files."""

from __future__ import annotations

import pytest

from cuda_agent.kernel_sandbox import (
    TaskError,
    builtin_tasks,
    load_task,
    load_tasks,
    task_from_source,
)

KERNELBENCH_STYLE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim)

batch_size = 16
dim1 = 256
reduce_dim = 1

def get_inputs():
    return [torch.randn(batch_size, dim1)]

def get_init_inputs():
    return [reduce_dim]
"""


def test_kernelbench_file_loads_unchanged(tmp_path):
    path = tmp_path / "47_Sum_reduction.py"
    path.write_text(KERNELBENCH_STYLE)
    task = load_task(path)
    assert task.name == "47_Sum_reduction"
    assert task.sizes == {"batch_size": 16, "dim1": 256, "reduce_dim": 1}
    assert load_tasks(tmp_path) == [task]


def test_a_task_directory_reads_its_primary_compact_and_variant_solutions(tmp_path):
    """``solution_<backend>.py``, ``solution_<backend>_compact.py`` and any other
    ``solution_<backend>_<style>.py`` (a variant, by style name); other files are not read."""
    (tmp_path / "task.py").write_text(KERNELBENCH_STYLE)
    files = {"solution_cuda.py": "tuned", "solution_cuda_compact.py": "compact",
             "solution_cuda_warp.py": "warp", "solution_cuda_tiled.py": "tiled",
             "solution_cpu.py": "c", "notes.py": "not a solution"}  # fmt: skip
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    task = load_task(tmp_path)
    assert task.solutions == {"cpu": "c", "cuda": "tuned"}
    assert task.compact_solutions == {"cuda": "compact"}
    assert task.variant_solutions == {"cuda": {"tiled": "tiled", "warp": "warp"}}
    assert task.resized({"batch_size": 8}).variant_solutions == task.variant_solutions


def test_broken_task_files_get_clear_errors(tmp_path):
    with pytest.raises(TaskError, match="not valid Python"):
        task_from_source("def (:", name="bad")
    with pytest.raises(TaskError, match="get_init_inputs"):
        task_from_source("class Model: pass\ndef get_inputs(): return []\n")
    with pytest.raises(TaskError, match="does not exist"):
        load_task(tmp_path / "nope.py")
    with pytest.raises(TaskError, match="no tasks"):
        load_tasks(tmp_path)


def test_builtin_suite_has_solutions_for_both_backends():
    tasks = builtin_tasks()
    assert len(tasks) >= 5
    assert len({t.name for t in tasks}) == len(tasks)
    for task in tasks:
        assert set(task.solutions) == {"cpu", "cuda"}, task.name
        assert task.digest and task.sizes, task.name


def test_starter_suite_is_a_named_subset():
    from cuda_agent.kernel_sandbox import STARTER_SUITE

    starter = builtin_tasks("starter")
    assert [t.name for t in starter] == sorted(STARTER_SUITE)
    assert {t.name for t in starter} <= {t.name for t in builtin_tasks()}
    with pytest.raises(ValueError, match="unknown built-in suite"):
        builtin_tasks("everything")


def test_cpu_sizes_are_read_statically_and_validated():
    source = KERNELBENCH_STYLE + "\nCPU_SIZES = {'batch_size': 2, 'dim1': 8}\n"
    task = task_from_source(source, name="t")
    assert task.cpu_sizes == {"batch_size": 2, "dim1": 8}
    assert task.sizes_for("cpu") == {"batch_size": 2, "dim1": 8, "reduce_dim": 1}
    assert task.sizes_for("cuda") == {"batch_size": 16, "dim1": 256, "reduce_dim": 1}
    bad = task_from_source(KERNELBENCH_STYLE + "\nCPU_SIZES = {'nope': 2}\n", name="bad")
    with pytest.raises(TaskError, match="CPU_SIZES must map"):
        _ = bad.cpu_sizes


def test_input_configs_are_read_statically_and_validated():
    ok = task_from_source(KERNELBENCH_STYLE + "\nINPUT_CONFIGS = [{'dim1': 3}]\n", name="ok")
    assert ok.input_configs == [{"dim1": 3}]
    assert task_from_source(KERNELBENCH_STYLE, name="none").input_configs == []
    bad = task_from_source(KERNELBENCH_STYLE + "\nINPUT_CONFIGS = [{'dim1': 0}]\n", name="bad")
    with pytest.raises(TaskError, match="INPUT_CONFIGS must be a list"):
        _ = bad.input_configs


def test_a_task_at_its_small_sizes_is_the_same_task_with_those_sizes_in_its_source():
    source = KERNELBENCH_STYLE + "\nSMALL_SIZES = {'batch_size': 4}  # for training\n"
    task = task_from_source(source, name="t", solutions={"cpu": "solution"})
    assert task.small_sizes == {"batch_size": 4}
    small = task.resized(task.small_sizes)
    assert small.sizes == {"batch_size": 4, "dim1": 256, "reduce_dim": 1}
    assert small.name == "t" and small.solutions == task.solutions
    assert small.digest != task.digest  # caches (baselines) key on the sizes shown
    # only the value changed: the prompt a model reads is the task's, line for line
    changed = [
        (a, b) for a, b in zip(task.source.splitlines(), small.source.splitlines(), strict=True)
        if a != b
    ]  # fmt: skip
    assert changed == [("batch_size = 16", "batch_size = 4")]
    assert task_from_source(KERNELBENCH_STYLE, name="none").small_sizes == {}
    for bad in ({"nope": 2}, {"dim1": 0}):
        with pytest.raises(TaskError, match="cannot resize"):
            task.resized(bad)
    broken = task_from_source(KERNELBENCH_STYLE + "\nSMALL_SIZES = {'dim1': -1}\n", name="b")
    with pytest.raises(TaskError, match="SMALL_SIZES must map"):
        _ = broken.small_sizes
