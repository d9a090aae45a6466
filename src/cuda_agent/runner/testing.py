"""Run fixtures for tests and smoke runs of the trainer with a tiny random model.

``write_rewarded_episodes(run)`` writes, where the rft stage keeps what it collected, two
episodes: one rewarded (kept: rft fine-tunes on it) and one malformed (dropped; the value
stage fits both). A random tiny model earns no reward, so nothing it collects itself would be
kept, and the stages after collection would have nothing to train on.

``copy_builtin_tasks(folder, names)`` copies built-in tasks into a task directory, each taught
by the warm start as one short line (its compact CPU solution ``ModelNew = Model``), so that a
run's answer budget stays small.

``AfterUnits(n)``: a deadline (``deadline.Deadline``) that falls once ``n`` units of the
invocation are done, so that a test stops a run at a known boundary however fast the machine is
(monkeypatch ``cuda_agent.runner.deadline.Deadline`` to return it, and pass ``--stop-after``).

``run_cli(args)`` and ``start_cli(args)`` run ``cuda-agent ARGS`` as a process of its own, as
``subprocess.run`` / ``Popen`` of ``python -m cuda_agent.runner`` would (its own environment,
working directory, process group, exit status, standard output and error), but forked from a
server that has imported the trainer once (``multiprocessing``'s forkserver): a command starts
in a fraction of a second instead of the 4 s its imports take on two cores. The server is
started, with the environment of that moment, by the first call; each command gets the
environment it is given (``os.environ`` by default). ``OMP_NUM_THREADS`` in it sets torch's
thread count, which a process reads at start-up; other settings that a library reads when it is
imported (``HF_HOME``, say) are the server's. A test of the entry point itself starts
``python -m cuda_agent.runner``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import math
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from .deadline import Deadline

# What a command imports before it does anything: imported once, in the fork server.
_PRELOAD = (
    "cuda_agent.runner.cli",
    "cuda_agent.runner.train",
    "cuda_agent.runner.eval.command",
    "cuda_agent.kernel_sandbox",
    "cuda_agent.policy",
    "cuda_agent.agent",
    "transformers",
    "peft",
)


def copy_builtin_tasks(folder: Path, names: tuple[str, ...], compact: bool = True) -> Path:
    """Copy the built-in tasks ``names`` into ``folder`` and return it; with ``compact`` each
    gets ``ModelNew = Model`` as its compact CPU solution (what the warm start teaches)."""
    builtin = Path(str(resources.files("cuda_agent.kernel_sandbox") / "builtin"))
    for name in names:
        shutil.copytree(builtin / name, folder / name)
        if compact:
            (folder / name / "solution_cpu_compact.py").write_text("ModelNew = Model\n")
    return folder


def write_rewarded_episodes(run: Path) -> Path:
    """Write ``run/rft/episodes.jsonl`` (a rewarded ``relu`` episode, a malformed ``silu``
    one) and return its path. A run resumed from ``run`` then finds rft's collection done."""
    from cuda_agent.agent import Episode, Turn, episode_to_json
    from cuda_agent.kernel_sandbox import EvalResult
    from cuda_agent.runner.checkpoint import write_text_atomic

    ok = EvalResult(status="ok", candidate_time_ms=1.0, eager_time_ms=1.0)
    good = Turn(0, (1, 2, 3), (40, 41, 42, 43), (-1.0,) * 4, "", "stop", "c", ok, 2.0, "fine")
    bad = Turn(0, (1, 2, 3), (50, 51), (-1.0,) * 2, "", "stop", None, None, -1.0, "", "malformed")
    episodes = [
        Episode("relu", 0, "full", (good,), "target"),
        Episode("silu", 1, "full", (bad,), "malformed"),
    ]
    path = run / "rft" / "episodes.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, "".join(json.dumps(episode_to_json(e)) + "\n" for e in episodes))
    return path


def train_command(world: int, *args: str, launcher: str = "torchrun") -> list[str]:
    """The command line of ``cuda-agent train ARGS`` in ``world`` processes: one process as
    ``python -m cuda_agent.runner``; several under ``torchrun`` (``torch.distributed.run
    --standalone``) or ``accelerate`` (``accelerate launch --multi_gpu``, accelerate's torchrun;
    gloo on the CPU)."""
    train = ["-m", "cuda_agent.runner", "train", *args]
    if world == 1:
        return [sys.executable, *train]
    if launcher == "accelerate":
        return [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
                "--num_processes", str(world), "--num_machines", "1", "--mixed_precision", "no",
                "--dynamo_backend", "no", *train]  # fmt: skip
    if launcher != "torchrun":
        raise ValueError(f"launcher must be 'torchrun' or 'accelerate', not {launcher!r}")
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", str(world), *train]  # fmt: skip


@functools.cache
def _forkserver() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(_PRELOAD))
    return context


def _cli_child(args: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """The forked command: a session of its own, the given environment and directory, its
    output to the two files, then ``main(args)``; exits as the command would."""
    os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, out), (2, err)):
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(handle, fd)
        os.close(handle)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stdin = open(os.devnull)  # noqa: SIM115
    threads = env.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        import torch

        torch.set_num_threads(int(threads))
    sys.argv = ["cuda-agent", *args]
    from cuda_agent.runner.cli import main

    code: Any = 1
    try:
        code = main(list(args))
    except SystemExit as stop:
        code = stop.code
    except BaseException:  # as an uncaught exception ends a process: the traceback, status 1
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    try:
        atexit._run_exitfuncs()  # what the interpreter runs at a normal exit
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class CliProcess:
    """A started ``cuda-agent`` command (``start_cli``): ``pid``, ``poll()``, ``wait()``,
    ``kill()`` (SIGKILL to its process group) and ``returncode`` as ``subprocess.Popen``'s
    (negative: the signal that ended it)."""

    def __init__(self, process: Any) -> None:
        self._process = process
        self.pid: int = process.pid

    @property
    def returncode(self) -> int | None:
        code: int | None = self._process.exitcode
        return code

    def poll(self) -> int | None:
        self._process.join(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(["cuda-agent"], timeout or 0.0)
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)


def start_cli(
    args: Sequence[str],
    *,
    stdout: Path,
    stderr: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
) -> CliProcess:
    """Start ``cuda-agent ARGS``; its output is appended to the files ``stdout`` and
    ``stderr``."""
    process = _forkserver().Process(
        target=_cli_child,
        args=(
            [str(a) for a in args],
            dict(os.environ if env is None else env),
            str(cwd or os.getcwd()),
            str(stdout),
            str(stderr),
        ),
    )
    process.start()
    return CliProcess(process)


def run_cli(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``cuda-agent ARGS`` to its end, as ``subprocess.run(..., capture_output=True,
    text=True)`` would; past ``timeout`` the command is killed and ``TimeoutExpired`` raised."""
    with tempfile.TemporaryDirectory(prefix="cuda-agent-cli-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        proc = start_cli(args, stdout=out, stderr=err, env=env, cwd=cwd)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        read = lambda path: path.read_text(errors="replace") if path.exists() else ""  # noqa: E731
        return subprocess.CompletedProcess(["cuda-agent", *args], code, read(out), read(err))


class AfterUnits(Deadline):
    """A deadline that falls once ``n`` units of the invocation are done."""

    def __init__(self, n: int) -> None:
        super().__init__(at=math.inf)
        self.n = n

    def left(self) -> float:
        return math.inf if self.units < self.n else 0.0


# The figures of a run's records that measure the machine, not the run: two runs of one seed
# (killed and resumed, or stopped by a deadline) agree on everything else.
VOLATILE = ("seconds", "tokens_per_s", "evaluations_per_min", "sandbox_jobs_per_min",
            "sandbox_windows")  # fmt: skip
VOLATILE_SUFFIXES = ("_s", "_time_ms")
VOLATILE_PREFIXES = ("decode_",)


def steady(value: Any) -> Any:
    """``value`` (a record, or anything in one) without the figures that measure the machine."""
    if isinstance(value, dict):
        return {
            k: steady(v)
            for k, v in value.items()
            if k not in VOLATILE
            and not k.endswith(VOLATILE_SUFFIXES)
            and not k.startswith(VOLATILE_PREFIXES)
        }
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value
