"""The red-team suite (redteam/cases.toml): every adversarial or faulty candidate gets its
verdict, with and without the static checks, and the pool keeps working: an honest candidate
evaluated right after each one is judged ``ok``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from cuda_agent.kernel_sandbox import Deadlines, Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.kernel_sandbox.properties import check_candidate

REDTEAM = Path(__file__).resolve().parents[1] / "redteam"
CASES = tomllib.loads((REDTEAM / "cases.toml").read_text())["case"]
CPU_CASES = [c for c in CASES if "cpu" in c.get("backends", ["cpu"])]
TASKS = {t.name: t for t in builtin_tasks()}


def _config(**kw) -> SandboxConfig:
    return SandboxConfig(
        backend="cpu",
        workers=1,
        repeats=3,
        timing_budget_s=0.3,
        # correctness: a CPU case checks in well under a second; the two infinite loops wait
        # out this deadline twice each (strict and runtime-only sandboxes)
        deadlines=Deadlines(load=60.0, correctness=5.0, timing=20.0),
        **kw,
    )


@pytest.fixture(scope="module")
def strict():
    with Sandbox(_config()) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def runtime_only():
    with Sandbox(_config(static_checks=False)) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    yield server.getsockname()[1]
    server.close()


def _source(case: dict, tmp_path: Path, port: int) -> str:
    text = (REDTEAM / "cases" / f"{case['name']}.py").read_text()
    return text.replace("__TARGET__", str(tmp_path / "planted.txt")).replace("__PORT__", str(port))


def _check(result, status: str, flags: list[str], case: dict) -> None:
    assert result.status == status, f"{case['name']}: {result.status}: {result.message}"
    assert set(flags) <= set(result.flags), f"{case['name']}: flags {result.flags}"
    if status != "ok":
        assert not result.correct


def _still_works(sandbox: Sandbox) -> None:
    relu = TASKS["relu"]
    honest = sandbox.evaluate(relu, relu.solutions["cpu"])
    assert honest.status == "ok", f"{honest.status} {honest.flags}: {honest.message}"


@pytest.mark.parametrize("case", CPU_CASES, ids=[c["name"] for c in CPU_CASES])
def test_redteam_case(case, strict, runtime_only, listener, tmp_path):
    task = TASKS[case["task"]]
    source = _source(case, tmp_path, listener)
    sizes = case.get("sizes")  # a case may be judged at other problem sizes than the task's
    if case.get("kind") == "property":
        assert strict.evaluate(task, source).status == case["status"]  # evaluate alone passes
        report = check_candidate(strict, task, source, max_examples=10)
        assert not report.passed, str(report)
        assert report.result is not None
        assert set(case.get("property_flags", [])) <= set(report.result.flags), str(report)
        _still_works(strict)
        return
    if case.get("isolate"):
        _isolated(case, source, task.name)
        return
    _check(strict.evaluate(task, source, sizes=sizes), case["status"], case.get("flags", []), case)
    _still_works(strict)
    if "runtime_status" in case:
        result = runtime_only.evaluate(task, source, sizes=sizes)
        if case["name"] == "write_outside" and not result.extra.get("filesystem_confined"):
            pytest.skip("this kernel has no Landlock")
        if case["name"] == "network" and not result.extra.get("network_isolated"):
            pytest.skip("no private network namespace on this host")
        _check(result, case["runtime_status"], case.get("runtime_flags", []), case)
        if "max_speedup" in case:
            assert result.speedup_vs_eager is not None
            assert result.candidate_time_ms and result.candidate_time_ms > 0, str(result)
            assert result.speedup_vs_eager < case["max_speedup"]
        _still_works(runtime_only)
    assert not (tmp_path / "planted.txt").exists()


HARNESS = """
import json, sys
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
task = next(t for t in builtin_tasks() if t.name == sys.argv[1])
source = sys.stdin.read()
verdicts = {}
for static in (True, False):
    with Sandbox(SandboxConfig(backend="cpu", workers=1, static_checks=static)) as sb:
        r = sb.evaluate(task, source)
        honest = sb.evaluate(task, task.solutions["cpu"])
        verdicts[str(static)] = [r.status, list(r.flags), honest.status]
print(json.dumps(verdicts))
"""


def _isolated(case: dict, source: str, task_name: str) -> None:
    """Cases that attack the caller run under a harness process of their own: if the defence
    failed, the harness dies, not the test run."""
    proc = subprocess.run(
        [sys.executable, "-c", HARNESS, task_name],
        input=source,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"the harness died ({proc.returncode}): {proc.stderr[-500:]}"
    verdicts = json.loads(proc.stdout.strip().splitlines()[-1])
    status, flags, honest = verdicts["True"]
    assert status == case["status"] and set(case.get("flags", [])) <= set(flags)
    assert honest == "ok"
    status, flags, honest = verdicts["False"]
    assert status == case["runtime_status"] and honest == "ok"


def test_every_case_is_in_the_readme_table():
    readme = (REDTEAM.parent / "README.md").read_text()
    for case in CASES:
        assert f"| `{case['name']}` |" in readme, case["name"]


def test_every_case_file_is_in_the_manifest():
    files = {p.stem for p in (REDTEAM / "cases").glob("*.py")}  # CPU and GPU cases
    assert files == {c["name"] for c in CASES}


def test_no_honest_builtin_solution_is_rejected(strict):
    """No false positives: every built-in CPU solution passes with every check on."""
    tasks = builtin_tasks()
    results = strict.evaluate_many([(t, t.solutions["cpu"]) for t in tasks])
    for task, result in zip(tasks, results, strict=True):
        assert result.status == "ok" and result.correct, f"{task.name}: {result.message}"


KERNELBENCH_HELPERS = """

def get_inputs():
    return [torch.rand(16, 16384)]


def get_init_inputs():
    return []
"""


def test_helpers_the_harness_never_calls_leave_the_verdict_alone(strict):
    # KernelBench's own test kernels carry get_inputs / get_init_inputs (torch.rand), and LLMs
    # copy them from the prompt: an honest kernel with them is ok, with every check on.
    tasks = builtin_tasks("starter")
    results = strict.evaluate_many([(t, t.solutions["cpu"] + KERNELBENCH_HELPERS) for t in tasks])
    for task, result in zip(tasks, results, strict=True):
        assert result.status == "ok", f"{task.name}: {result.message}"
    # A helper the forward path does call is judged like the forward itself.
    relu = next(t for t in tasks if t.name == "relu")
    called = (
        relu.solutions["cpu"].replace(
            "        relu(out, x, x.numel())", "        relu(out, x, x.numel())\n        _noise()"
        )
        + "\n\ndef _noise():\n    return torch.rand(1)\n"
    )
    result = strict.evaluate(relu, called)
    assert result.status == "rejected" and "torch_compute" in result.flags, result.message


CUDA_CASES = [c for c in CASES if "cuda" in c.get("backends", ["cpu"])]


def _cuda_config(**kw) -> SandboxConfig:
    return SandboxConfig(
        backend="cuda",
        workers=1,
        time_compile=False,
        deadlines=Deadlines(load=120.0, correctness=20.0, timing=30.0),
        **kw,
    )


@pytest.mark.gpu
@pytest.mark.parametrize("case", CUDA_CASES, ids=[c["name"] for c in CUDA_CASES])
def test_redteam_case_on_the_gpu(case, listener, tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    task = TASKS[case["task"]]
    source = _source(case, tmp_path, listener)
    relu = TASKS["relu"]
    with Sandbox(_cuda_config()) as strict:
        _check(strict.evaluate(task, source), case["status"], case.get("flags", []), case)
        assert strict.evaluate(relu, relu.solutions["cuda"]).status == "ok"
    expected = case.get("cuda_runtime_status", case.get("runtime_status"))
    if expected is None:
        return
    with Sandbox(_cuda_config(static_checks=False)) as unchecked:
        result = unchecked.evaluate(task, source)
        assert result.status == expected, f"{case['name']}: {result.status}: {result.message}"
        assert unchecked.evaluate(relu, relu.solutions["cuda"]).status == "ok"
