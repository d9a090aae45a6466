"""One invocation per run directory (``runner/run_lock.py``): a second `cuda-agent train` on a
directory in use stops with a clear error and touches nothing; a killed holder leaves no stale
lock; a process of a multi-process run ends itself when its launcher is killed (the
launchers start their workers in sessions of their own, out of reach of a kill of the
launcher's process group)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.runner import run_lock
from cuda_agent.runner.cli import main
from cuda_agent.runner.run_lock import RunInUseError, RunLock

GUARD_S = 60  # a guard against a process that never ends, not a time limit

HOLD = """
import sys, time
from cuda_agent.runner.run_lock import RunLock
RunLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(600)
"""


def _hold(run: Path) -> subprocess.Popen:
    """A process holding ``run``'s lock (said once it holds it)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_a_held_run_directory_is_refused_and_a_killed_holder_leaves_no_lock(tmp_path) -> None:
    holder = _hold(tmp_path)
    try:
        with pytest.raises(RunInUseError) as refused:
            RunLock(tmp_path, wait_s=0.3).acquire()
        assert f"pid {holder.pid}" in str(refused.value) and str(tmp_path) in str(refused.value)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    lock = RunLock(tmp_path, wait_s=GUARD_S)  # the kernel dropped the killed holder's lock
    lock.acquire()
    assert (tmp_path / run_lock.LOCK_FILE).read_text() == f"pid {os.getpid()}"
    lock.release()
    RunLock(tmp_path, wait_s=0).acquire()  # released: free at once


def test_train_on_a_directory_in_use_stops_with_a_clear_error(
    tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setattr(run_lock, "WAIT_S", 0.3)
    run = tmp_path / "run"
    run.mkdir()
    holder = _hold(run)
    try:
        code = main(["train", "--out", str(run), "--backend", "cpu", "--quiet"])
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    said = [x for x in capsys.readouterr().err.splitlines() if x.startswith("cuda-agent:")]
    assert code == 2 and len(said) == 1 and "is in use" in said[0], said
    assert sorted(p.name for p in run.iterdir()) == [run_lock.LOCK_FILE]  # nothing written


WORKER = """
import os, sys, time
from cuda_agent.runner.run_lock import stop_with_launcher
stop_with_launcher(period_s=0.05)
print(os.getpid(), flush=True)
time.sleep(600)
"""
FAILING_WORKER = """
import os, sys, tempfile, time
import torch.distributed as dist
from cuda_agent.runner.run_lock import stop_with_launcher
stop_with_launcher(period_s=3600)  # (its watcher sleeps through: the failure comes first)
# as in a run: the process group, whose excepthook wraps ours (and buffers sys.stderr)
rendezvous = os.path.join(tempfile.mkdtemp(), "rendezvous")
dist.init_process_group("gloo", init_method="file://" + rendezvous, rank=0, world_size=1)
launcher = os.getppid()
print(os.getpid(), flush=True)
while os.getppid() == launcher:
    time.sleep(0.05)
raise RuntimeError("Connection closed by peer")  # as gloo's, when a peer stopped first
"""
LAUNCHER = """
import subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True)
time.sleep(600)
"""


@pytest.mark.parametrize("worker", [WORKER, FAILING_WORKER], ids=["watched", "failing"])
def test_a_worker_ends_when_its_launcher_is_killed(tmp_path, worker) -> None:
    """As under torchrun: the worker in a session of its own, the launcher killed. A worker
    whose collective fails first (a peer stopped) says the same, not the collective's error."""
    out = tmp_path / "worker.out"
    with out.open("w") as sink:
        launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, worker], stdout=sink,
                                    stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + GUARD_S
        while not out.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        worker = int(out.read_text())
        assert _alive(worker)
        time.sleep(0.3)
        assert _alive(worker), "the worker stays while its launcher lives"
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(worker):
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker of a killed launcher went on running")
    assert launcher.stderr is not None
    said = launcher.stderr.read()
    assert f"the launcher (pid {launcher.pid}) is gone" in said, said
    assert "Traceback" not in said, said
