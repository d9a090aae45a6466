"""Issue 30: a soak of the sandbox pool the trainer uses, with faulty candidates among honest ones.

    python benchmarks/gpu/soak.py OUT_DIR [--faulty 1000] [--honest 1000] [--backend cuda|cpu]
        [--lanes N] [--in-flight K] [--seconds S] [--tasks starter|all|a,b,...] [--deadline 10] [--seed 0]
        [--kinds a,b,...] [--resume EARLIER_OUT_DIR]

The pool is the trainer's: ``Sandbox(SandboxConfig(backend=..., lanes_per_gpu="auto"))`` (or
``--lanes N``), static and runtime checks on, fed through ``evaluate_many``. Only the phase
deadlines differ: ``--deadline`` seconds for the correctness phase (the default 60 s would make
each hanging candidate hold a lane for a minute; honest candidates need well under a second of
it), three times that for timing. The static checks stay on, as in the trainer: every kind gets
past them (its crash is C built by ``cpu_kernel``, out of the AST's sight, or a CUDA kernel), so
each reaches the runtime (``kinds_expected[kind].static_findings`` is empty, and
``tests/test_soak_script.py`` holds it).

``--faulty`` candidates of the kinds in ``KINDS`` (their sources in ``soak_cases/`` and in the
red-team suite, each with the verdict it must get), ``--honest`` ones (the built-in tasks' own
solutions), in a fixed order shuffled with ``--seed``, go through the pool as a stream:
``--in-flight`` jobs (default two per lane) are in the pool at any time, each sent through
``evaluate_many`` as the trainer sends its jobs, and a job that ends makes room for the next. A
candidate that hangs holds its own lane for the deadline, not a batch of its neighbours (in
batches of two per lane on the H100, about three batches in five held a hanging candidate, and
the soak judged 20 a minute). Every candidate's text carries its number in a comment, so no two
jobs are the same text. Before the soak every honest task is evaluated once through the same
pool, with no faulty candidate around (``alone_verdicts``), and
the baselines of the tasks are measured ahead, as ``cuda-agent train`` does before its first step.

A wrong verdict is an honest candidate not ``ok`` or not the verdict its task got alone, or a
faulty one whose status is not its kind's. Each faulty verdict's message is also matched against
what its own fault says (``unexpected_messages``: a neighbour's fault reported as this
candidate's would show there). After the pool is closed, from outside it:

- ``leaked_processes``: processes still alive (zombies apart) that are this script's children,
  or carry the environment marker this script set before the pool started (every worker and
  whatever a candidate spawned inherits it), or run the sandbox's worker module and were not
  there before (unless their environment shows another run's marker);
- ``gpu_mem_idle_after_mb`` against ``gpu_mem_idle_before_mb``: ``nvidia-smi``'s memory.used
  (the parent never creates a CUDA context: provenance is asked with ``gpus=0`` and the GPU's
  name read from ``nvidia-smi``), polled for up to 20 s after the close.

``soak.json`` is rewritten after every verdict (``complete: false`` until the end), so a cut
run still leaves figures; with ``--seconds S`` no job starts after S seconds from the start, and a
watchdog writes the JSON (``stuck: true``) and ends the run at S + 50 s whatever happens. Each
job's line goes to ``soak_jobs.jsonl``. ``median_wall_s`` per kind counts from the job's
submission (waiting for a lane included).

``worker_start``: how the workers started (``--worker-start``; ``fork`` from the zygote, or
``exec`` a fresh interpreter: ``SandboxConfig.worker_start``). ``worker_starts``,
``worker_start_s_median`` and ``worker_start_s_total``: the jobs that waited for their lane's
worker to start again after a fault killed it, and how long (``extra["seconds"]
["worker_start"]`` of their verdicts; on the H100 a fresh interpreter's start cost the next job
about 10 s). ``worker_start_stages_s_median``: where that start went, per stage (the old
worker's kill, the fork or exec, the wait for its ready, and the worker's own stages within it:
imports, the CUDA context, pinning the exchange, the warm-up kernel, the checks' warm-up,
confinement), each the median over those jobs. ``seconds_by_part``: where the jobs' time went
by their verdicts (``extra["seconds"]``: the candidate's checks, the reference's, timing, the
waits at the timing gate...), summed over the jobs; each job's own in ``soak_jobs.jsonl``, and
the pool's job log (each job's start on its lane and its end) in ``soak_job_log.jsonl``.

One device call may not hold every job (on the H200 a faulty candidate that kills its worker
costs the lane a worker's start, a hanging one the deadline too): ``--resume EARLIER_OUT_DIR``
(the same ``--faulty``, ``--honest``, ``--backend``, ``--tasks`` and ``--seed``) keeps the jobs
that run judged and goes on with the rest, in a fresh pool; the figures are then the runs'
together (``runs`` lists each one's own: GPU memory before and after, leaked processes), with
``evaluations_per_minute`` over the runs' soak seconds added up, ``leaked_processes`` their sum,
and ``gpu_mem_back_to_idle`` whether every run's pool left the GPU at its idle figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance

from cuda_agent.kernel_sandbox import (
    Deadlines,
    EvalResult,
    Sandbox,
    SandboxConfig,
    Task,
    builtin_tasks,
)
from cuda_agent.kernel_sandbox._parent.job_log import ENV as JOB_LOG_ENV
from cuda_agent.kernel_sandbox.static_checks import static_findings

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "soak_cases"
REDTEAM = ROOT / "packages" / "kernel_sandbox" / "redteam" / "cases"
WORKER_MODULE = b"cuda_agent.kernel_sandbox._worker"
MARKER_ENV = "CUDA_AGENT_SOAK_MARK"
FAULT_TASK = "relu"  # every faulty candidate is a relu candidate


@dataclass(frozen=True)
class Kind:
    """A fault: its candidate, the backends it runs on, the status it must get, and what the
    verdict's message must say (a regular expression, case-insensitive) if it is its own."""

    name: str
    what: str
    source: Path
    backends: tuple[str, ...]
    status: str
    message: str
    note: str = ""
    flags: tuple[str, ...] = field(default=())


# Every kind reaches the runtime with the static checks on (none of them is refused before
# running; ``static_findings`` is checked at the start of each run and in the test). Host code
# that must crash is C built by ``cpu_kernel`` taking no tensors, so it runs on either backend.
KINDS: tuple[Kind, ...] = (
    Kind("segfault", "a C function writes through a null pointer", CASES / "segfault.py",
         ("cpu", "cuda"), "runtime_error", r"SIGSEGV",
         "the worker dies of SIGSEGV; the lane's candidate worker is started again"),
    Kind("host_trap", "a C function executes a trap instruction", CASES / "host_trap.py",
         ("cpu", "cuda"), "runtime_error", r"SIGILL", "the worker dies of SIGILL"),
    Kind("host_abort", "a failed host assertion (abort)", CASES / "host_abort.py",
         ("cpu", "cuda"), "runtime_error", r"SIGABRT", "the worker dies of SIGABRT"),
    Kind("host_hang", "host C code that never returns", CASES / "host_hang.py",
         ("cuda",), "timeout", r"exceeded its deadline",
         "the correctness deadline kills the worker's process group (on the CPU backend this "
         "is kernel_never_ends)"),
    Kind("python_hang", "Python that never returns", REDTEAM / "infinite_loop_python.py",
         ("cpu", "cuda"), "timeout", r"exceeded its deadline",
         "the correctness deadline kills the worker's process group"),
    Kind("kernel_never_ends", "a kernel that never ends (CPU: a C loop)",
         REDTEAM / "infinite_loop_kernel.py", ("cpu",), "timeout", r"exceeded its deadline",
         "the correctness deadline kills the worker's process group"),
    Kind("exit_mid_timing", "an honest relu whose C code calls _exit(3) on its Nth call, "
         "inside the timing", CASES / "exit_mid_timing_cpu.py", ("cpu",), "runtime_error",
         r"exited with code 3", "passes every check, then the worker exits while timed"),
    Kind("host_oom", "asks for 64 GiB of host memory", REDTEAM / "host_oom.py", ("cpu",),
         "runtime_error", r"memory|alloc",
         "the CPU backend's address-space cap makes the allocation fail in the worker (the "
         "CUDA backend has no cap: 64 GiB in each of 8 lanes would meet the host's OOM killer)"),
    Kind("gpu_exit_mid_timing", "an honest CUDA relu whose forward calls C code that calls "
         "_exit(3) on its Nth call, inside the timing", CASES / "exit_mid_timing_cuda.py",
         ("cuda",), "runtime_error", r"exited with code 3",
         "passes every check, then the worker exits with the timing's work queued on the GPU"),
    Kind("illegal_address", "a CUDA kernel writes 4 TB out of bounds",
         REDTEAM / "illegal_memory_access.py", ("cuda",), "runtime_error",
         r"illegal memory access|illegal address", "sticky CUDA error: the worker retires"),
    Kind("misaligned_access", "a CUDA kernel stores floats one byte off their alignment",
         CASES / "misaligned_access.py", ("cuda",), "runtime_error", r"misaligned",
         "sticky CUDA error: the worker retires"),
    Kind("device_trap", "a CUDA kernel executes __trap() (where a failed device assert ends)",
         CASES / "device_trap.py", ("cuda",), "runtime_error",
         r"launch failure|illegal instruction|trap|assert|CUDA error",
         "sticky CUDA error: the worker retires"),
    Kind("gpu_never_ends", "a CUDA kernel that never ends", REDTEAM / "gpu_infinite_loop.py",
         ("cuda",), "timeout", r"exceeded its deadline",
         "forward returns at once; the section's synchronisation waits until the correctness "
         "deadline kills the worker's process group, which frees the GPU"),
    Kind("device_oom", "asks for 10 TB of GPU memory", REDTEAM / "device_oom.py", ("cuda",),
         "runtime_error", r"out of memory",
         "CUDA out-of-memory error; more than the whole device, so not run again alone"),
    Kind("too_much_shared_memory", "a launch asking for 1 GiB of dynamic shared memory",
         CASES / "too_much_shared_memory.py", ("cuda",), "runtime_error",
         r"launch failed|invalid argument|shared|resources",
         "cuLaunchKernel refuses the launch; not sticky: the worker's context survives"),
    Kind("late_fault", "forward returns while its kernel waits 2 ms, then writes 4 TB out of "
         "bounds", CASES / "late_fault.py", ("cuda",), "runtime_error",
         r"illegal memory access|illegal address",
         "the error surfaces at the harness's synchronisation after forward returned"),
    Kind("late_result", "forward returns while its kernel waits 5 ms before writing a correct "
         "relu", CASES / "late_result.py", ("cuda",), "ok", r"^correct",
         "still running when forward returns, but right: the harness waits for the device"),
)  # fmt: skip


def kinds_for(backend: str, names: str = "") -> list[Kind]:
    """The kinds that run on ``backend``; only those named (comma-separated) when given."""
    chosen = [k for k in KINDS if backend in k.backends]
    if names:
        wanted = names.split(",")
        unknown = sorted(set(wanted) - {k.name for k in chosen})
        if unknown:
            raise SystemExit(f"--kinds: {unknown} do not run on the {backend} backend")
        chosen = [k for k in chosen if k.name in wanted]
    return chosen


def exit_call(task: Task, config: SandboxConfig, backend: str) -> int:
    """The call of ``forward`` on which ``exit_mid_timing`` exits: past every call before the
    timing (each trial, the first trial's repeat, one per extra distribution, the in-place
    trial, one per input configuration, and on CUDA the decoy profile's), then past the
    timing's warm-up, into its rounds (at least 5 are always made)."""
    before = config.trials + 1 + len(config.extra_distributions) + 1 + len(task.input_configs)
    before += 1 if backend == "cuda" else 0
    return before + config.warmup + 3


def kind_source(kind: Kind, exit_at: int) -> str:
    return kind.source.read_text().replace("__EXIT_AT__", str(exit_at))


# ------------------------------------------------------------------------- outside the pool
def nvidia_smi(query: str, apps: bool = False) -> list[str]:
    """Lines of ``nvidia-smi --query-gpu=QUERY`` (or ``--query-compute-apps``) for the visible
    GPUs; [] where there is none. A separate process: nothing here touches CUDA."""
    flag = "--query-compute-apps" if apps else "--query-gpu"
    cmd = ["nvidia-smi", f"{flag}={query}", "--format=csv,noheader,nounits"]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if visible and not apps and all(v.strip().isdigit() for v in visible.split(",")):
        cmd += ["-i", visible]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def gpu_memory_mb() -> int | None:
    values = [int(v) for v in nvidia_smi("memory.used") if v.isdigit()]
    return sum(values) if values else None


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def processes() -> list[dict[str, Any]]:
    """Every process of the machine: pid, ppid, state, cmdline, environ (None: unreadable)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _read(f"/proc/{entry}/stat")
        if stat is None:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        found.append(
            {
                "pid": int(entry),
                "state": fields[0].decode(),
                "ppid": int(fields[1]),
                "cmdline": (_read(f"/proc/{entry}/cmdline") or b"").replace(b"\0", b" "),
                "environ": _read(f"/proc/{entry}/environ"),
            }
        )
    return found


def worker_pids() -> set[int]:
    return {p["pid"] for p in processes() if WORKER_MODULE in p["cmdline"]}


def survivors(marker: str, workers_before: set[int]) -> dict[str, Any]:
    """Processes of this run still alive (see the module's docstring), zombies counted apart."""
    me, tag = os.getpid(), f"{MARKER_ENV}={marker}".encode()
    ours, zombies, foreign = [], 0, 0
    for p in processes():
        if p["pid"] == me:
            continue
        environ = p["environ"]
        marked = environ is not None and tag in environ.split(b"\0")
        worker = WORKER_MODULE in p["cmdline"] and p["pid"] not in workers_before
        other_run = environ is not None and not marked and worker
        if not (p["ppid"] == me or marked or worker):
            continue
        if other_run:
            foreign += 1
        elif p["state"] in ("Z", "X"):
            zombies += 1
        else:
            ours.append(f"{p['pid']} {p['state']} {p['cmdline'][:120].decode(errors='replace')}")
    return {"alive": ours, "zombies": zombies, "other_runs_workers": foreign}


def kill_marked(marker: str) -> int:
    """SIGKILL every live process carrying this run's marker (the watchdog's last resort)."""
    tag, killed = f"{MARKER_ENV}={marker}".encode(), 0
    for p in processes():
        if p["pid"] != os.getpid() and p["environ"] and tag in p["environ"].split(b"\0"):
            try:
                os.kill(p["pid"], 9)
                killed += 1
            except OSError:
                pass
    return killed


# ------------------------------------------------------------------------------------ jobs
@dataclass(frozen=True)
class Job:
    index: int
    label: str  # the kind's name, or "honest:<task>"
    task: Task
    source: str
    expected: str
    message: str  # the expected message's pattern ("" for honest ones)


def build_jobs(args: argparse.Namespace, config: SandboxConfig) -> tuple[list[Job], list[Task]]:
    tasks = {t.name: t for t in builtin_tasks()}
    if args.tasks in ("all", "starter"):
        honest_tasks = builtin_tasks(args.tasks)
    else:
        honest_tasks = [tasks[name] for name in args.tasks.split(",")]
    relu = tasks[FAULT_TASK]
    exit_at = exit_call(relu, config, args.backend)
    kinds = kinds_for(args.backend, args.kinds)
    drafts: list[tuple[str, Task, str, str, str]] = []
    for i in range(args.faulty):
        kind = kinds[i % len(kinds)]
        drafts.append((kind.name, relu, kind_source(kind, exit_at), kind.status, kind.message))
    for i in range(args.honest):
        task = honest_tasks[i % len(honest_tasks)]
        drafts.append((f"honest:{task.name}", task, task.solutions[args.backend], "ok", ""))
    random.Random(args.seed).shuffle(drafts)
    jobs = [
        Job(n, label, task, f"# soak candidate {n}\n{source}", status, message)
        for n, (label, task, source, status, message) in enumerate(drafts)
    ]
    return jobs, honest_tasks


STAGE = "worker_start_"  # a worker start's stages in a verdict's seconds: STAGE + stage


def _time_fields(result: EvalResult | None) -> dict[str, Any]:
    """A job row's figures from its verdict's ``extra["seconds"]``: ``worker_start_s`` (the
    seconds it waited for its lane's worker to start again after a fault killed it, or None),
    ``worker_start_stages_s`` (where that start went) and ``seconds`` (its other parts: the
    checks, timing, the waits at the timing gate, the worker's start)."""
    given = result.extra.get("seconds") if result is not None else None
    spent = {
        k: float(v)
        for k, v in (given.items() if isinstance(given, dict) else ())
        if isinstance(v, (int, float))
    }
    return {
        "worker_start_s": spent.get("worker_start"),
        "worker_start_stages_s": {
            k[len(STAGE) :]: v for k, v in spent.items() if k.startswith(STAGE)
        },
        "seconds": {k: round(v, 4) for k, v in spent.items() if not k.startswith(STAGE)},
    }


def _seconds_by_part(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each part's seconds summed over the jobs (``_time_fields``), the largest first."""
    total: dict[str, float] = {}
    for row in rows:
        for part, value in (row.get("seconds") or {}).items():
            total[part] = total.get(part, 0.0) + value
    return {k: round(v, 1) for k, v in sorted(total.items(), key=lambda kv: -kv[1])}


def _stage_medians(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per stage of a worker's start (``Worker.start_seconds``), its median over the jobs that
    waited for one."""
    stages: dict[str, list[float]] = {}
    for row in rows:
        for stage, value in (row.get("worker_start_stages_s") or {}).items():
            stages.setdefault(stage, []).append(value)
    return {k: round(statistics.median(v), 4) for k, v in sorted(stages.items())}


def verdict(r: EvalResult) -> list[Any]:
    return [r.status, sorted(r.flags)]


# ------------------------------------------------------------------------------------ run
class Soak:
    def __init__(self, args: argparse.Namespace, out: Path) -> None:
        self.args = args
        self.out = out
        self.started = time.monotonic()
        self.marker = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.report: dict[str, Any] = {}
        self.rows: list[dict[str, Any]] = []
        self.wrong: list[dict[str, Any]] = []
        self.unexpected: list[dict[str, Any]] = []
        self.alone: dict[str, list[Any]] = {}
        self.soak_s = 0.0  # this run's
        self.earlier_soak_s = 0.0  # the runs it resumes
        self.runs: list[dict[str, Any]] = []  # theirs (``--resume``)
        if args.resume:
            self.load(Path(args.resume))
        self.lock = threading.RLock()  # the report, the rows, the feeders' next job
        self.finished = threading.Event()
        self.workers_before: set[int] = set()

    def load(self, earlier: Path) -> None:
        """Carry on from an earlier run's OUT_DIR: the same jobs in the same order, the ones it
        judged (``soak_jobs.jsonl``, in the order their verdicts came) kept and skipped."""
        before = json.loads((earlier / "soak.json").read_text())
        if before.get("soak_args") != soak_args(self.args):
            raise SystemExit(
                f"--resume: {earlier} ran {before.get('soak_args')}, not {soak_args(self.args)}"
            )
        lines = (earlier / "soak_jobs.jsonl").read_text().splitlines()
        self.rows = [json.loads(line) for line in lines if line.strip()]
        indices = [r["index"] for r in self.rows]
        if len(set(indices)) != len(indices):
            raise SystemExit(f"--resume: {earlier}/soak_jobs.jsonl judges a job twice")
        self.wrong = list(before.get("wrong_verdict_examples", []))
        self.unexpected = list(before.get("unexpected_message_examples", []))
        self.earlier_soak_s = float(before.get("soak_seconds") or 0.0)
        self.runs = list(before.get("runs", []))

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    # ---------------------------------------------------------------------------- figures
    def figures(self) -> dict[str, Any]:
        faulty = [r for r in self.rows if not r["label"].startswith("honest:")]
        per_kind: dict[str, dict[str, Any]] = {}
        for r in self.rows:
            k = per_kind.setdefault(r["label"], {"n": 0, "wrong": 0, "unexpected_messages": 0,
                                                 "statuses": {}, "wall_s": []})  # fmt: skip
            k["n"] += 1
            k["wrong"] += not r["right"]
            k["unexpected_messages"] += not r["message_matches"]
            k["statuses"][r["status"]] = k["statuses"].get(r["status"], 0) + 1
            k["wall_s"].append(r["wall_s"])
        for k in per_kind.values():
            walls = k.pop("wall_s")
            k["median_wall_s"] = statistics.median(walls) if walls else None
        n, soak_s = len(self.rows), self.earlier_soak_s + self.soak_s
        starts = [r["worker_start_s"] for r in self.rows if r.get("worker_start_s")]
        return {
            "faulty": len(faulty),
            "honest": n - len(faulty),
            "kinds": sorted({r["label"] for r in faulty}),
            "wrong_verdicts": sum(not r["right"] for r in self.rows),
            "wrong_verdict_examples": self.wrong[:10],
            "unexpected_messages": sum(r["right"] and not r["message_matches"] for r in self.rows),
            "unexpected_message_examples": self.unexpected[:10],
            "evaluations": n,
            "soak_seconds": soak_s,
            "evaluations_per_minute": 60 * n / soak_s if soak_s else None,
            "per_kind": dict(sorted(per_kind.items())),
            "worker_starts": len(starts),
            "worker_start_s_median": statistics.median(starts) if starts else None,
            "worker_start_s_total": sum(starts),
            "worker_start_stages_s_median": _stage_medians(self.rows),
            "seconds_by_part": _seconds_by_part(self.rows),
            "elapsed_s": self.elapsed(),
        }

    def write(self, **extra: Any) -> None:
        with self.lock:
            self.report.update(self.figures(), **extra)
            path = self.out / "soak.json"
            tmp = path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(self.report, indent=1, default=str))
            tmp.replace(path)

    # ----------------------------------------------------------------------------- judge
    def judge(self, job: Job, result: EvalResult | None, error: str = "") -> None:
        status = result.status if result is not None else "exception"
        flags = sorted(result.flags) if result is not None else []
        message = result.message if result is not None else error
        honest = job.label.startswith("honest:")
        right = status == job.expected
        if honest and right and result is not None:
            right = verdict(result) == self.alone.get(job.task.name, ["ok", []])
        matches = honest or bool(re.search(job.message, message, re.IGNORECASE | re.MULTILINE))
        row = {
            "index": job.index,
            "label": job.label,
            "expected": job.expected,
            "status": status,
            "flags": flags,
            "right": right,
            "message_matches": matches,
            "wall_s": (result.wall_seconds if result is not None else None) or 0.0,
            "lane": result.extra.get("lane") if result is not None else None,
            **_time_fields(result),
        }
        self.rows.append(row)
        example = {**row, "message": message[:300]}
        if not right:
            self.wrong.append(example)
        elif not matches:
            self.unexpected.append(example)
        with open(self.out / "soak_jobs.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")

    # ------------------------------------------------------------------------------- run
    def watchdog(self, limit_s: float) -> None:
        """At ``limit_s`` from the start, whatever the pool is doing: write the figures reached
        (``stuck: true``), with this run's processes then alive, kill those, and exit 3."""
        if self.finished.wait(max(0.0, limit_s - self.elapsed())):
            return
        alive = survivors(self.marker, self.workers_before)
        self.write(complete=False, stuck=True, alive_at_watchdog=alive["alive"][:20],
                   leaked_processes=len(alive["alive"]), killed_by_watchdog=0)  # fmt: skip
        killed = kill_marked(self.marker)
        self.write(killed_by_watchdog=killed)
        print(f"watchdog: stuck at {self.elapsed():.0f} s; killed {killed}", flush=True)
        os._exit(3)

    def run(self) -> None:
        args = self.args
        (self.out / "soak_jobs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in self.rows))
        self.workers_before = worker_pids()
        self.report.update(
            provenance("soak", command(args), 0),
            complete=False,
            stuck=False,
            soak_args=soak_args(args),
            backend=args.backend,
            seed=args.seed,
            resumed_from_evaluations=len(self.rows),
            deadline_correctness_s=args.deadline,
            leaked_processes=None,
            gpu_mem_idle_before_mb=gpu_memory_mb(),
            gpu_mem_idle_after_mb=None,
        )
        names = nvidia_smi("name")
        self.report["gpu"] = f"{len(names)} x {names[0]}" if names else self.report["machine"]
        self.report["machine"] = self.report["gpu"]  # provenance(gpus=0) named the CPU only
        if args.seconds:
            threading.Thread(target=self.watchdog, args=(args.seconds + 50,), daemon=True).start()
        os.environ[MARKER_ENV] = self.marker  # every worker, and what it spawns, inherits it
        deadlines = Deadlines(correctness=args.deadline, timing=3 * args.deadline)
        lanes: int | Literal["auto"] = args.lanes or "auto"
        config = SandboxConfig(backend=args.backend, lanes_per_gpu=lanes, deadlines=deadlines,
                               worker_start=args.worker_start)  # fmt: skip
        self.report["worker_start"] = "fork" if config.forks_workers() else "exec"
        # the pool's job log beside the figures (``$CUDA_AGENT_JOB_LOG`` where set): each job's
        # arrival, start on its lane and verdict, to say where the lanes' time went
        job_log = os.environ.get(JOB_LOG_ENV) or str(self.out / "soak_job_log.jsonl")
        sandbox = Sandbox(config, job_log=job_log)
        try:
            self._soak(sandbox)
        finally:
            self._started_by(sandbox)
            t0 = time.monotonic()
            sandbox.close()
            self.report["close_s"] = time.monotonic() - t0
            os.environ.pop(MARKER_ENV, None)
        self._after_close()
        self.finished.set()
        this = {k: self.report.get(k) for k in RUN_KEYS}
        self.runs.append(
            {
                **this,
                "evaluations": len(self.rows) - self.report["resumed_from_evaluations"],
                "soak_seconds": self.soak_s,
                "elapsed_s": self.elapsed(),
            }
        )
        before_after = [
            (r["gpu_mem_idle_before_mb"], r["gpu_mem_idle_after_mb"]) for r in self.runs
        ]
        self.write(
            complete=True,
            runs=self.runs,
            leaked_processes=sum(r["leaked_processes"] or 0 for r in self.runs),
            gpu_mem_back_to_idle=all(
                a is not None and b is not None and a <= b + 16 for b, a in before_after
            )
            if any(b is not None for b, _ in before_after)
            else None,
        )

    def _started_by(self, sandbox: Sandbox) -> None:
        """What started the lanes' candidate workers in the end (``fork`` asked for may have
        fallen back to ``exec``: ``fork_unavailable`` says why)."""
        from cuda_agent.kernel_sandbox._parent import spawn

        started = sorted({lane.candidate.started_by for lane in sandbox._lanes.lanes} - {""})
        if started:
            self.report["worker_start"] = "+".join(started)
        self.report["fork_unavailable"] = spawn.fork_unavailable

    def _soak(self, sandbox: Sandbox) -> None:
        args, cfg = self.args, sandbox.config
        jobs, honest_tasks = build_jobs(args, cfg)
        kinds = kinds_for(args.backend, args.kinds)
        relu = next(t for t in builtin_tasks() if t.name == FAULT_TASK)
        exit_at = exit_call(relu, cfg, args.backend)
        self.report["kinds_expected"] = {
            k.name: {"what": k.what, "status": k.status, "message": k.message, "note": k.note,
                     "static_findings": [f.code for f in static_findings(kind_source(k, exit_at))]}
            for k in kinds
        }  # fmt: skip
        self.report["exit_at_call"] = exit_at
        self.report["honest_tasks"] = [t.name for t in honest_tasks]
        n_lanes = int(cfg.lanes_per_gpu) * cfg.workers
        self.report.update(lanes_per_gpu=cfg.lanes_per_gpu, devices=cfg.workers,
                           compile_workers=cfg.compile_workers)  # fmt: skip
        self.write()
        t0 = time.monotonic()
        sandbox.warm_up()
        self.report["warm_up_s"] = time.monotonic() - t0
        t0 = time.monotonic()
        ahead = honest_tasks + [relu] * (relu.name not in self.report["honest_tasks"])
        baselines = sandbox.measure_baselines(ahead)
        self.report["baselines_ahead"] = {
            "seconds": time.monotonic() - t0,
            "statuses": sorted({b.status for b in baselines}),
        }
        t0 = time.monotonic()
        alone = sandbox.evaluate_many([(t, t.solutions[args.backend]) for t in honest_tasks])
        self.alone = {t.name: verdict(r) for t, r in zip(honest_tasks, alone, strict=True)}
        self.report["alone_verdicts"] = self.alone
        self.report["alone_pass_s"] = time.monotonic() - t0
        self.write()
        print(f"{len(jobs)} jobs, {n_lanes} lanes; ready at {self.elapsed():.0f} s", flush=True)

        judged = {r["index"] for r in self.rows}
        if any(i >= len(jobs) for i in judged):
            raise SystemExit("--resume: the earlier run judged jobs this one does not have")
        pending = iter([j for j in jobs if j.index not in judged])
        in_flight = args.in_flight or 2 * n_lanes
        self.report["in_flight"] = in_flight
        soak_started = time.monotonic()

        def next_job() -> Job | None:
            with self.lock:
                if args.seconds and self.elapsed() >= args.seconds:
                    self.report["stopped_early"] = f"--seconds {args.seconds} reached"
                    return None
                return next(pending, None)

        def feed() -> None:  # one of ``in_flight`` feeders: a job, its verdict, the next job
            while (job := next_job()) is not None:
                try:
                    result: EvalResult | None = sandbox.evaluate_many([(job.task, job.source)])[0]
                    error = ""
                except Exception as exc:  # a sandbox bug: this job's verdict is wrong
                    result, error = None, f"{type(exc).__name__}: {exc}"
                with self.lock:
                    self.judge(job, result, error)
                    self.soak_s = time.monotonic() - soak_started
                    self.write()
                    if len(self.rows) % n_lanes == 0 or len(self.rows) == len(jobs):
                        print(f"{len(self.rows)}/{len(jobs)} at {self.elapsed():.0f} s: "
                              f"{self.figures()['wrong_verdicts']} wrong", flush=True)  # fmt: skip

        feeders = [threading.Thread(target=feed, daemon=True) for _ in range(in_flight)]
        for t in feeders:
            t.start()
        for t in feeders:
            t.join()
        self.report["gate"] = sandbox.gate_stats()

    def _after_close(self) -> None:
        t0, alive = time.monotonic(), survivors(self.marker, self.workers_before)
        while alive["alive"] and time.monotonic() - t0 < 10:
            time.sleep(0.5)
            alive = survivors(self.marker, self.workers_before)
        self.report.update(
            leaked_processes=len(alive["alive"]),
            leaked_examples=alive["alive"][:10],
            zombies_after=alive["zombies"],
            other_runs_workers=alive["other_runs_workers"],
        )
        before = self.report["gpu_mem_idle_before_mb"]
        t0, after = time.monotonic(), gpu_memory_mb()
        while before is not None and after is not None and after > before + 16:
            if time.monotonic() - t0 > 20:
                break
            time.sleep(1)
            after = gpu_memory_mb()
        self.report.update(
            gpu_mem_idle_after_mb=after,
            gpu_mem_settle_s=time.monotonic() - t0,
            gpu_compute_apps_after=nvidia_smi("pid,used_memory", apps=True),
        )


# (``gate``: this run's timing-gate figures; the report's top-level ``gate`` is the last run's)
RUN_KEYS = ("date", "commit", "gpu", "lanes_per_gpu", "worker_start", "leaked_processes",
            "leaked_examples", "gpu_mem_idle_before_mb", "gpu_mem_idle_after_mb", "stopped_early",
            "gate")  # fmt: skip


def soak_args(args: argparse.Namespace) -> dict[str, Any]:
    """What fixes the jobs and their order: a resumed run must have the same."""
    return {k: getattr(args, k) for k in ("faulty", "honest", "backend", "tasks", "kinds", "seed")}


def command(args: argparse.Namespace) -> str:
    parts = ["python benchmarks/gpu/soak.py OUT_DIR", f"--faulty {args.faulty}",
             f"--honest {args.honest}", f"--backend {args.backend}", f"--tasks {args.tasks}",
             f"--deadline {args.deadline:g}", f"--seed {args.seed}"]  # fmt: skip
    if args.kinds:
        parts.append(f"--kinds {args.kinds}")
    if args.worker_start != "auto":
        parts.append(f"--worker-start {args.worker_start}")
    if args.lanes:
        parts.append(f"--lanes {args.lanes}")
    if args.seconds:
        parts.append(f"--seconds {args.seconds:g}")
    if args.in_flight:
        parts.append(f"--in-flight {args.in_flight}")
    if args.resume:
        parts.append("--resume EARLIER_OUT_DIR")
    return " ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--faulty", type=int, default=1000)
    parser.add_argument("--honest", type=int, default=1000)
    parser.add_argument("--backend", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--lanes", type=int, default=0, help="lanes per GPU (0: auto)")
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="start no job after this many seconds (0: run every job)")  # fmt: skip
    parser.add_argument("--tasks", default="starter", help="honest tasks: starter, all, a,b,...")
    parser.add_argument("--deadline", type=float, default=10.0,
                        help="correctness deadline in seconds (timing: three times it)")  # fmt: skip
    parser.add_argument("--kinds", default="", help="faulty kinds, a,b,... (default: all)")
    parser.add_argument("--in-flight", type=int, default=0,
                        help="jobs in the pool at once (0: 2 per lane)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker-start", choices=("auto", "fork", "exec"), default="auto",
                        help="how workers start (SandboxConfig.worker_start); the report's "
                        "worker_start says what ran")  # fmt: skip
    parser.add_argument("--resume", default="",
                        help="an earlier run's OUT_DIR: go on with the jobs it did not reach")  # fmt: skip
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    soak = Soak(args, out)
    soak.run()
    keys = ("faulty", "honest", "wrong_verdicts", "unexpected_messages", "leaked_processes",
            "gpu_mem_idle_before_mb", "gpu_mem_idle_after_mb", "evaluations_per_minute")  # fmt: skip
    print(json.dumps({k: soak.report.get(k) for k in keys}), flush=True)


if __name__ == "__main__":
    main()
