"""The trivial-answer rule (issue 30, part 1): a task an answer that computes nothing passes is
judged at a tolerance scaled to its outputs' magnitude, or refused; the rule is decided once
per task by a reference worker and kept on disk (CPU backend, real workers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks, task_from_source
from cuda_agent.kernel_sandbox._parent.plan import plan_job
from cuda_agent.kernel_sandbox._parent.pool import Worker
from cuda_agent.kernel_sandbox._parent.trivial import TrivialCache

pytestmark = pytest.mark.slow

TASK = """
import torch
from torch import nn

N = 4096


class Model(nn.Module):
    def forward(self, x):
        return {forward}


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
"""

# A ModelNew whose one kernel writes ``out[i] = BODY`` (x: the input).
CANDIDATE = """
import torch
from torch import nn

from cuda_agent.kernel_sandbox.launch import cpu_kernel

kernel = cpu_kernel(
    r'''
#include <math.h>
void f(float* out, const float* x, long n) {
    for (long i = 0; i < n; ++i) out[i] = BODY;
}
''',
    "f",
)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        kernel(out, x, x.numel())
        return out
"""


def _task(forward: str, name: str):
    return task_from_source(TASK.format(forward=forward), name=name)


def _kernel(body: str) -> str:
    return CANDIDATE.replace("BODY", body)


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    with Sandbox(SandboxConfig(backend="cpu", workers=1, repeats=5)) as sandbox:
        yield sandbox


def test_a_kernel_that_writes_zeros_fails_where_every_output_is_below_atol(sandbox):
    # Outputs of about 1e-3 judged at atol = 1e-2: before the rule, zeros were judged ok.
    milli = _task("torch.tanh(x) * 1e-3", "milli")
    zeros = sandbox.evaluate(milli, _kernel("0.f"))
    assert zeros.status == "incorrect", zeros.message
    assert zeros.extra["trivial_answer_rule"] == "scaled_tolerance"
    assert "trivial-answer rule 'scaled_tolerance'" in zeros.message
    (rule,) = zeros.extra["trivial_answers"]
    assert "zeros" in rule["passing"] and rule["still_passing"] == []
    assert rule["scaled_atol"] < 1e-4 < rule["atol"]
    # A right kernel stays right at the scaled tolerance.
    right = sandbox.evaluate(milli, _kernel("tanhf(x[i]) * 1e-3f"))
    assert right.status == "ok" and right.correct, right.message
    assert right.extra["trivial_answer_rule"] == "scaled_tolerance"


def test_a_task_no_tolerance_saves_is_refused_naming_the_answers(sandbox):
    # The output is a constant: no tolerance tells a kernel from an answer that writes 3.
    three = sandbox.evaluate(_task("x * 0 + 3", "three"), _kernel("3.f"))
    assert three.status == "unjudged" and not three.correct  # no verdict on the candidate
    assert three.extra["trivial_answer_rule"] == "refused" and three.extra["task_refused"]
    assert three.message.startswith("task refused (trivial-answer rule 'refused')")
    assert "constant" in three.message and three.trials == ()  # the candidate never ran
    # The output is its input, to the tolerance: a copy passes.
    copy = sandbox.evaluate(_task("x + 1e-6 * torch.tanh(x)", "nearly_x"), _kernel("x[i]"))
    assert copy.status == "unjudged" and "input_0" in copy.message


def test_sizes_the_caller_chose_are_judged_and_say_the_rule_was_not_applied(sandbox):
    # The property checks draw sizes down to 1, where a trivial answer is often the right one:
    # such a case is still a fair test of a candidate's edge handling, so it is judged.
    three = sandbox.evaluate(_task("x * 0 + 3", "three"), _kernel("3.f"), sizes={"N": 64})
    assert three.status == "ok", three.message
    assert three.extra["trivial_answer_rule"] == "refused"
    assert three.extra["trivial_answer_applied"] is False
    assert "not applied to sizes the caller chose" in three.message


def test_the_rule_is_decided_once_and_kept_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    decided = []
    decide = TrivialCache._decide
    monkeypatch.setattr(
        TrivialCache, "_decide", lambda self, *a: decided.append(1) or decide(self, *a)
    )
    config = SandboxConfig(backend="cpu", workers=1, repeats=5)
    with Sandbox(config) as sandbox:
        first = sandbox.evaluate(relu, relu.solutions["cpu"])
        second = sandbox.evaluate(relu, relu.solutions["cpu"])
    assert first.correct and second.correct, (first.message, second.message)
    assert first.extra["trivial_answer_rule"] == "none" and len(decided) == 1
    (stored,) = (tmp_path / "trivial").glob("*.json")
    assert json.loads(stored.read_text()) == {"outputs": [], "reason": None}
    # A fresh sandbox reads the file (plant a refusal to see it used) and decides nothing.
    planted = {"output": 0, "passing": ["zeros"], "atol": 0.01, "rtol": 0.01, "magnitude": 0.0,
               "scaled_atol": 0.0, "still_passing": ["zeros"]}  # fmt: skip
    stored.write_text(json.dumps({"outputs": [planted], "reason": None}))
    with Sandbox(config) as sandbox:
        third = sandbox.evaluate(relu, relu.solutions["cpu"])
    assert third.extra["trivial_answer_rule"] == "refused" and len(decided) == 1


OOM_ONCE_TASK = """
import os
import pathlib

import torch
from torch import nn

MARK = pathlib.Path(os.environ["CUDA_AGENT_CACHE"]) / "reference-out-of-memory-once"


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    if not MARK.exists():  # the first draw: as if the other lanes held the GPU's memory
        MARK.write_text("1")
        raise RuntimeError("CUDA out of memory. Tried to allocate 6.00 GiB")
    return [torch.randn(4096)]


def get_init_inputs():
    return []
"""


def test_a_rule_left_unchecked_for_want_of_memory_is_decided_again(tmp_path, monkeypatch):
    """Out of memory is the neighbours' doing as often as the task's: the next job of the task
    decides the rule again, and is judged by it, rather than every job going unchecked."""
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    task = task_from_source(OOM_ONCE_TASK, name="oom_once")
    with Sandbox(SandboxConfig(backend="cpu", workers=1, repeats=5)) as sandbox:
        first = sandbox.evaluate(task, _kernel("tanhf(x[i])"))
        second = sandbox.evaluate(task, _kernel("tanhf(x[i])"))
    assert first.extra["trivial_answer_rule"] == "unchecked", first.extra
    assert "out of memory" in first.extra["trivial_answer_reason"]
    assert second.status == "ok", second.message
    assert second.extra["trivial_answer_rule"] == "none"


def test_with_lanes_a_rule_unchecked_for_want_of_memory_is_decided_alone(tmp_path, monkeypatch):
    """Beside other lanes the job runs again with the device alone, which decides the rule: a
    task evaluated once (one sample of a KernelBench problem, say) is still judged by it."""
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    task = task_from_source(OOM_ONCE_TASK, name="oom_once")
    config = SandboxConfig(backend="cpu", lanes_per_gpu=2, repeats=5)
    with Sandbox(config) as sandbox:
        result = sandbox.evaluate(task, _kernel("tanhf(x[i])"))
    assert result.status == "ok", result.message
    assert result.extra["trivial_answer_rule"] == "none"
    assert "trivial-answer rule" in result.extra["rerun_alone"]
    assert "out of memory" in result.extra["rerun_alone"]


def test_no_builtin_task_rewards_a_trivial_answer(tmp_path, monkeypatch):
    # So every built-in solution is judged as before (test_builtin_solutions runs them).
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    config = SandboxConfig(backend="cpu", workers=1).resolved()
    worker, cache = Worker(config, 0, "reference"), TrivialCache()
    try:
        rules = {
            task.name: cache.get(plan_job(task, "", config, None, "normal", True), worker)
            for task in builtin_tasks()
        }
    finally:
        worker.kill()
    assert {name: rule.rule for name, rule in rules.items() if rule.rule != "none"} == {}


def test_kernel_sandbox_eval_judges_by_the_rule_too(tmp_path):
    (tmp_path / "milli.py").write_text(TASK.format(forward="torch.tanh(x) * 1e-3"))
    (tmp_path / "zeros.py").write_text(_kernel("0.f"))
    env = {**os.environ, "CUDA_AGENT_CACHE": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "cuda_agent.kernel_sandbox.cli", "eval"]
    paths = [str(tmp_path / "milli.py"), str(tmp_path / "zeros.py")]
    done = subprocess.run(
        [*command, *paths, "--backend", "cpu", "--json"],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "incorrect" and not result["correct"]
    assert result["extra"]["trivial_answer_rule"] == "scaled_tolerance"
