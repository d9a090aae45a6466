"""How workers are made (``SandboxConfig.worker_start``): forked from the zygote, a worker is
the process a fresh interpreter would be to the candidate (the same descriptors, environment
and confinement) and a verdict is the same; a crash still names its signal; a zygote that dies
is replaced; forking falls back to fresh interpreters where the zygote cannot serve."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.kernel_sandbox._parent import spawn
from cuda_agent.kernel_sandbox._parent.pool import Worker

RELU = next(t for t in builtin_tasks() if t.name == "relu")

# A candidate that reports what its process looks like, in its error message (the environment
# as a digest of its names and values: the message is trimmed).
REPORT = """
import hashlib, json, os, resource
import numpy
import torch
from torch import nn


def blas_threads():
    # NumPy's BLAS sizes its thread pool as it loads, from the environment of that moment
    a = numpy.ones((512, 512))
    a @ a
    return len(os.listdir("/proc/self/task"))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        home = os.environ["CUDA_AGENT_HOME"]  # each worker's own: the names alone
        env = [(k, v if home not in v else "HOME") for k, v in os.environ.items()]
        seen = {
            "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")),
            "env": hashlib.sha256(repr(sorted(env)).encode()).hexdigest()[:16],
            "session_leader": os.getsid(0) == os.getpid(),
            "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[1],
            "fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[1],
            "threads": torch.get_num_threads(),
            "tasks_after_blas": blas_threads(),
        }
        raise RuntimeError("REPORT" + json.dumps(seen) + "END")
"""

SEGFAULT = """
import os, signal
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os.kill(os.getpid(), signal.SIGSEGV)
        return x
"""


def _config(how: str) -> SandboxConfig:
    return SandboxConfig(
        backend="cpu", workers=1, trials=1, static_checks=False, worker_start=how,
        threads_per_worker=1,
    )  # fmt: skip


def _workers(sandbox: Sandbox) -> list:
    return [w for lane in sandbox._lanes.lanes for w in (lane.candidate, lane.reference)]


def _zygote(sandbox: Sandbox):
    """The zygote that forked the sandbox's candidate worker (it forked the reference too)."""
    proc = sandbox._lanes.lanes[0].candidate.proc
    assert proc is not None and proc.zygote is not None
    assert sandbox._lanes.lanes[0].reference.proc.zygote is proc.zygote
    return proc.zygote


def _report(sandbox: Sandbox) -> dict:
    result = sandbox.evaluate(RELU, REPORT, measure_time=False)
    assert result.status == "runtime_error", result.message
    return json.loads(result.message.split("RuntimeError: REPORT", 1)[1].split("END", 1)[0])


def test_a_forked_worker_is_what_a_fresh_interpreter_is_to_the_candidate() -> None:
    seen, confinement = {}, {}
    for how in ("exec", "fork"):
        with Sandbox(_config(how)) as sandbox:
            assert sandbox.evaluate(RELU, RELU.solutions["cpu"], measure_time=False).correct
            seen[how] = _report(sandbox)
            workers = _workers(sandbox)
            assert {w.started_by for w in workers if w.proc is not None} == {how}
            confinement[how] = [
                (w.role, w.network_isolated, w.filesystem_confined, w.signals_confined)
                for w in workers
            ]
    assert seen["fork"] == seen["exec"]
    assert seen["fork"]["session_leader"]
    assert confinement["fork"] == confinement["exec"]


def test_workers_are_forked_by_default_on_either_backend(monkeypatch) -> None:
    monkeypatch.delenv("CUDA_AGENT_WORKER_START", raising=False)
    with Sandbox(SandboxConfig(backend="cpu", workers=1, trials=1)) as sandbox:
        assert sandbox.evaluate(RELU, RELU.solutions["cpu"], measure_time=False).correct
        assert {w.started_by for w in _workers(sandbox)} == {"fork"}
    cuda = SandboxConfig(backend="cuda")  # (not started: no GPU needed to ask)
    assert Worker(cuda, 0)._forks()
    assert not Worker(replace(cuda, worker_start="exec"), 0)._forks()
    assert not Worker(_config("exec"), 0)._forks()
    monkeypatch.setenv("CUDA_AGENT_WORKER_START", "exec")  # chooses for "auto" pools only
    assert not Worker(cuda, 0)._forks() and Worker(_config("fork"), 0)._forks()
    monkeypatch.setenv("CUDA_AGENT_WORKER_START", "spawn")
    with pytest.raises(ValueError, match=r"\$CUDA_AGENT_WORKER_START must be 'auto', 'fork'"):
        SandboxConfig()
    with pytest.raises(ValueError, match="worker_start must be 'auto', 'fork' or 'exec'"):
        SandboxConfig(worker_start="spawn")  # type: ignore[arg-type]


def test_a_forked_worker_killed_by_a_signal_says_which() -> None:
    with Sandbox(_config("fork")) as sandbox:
        result = sandbox.evaluate(RELU, SEGFAULT, measure_time=False)
        assert result.status == "runtime_error"
        assert "SIGSEGV" in result.message, result.message
        assert sandbox.evaluate(RELU, RELU.solutions["cpu"], measure_time=False).correct


@pytest.mark.parametrize("how", ["fork", "exec"])
def test_the_job_that_waits_for_a_restarted_worker_says_how_long(how: str) -> None:
    # A fault kills the lane's worker; the next job pays for its start (on an H100 soak, 10.7 s
    # of a fresh interpreter's), and its verdict says so: where a lane's time went.
    with Sandbox(_config(how)) as sandbox:
        assert sandbox.evaluate(RELU, SEGFAULT, measure_time=False).status == "runtime_error"
        after = sandbox.evaluate(RELU, RELU.solutions["cpu"], measure_time=False)
        again = sandbox.evaluate(RELU, RELU.solutions["cpu"], measure_time=False)
    assert after.correct and again.correct
    spent = after.extra["seconds"]
    assert spent["worker_start"] > 0
    assert "worker_start" not in again.extra["seconds"]  # its worker was there already
    # ... and where that start went: the kill, the fork or exec, the wait for its ready,
    # summing to no more than the whole; the worker's own stages run from the moment it
    # exists, which is before the parent's fork or exec returns, so they lie within the
    # spawn and the ready together, not within the ready alone (on a busy 2-core machine a
    # forked worker's own 7.7 ms outran the ready's 6.3 ms).
    stages = {k: v for k, v in spent.items() if k.startswith("worker_start_")}
    assert {"worker_start_kill", "worker_start_spawn", "worker_start_ready"} <= set(stages)
    assert {"worker_start_imports", "worker_start_warm_checks", "worker_start_confine"} <= set(
        stages
    )
    parent = sum(stages[f"worker_start_{k}"] for k in ("kill", "spawn", "ready"))
    assert parent <= spent["worker_start"] + 1e-6
    own = sum(
        v for k, v in stages.items() if k[len("worker_start_") :] not in ("kill", "spawn", "ready")
    )
    assert own <= stages["worker_start_spawn"] + stages["worker_start_ready"] + 1e-3


@pytest.mark.parametrize("workers", ["killed too", "left running"])
def test_a_dead_zygote_is_replaced_and_verdicts_go_on(workers: str) -> None:
    """Its workers live on unreaped: left running, the pool finds them dead (their status
    socket closed) and replaces them; either way a new zygote forks the next ones."""
    with Sandbox(_config("fork")) as sandbox:
        assert sandbox.evaluate(RELU, RELU.solutions["cpu"], measure_time=False).correct
        zygote = _zygote(sandbox)
        os.kill(zygote.proc.pid, signal.SIGKILL)
        zygote.proc.wait(timeout=30)
        if workers == "killed too":
            for worker in _workers(sandbox):
                worker.kill()
        assert sandbox.evaluate(RELU, RELU.solutions["cpu"], measure_time=False).correct
        assert _zygote(sandbox) is not zygote and zygote not in spawn.zygotes()
        assert {w.started_by for w in _workers(sandbox)} == {"fork"}


def test_a_process_forked_from_this_one_forks_from_a_zygote_of_its_own() -> None:
    with Sandbox(_config("fork")) as sandbox:
        assert sandbox.evaluate(RELU, RELU.solutions["cpu"], measure_time=False).correct
        ours = _zygote(sandbox)
    pid = os.fork()
    if pid == 0:  # the child: a sandbox of its own, its workers forked by its own zygote
        code = 1
        try:
            inherited = spawn.zygotes()
            with Sandbox(_config("fork")) as sandbox:
                judged = sandbox.evaluate(RELU, RELU.solutions["cpu"], measure_time=False)
                theirs = _zygote(sandbox)
            own = not inherited and theirs.proc.pid != ours.proc.pid
            code = 0 if judged.correct and own else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert ours in spawn.zygotes() and ours.proc.poll() is None  # ours is untouched
    with Sandbox(_config("fork")) as sandbox:
        assert sandbox.evaluate(RELU, RELU.solutions["cpu"], measure_time=False).correct
        assert _zygote(sandbox) is ours


LINGER = """
import json, os, time
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks
from cuda_agent.kernel_sandbox._parent import spawn

spawn.LINGER_S = 0.5
relu = next(t for t in builtin_tasks() if t.name == "relu")
config = SandboxConfig(backend="cpu", workers=1, trials=1, worker_start="fork")
pids = []
for _ in range(2):  # a second pool at once: the same zygote
    with Sandbox(config) as sandbox:
        assert sandbox.evaluate(relu, relu.solutions["cpu"], measure_time=False).correct
        zygote = sandbox._lanes.lanes[0].candidate.proc.zygote
    pids.append(zygote.proc.pid)
time.sleep(5)
print(json.dumps({"same": pids[0] == pids[1], "closed": spawn.zygotes() == [],
                  "exited": zygote.proc.poll() is not None}))
"""


def test_the_zygote_is_closed_soon_after_the_last_forked_worker_ends(tmp_path) -> None:
    """A program that closes its pools leaves no zygote behind for long (the test session
    itself holds its zygote: ``conftest.py``), and pools opened one after another share it."""
    script = tmp_path / "linger.py"
    script.write_text(LINGER)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "same": True,
        "closed": True,
        "exited": True,
    }


ORPHAN = """
import sys, threading, time
from cuda_agent.kernel_sandbox import Deadlines, Sandbox, SandboxConfig, builtin_tasks

relu = next(t for t in builtin_tasks() if t.name == "relu")
config = SandboxConfig(backend="cpu", workers=1, trials=1, static_checks=False,
                       worker_start=sys.argv[1], deadlines=Deadlines(correctness=600))
sandbox = Sandbox(config)
assert sandbox.evaluate(relu, relu.solutions["cpu"], measure_time=False).correct
hang = "while True:\\n    pass\\n"  # at import: the worker never reads its stdin again
threading.Thread(target=sandbox.evaluate, args=(relu, hang), daemon=True).start()
time.sleep(3)
print(sandbox._lanes.lanes[0].candidate.proc.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("how", ["fork", "exec"])
def test_a_worker_stuck_in_a_candidate_dies_with_the_program_that_made_it(tmp_path, how) -> None:
    """A program killed with SIGKILL (a scheduler's preemption, the kill-anywhere test) while
    its worker runs a candidate that never returns leaves no worker behind: the worker never
    reads the stdin that closed, so the zygote, which sees its parent's end close, kills it."""
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN)
    program = subprocess.Popen([sys.executable, str(script), how], stdout=subprocess.PIPE,
                               text=True)  # fmt: skip
    try:
        worker = int(program.stdout.readline())
        assert _alive(worker)
    finally:
        program.kill()
        program.wait(timeout=30)
    deadline = time.monotonic() + 20
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker), f"worker {worker} outlived its program"


ILLEGAL_ADDRESS = """
import torch
from torch import nn
from cuda_agent.kernel_sandbox.launch import cuda_kernel

SOURCE = r'''
extern "C" __global__ void far(float* out) { out[1ull << 40] = 1.0f; }
'''


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        cuda_kernel(SOURCE, "far")(grid=(1,), block=(1,), args=(out,))
        torch.cuda.synchronize()
        return out
"""


def _needs_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


@pytest.mark.gpu
def test_the_zygote_tells_a_loaded_cuda_driver_from_an_initialised_one() -> None:
    # torch's CUDA builds load libcuda as they import; only cuInit makes a fork unusable. Asked
    # in fresh interpreters, so that nothing here has initialised CUDA yet.
    _needs_cuda()
    probe = (
        "import torch\n"
        "from cuda_agent.kernel_sandbox._zygote import _cuda_driver_initialised as ask\n"
        "before = ask()\n"
        "torch.empty(1, device='cuda')\n"
        "print(before, ask())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr


@pytest.mark.gpu
def test_forked_workers_judge_on_the_gpu_and_come_back_after_a_sticky_cuda_error() -> None:
    _needs_cuda()
    config = SandboxConfig(
        backend="cuda", workers=1, lanes_per_gpu=1, worker_start="fork", static_checks=False
    )
    relu = RELU.solutions["cuda"]
    with Sandbox(config) as sandbox:
        assert sandbox.evaluate(RELU, relu, measure_time=False).correct
        candidate = sandbox._lanes.lanes[0].candidate
        assert candidate.started_by == "fork", spawn.fork_unavailable
        for fault in (SEGFAULT, ILLEGAL_ADDRESS):
            assert sandbox.evaluate(RELU, fault, measure_time=False).status == "runtime_error"
            after = sandbox.evaluate(RELU, relu)  # timed too: a forked worker's CUDA is whole
            assert after.status == "ok", after.message
            assert candidate.started_by == "fork"
            assert after.extra["seconds"]["worker_start"] > 0
