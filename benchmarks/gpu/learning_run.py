"""One learning run over several back-to-back device calls (issue 29, part 3): the logic of
``learning_run.sh``, which sets the environment and calls this; usage is in its header.

    python benchmarks/gpu/learning_run.py start|resume OUT_DIR [--seconds S] [--margin M]
        [--run RUN_DIR] [--gguf GGUF] [-- train flags...]

Each call runs ``cuda-agent train`` once, with ``--stop-after`` set so that the trainer stops
between two units of work (exit 75) ``--margin`` seconds before this call's ``--seconds`` are
up; ``start`` begins the run in RUN_DIR (under /tmp, which the machine keeps while it is warm),
``resume`` continues it (``--resume RUN_DIR``). Should the trainer run past the call anyway (a
unit longer than what was left: an invocation's first unit always starts), it is killed 20 s
before the end and the next call redoes that unit, as after any kill.

Every call copies the run's figures so far into OUT_DIR: ``learning_run.json`` (every call's
exit, wall seconds and steps reached, and the whole run's invocations, wall and training
seconds), ``metrics.jsonl``, ``state.json``, ``config.json``, ``eval_<name>.json`` and the
call's log ``train_call<N>.log``, its sandbox's job log ``jobs_call<N>.jsonl`` (each job's
arrival, lane and verdict as they happened: ``kernel-sandbox jobs FILE`` says which jobs still
waited or ran when a call was killed) and, on a GPU, ``gpu_util_call<N>.csv`` (its utilisation
every 100 ms, ``gpu_util.py``, for ``rl_step_figures.py``), and the earlier calls' such files
(kept in ``RUN_DIR/calls``): the last call's OUT_DIR holds every call's. The call that
finishes the run also copies ``summary.json``
and writes ``train_learning.json`` and ``learning.json`` (``benchmarks/train_report.py``, its
wall time the trainer's over every call, start-up included) into RUN_DIR, whence every later
call copies them out again (a chain's later bundles hold them). Exit status: 0 the run is
finished; 75 call again with ``resume``; 1 an error (the log's tail is printed).

``--pack``: a machine can be lost between calls (taken back, or given back after 30 s idle), and
/tmp with it. With ``--pack`` each call also writes the whole run directory (its last
checkpoint, state, metrics, evaluations, every call's log; not its TensorBoard events) into
``OUT_DIR/pack/run.tgz.NNN``, parts of at most 15 MiB (the device returns at most 8 files of
16 MiB, 64 MiB in all, so the loose figures, logs and the finished run's reports are not
written there then: they are in the pack).
Carried back in a later call, ``resume OUT_DIR --from-pack PACK_DIR`` lays the run out again
where it is missing and continues it. Here, ``unpack PACK_DIR --run DIR`` opens a pack.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_util import UtilisationLog

EX_TEMPFAIL = 75  # cuda_agent.runner.deadline's: stopped for the deadline
KILL_BEFORE_END_S = 20.0  # a trainer still running then is killed: the figures are copied
# The run when no train flags are given: the h200 preset with 40 multi-turn RL steps of three
# tasks (six, the preset's, took 45 to 70 s a step in issue 17's run: 40 of those are four or
# five calls), the training tasks not evaluated.
DEFAULT_FLAGS = ["--preset", "h200", "--steps", "40", "--tasks-per-step", "3"]
DEFAULT_FLAGS += ["--eval-train", "false"]


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _write(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def stop_after(seconds: float, margin: float, spent: float) -> float:
    """The trainer's ``--stop-after``: what is left of the call, less the margin (for the
    trainer's exit and the copying), counted from the trainer's start."""
    return seconds - margin - spent


def train_command(mode: str, run: Path, gguf: str, flags: list[str], seconds: float) -> list[str]:
    """The trainer's command line for this call: a new run while RUN_DIR holds no
    ``config.json`` (the first call, or one stopped before the trainer wrote it), else a
    resume; both with ``--stop-after``, and a resume with the start's ``--unit-estimates``
    (the trainer does not save them)."""
    train = [sys.executable, "-m", "cuda_agent.runner", "train", "--quiet"]
    limit = ["--stop-after", f"{seconds:.0f}"]
    if mode == "resume" and (run / "config.json").exists():
        given = flags.index("--unit-estimates") if "--unit-estimates" in flags else None
        estimates = [] if given is None else flags[given : given + 2]
        return [*train, "--resume", str(run), *estimates, *limit]
    model = [] if "--model" in flags else ["--model", gguf]
    return [*train, *model, "--out", str(run), *flags, *limit]


def outcome(code: int | None) -> str:
    if code == 0:
        return "finished"
    if code == EX_TEMPFAIL:
        return "deadline"
    return "killed" if code is None else "error"


def whole_run(run: Path, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of the run so far, over every invocation (``state.json``'s sessions)."""
    state = _read(run / "state.json") or {}
    sessions = state.get("sessions", [])
    return {
        "calls": len(calls),
        "calls_wall_s": round(sum(c["wall_s"] for c in calls), 1),  # start-ups included
        "invocations": len(sessions),
        "wall_seconds": round(sum(s.get("seconds", 0.0) for s in sessions), 1),
        "train_seconds": round(state.get("train_seconds", 0.0), 1),
        "stage_steps": state.get("stage_steps", {}),
        "finished_stages": state.get("finished_stages", []),
        "finished": (run / "summary.json").exists(),
    }


def copy_figures(run: Path, out: Path) -> None:
    """The run's figures into ``out``, with every call's logs kept in ``RUN/calls`` (a later
    call's OUT_DIR holds the earlier calls' logs too: one call's files are the whole run's)."""
    names = ("metrics.jsonl", "state.json", "config.json", "summary.json")
    for name in (*names, *REPORTS):
        if (run / name).exists():
            shutil.copy(run / name, out / name)
    for path in sorted((run / "eval").glob("*/eval.json")):
        shutil.copy(path, out / f"eval_{path.parent.name}.json")
    for path in sorted((run / "calls").glob("*_call*")):
        if not (out / path.name).exists():
            shutil.copy(path, out / path.name)


PART_BYTES = 15 * 2**20  # under the device's 16 MiB a returned file
PACK_SKIP = ("tensorboard",)  # events the figures repeat


def pack(run: Path, dest: Path, part_bytes: int = PART_BYTES) -> list[Path]:
    """The run directory as a gzip tar in ``dest/run.tgz.000``, ``.001``, ... of at most
    ``part_bytes`` each (earlier parts removed first); returns the parts. A finished run (its
    ``summary.json`` written) goes without its checkpoints: its final ``adapter/`` is what
    another run starts from (``--init-from``), about 20 MB against 60 MB with the optimizer's
    state, so that two runs' packs fit one call's return."""
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("run.tgz.*"):
        old.unlink()
    skip = PACK_SKIP + (("checkpoints",) if (run / "summary.json").exists() else ())
    whole = dest / ".run.tgz.partial"
    with tarfile.open(whole, "w:gz", compresslevel=1) as tar:
        for path in sorted(run.iterdir()):
            if path.name not in skip:
                tar.add(path, arcname=path.name)
    parts = []
    with whole.open("rb") as fh:
        while chunk := fh.read(part_bytes):
            part = dest / f"run.tgz.{len(parts):03d}"
            part.write_bytes(chunk)
            parts.append(part)
    whole.unlink()
    return parts


def unpack(src: Path, run: Path) -> None:
    """A pack's parts, in order, laid out as the run directory ``run`` (which must not exist);
    a missing or torn part is an error, and nothing is left half laid out."""
    parts = sorted(src.glob("run.tgz.[0-9][0-9][0-9]"))
    if not parts or [p.name for p in parts] != [f"run.tgz.{i:03d}" for i in range(len(parts))]:
        raise ValueError(f"{src}: no complete pack (run.tgz.000, .001, ... in order)")
    if run.exists():
        raise ValueError(f"{run} exists already: unpack only where the run is missing")
    partial = run.with_name(f".{run.name}.unpacking")
    shutil.rmtree(partial, ignore_errors=True)
    whole = partial.with_suffix(".tgz")
    partial.parent.mkdir(parents=True, exist_ok=True)
    with whole.open("wb") as out:
        for part in parts:
            out.write(part.read_bytes())
    try:
        with tarfile.open(whole, "r:gz") as tar:
            tar.extractall(partial, filter="data")  # no absolute paths, links out or devices
    except (tarfile.TarError, EOFError, OSError) as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise ValueError(f"{src}: the pack is torn or incomplete ({error})") from error
    finally:
        whole.unlink(missing_ok=True)
    os.replace(partial, run)


def _lay_out(src: Path, run: Path) -> bool:
    """``unpack``, saying what happened; False when the pack could not be laid out."""
    try:
        unpack(src, run)
    except ValueError as error:
        print(f"learning_run: {error}")
        return False
    print(f"learning_run: {run} laid out from the pack in {src}")
    return True


def _keep(run: Path, out: Path, packed: bool) -> None:
    """What a call leaves in OUT_DIR: the loose figures, or with ``--pack`` the whole run."""
    if packed:
        pack(run, out / "pack")
    else:
        copy_figures(run, out)


REPORTS = ("train_learning.json", "learning.json")  # report()'s, kept in the run directory


def report(run: Path, command: list[str], wall_s: float) -> None:
    """``train_learning.json`` and ``learning.json`` of the finished run, its wall time
    ``wall_s`` (the trainer's, summed over the calls), written into the run directory, so that
    every later call copies them out again with the rest of its figures (``copy_figures``)."""
    shown = " ".join(command).replace(str(run), "RUN_DIR")
    subprocess.run(
        [
            sys.executable,
            "benchmarks/train_report.py",
            str(run),
            str(run / "train_learning.json"),
            "--wall-s",
            str(wall_s),
            "--label",
            "learning",
            "--learning",
            str(run / "learning.json"),
            "--command",
            shown.replace(sys.executable, "python"),
        ],
        check=False,
    )


def _run(
    command: list[str],
    log: Path,
    timeout: float,
    gpu_log: Path | None = None,
    job_log: Path | None = None,
) -> int | None:
    """The command in its own process group, output to ``log``; None when killed for the
    timeout (the whole group: the sandbox's workers too). With ``gpu_log``, the GPU's
    utilisation meanwhile goes there (``gpu_util.UtilisationLog``; nothing without a GPU); with
    ``job_log``, the sandbox's jobs as they happen (``$CUDA_AGENT_JOB_LOG``, unless set
    already: ``kernel-sandbox jobs`` reads it)."""
    env = dict(os.environ)
    if job_log is not None:
        env.setdefault("CUDA_AGENT_JOB_LOG", str(job_log))
    with log.open("w") as fh, UtilisationLog(gpu_log):
        proc = subprocess.Popen(
            command, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        try:
            return proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None


def main(argv: list[str] | None = None) -> int:
    began = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("start", "resume", "unpack"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--seconds", type=float, default=570.0, help="this call's time")
    parser.add_argument("--margin", type=float, default=60.0, help="left after the trainer")
    parser.add_argument("--run", type=Path, default=Path("/tmp/learning-run"))
    parser.add_argument("--gguf", default="/tmp/smol.gguf")
    parser.add_argument("--pack", action="store_true", help="the run into OUT_DIR/pack each call")
    parser.add_argument("--from-pack", type=Path, help="resume: lay the run out from this pack")
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)  # train flags follow "--"
    args = parser.parse_args(argv[:cut])
    args.flags = argv[cut + 1 :]
    run, out = args.run, args.out
    if args.mode == "unpack":  # OUT_DIR is the pack here
        return 0 if _lay_out(out, run) else 1
    out.mkdir(parents=True, exist_ok=True)
    missing = args.mode == "resume" and not run.exists()
    if args.from_pack is not None and missing and not _lay_out(args.from_pack, run):
        return 1
    book = run / "learning_run.json"  # every call's record, kept beside the run
    if args.mode == "start":
        flags = args.flags or DEFAULT_FLAGS
        if "--model" not in flags and not Path(args.gguf).exists():
            print(f"learning_run: {args.gguf} is missing: join the model first (join_model.sh)")
            return 1
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir(parents=True)
        _write(book, {"flags": flags, "calls": []})
    elif args.flags:
        print("learning_run: train flags are for 'start'; a resumed run keeps its settings")
        return 1
    elif not book.exists():
        print(
            f"learning_run: {run} is gone (the machine was given back, or no call started the "
            "run): resume it from a pack a call wrote (--from-pack) or begin again with 'start'"
        )
        return 1
    record = _read(book)
    calls: list[dict[str, Any]] = record["calls"]
    if (run / "summary.json").exists():  # finished by an earlier call: the figures again
        print("learning_run: the run is finished")
        _keep(run, out, args.pack)
        _write(out / "learning_run.json", {**record, "run": whole_run(run, calls)})
        return 0
    limit = stop_after(args.seconds, args.margin, time.monotonic() - began)
    if limit <= 0:
        print(
            f"learning_run: no time left for the trainer ({args.seconds:g} s, margin "
            f"{args.margin:g} s)"
        )
        return 1
    command = train_command(args.mode, run, args.gguf, record["flags"], limit)
    logs = run / "calls" if args.pack else out  # packed: the logs travel in the pack
    logs.mkdir(exist_ok=True)
    log = logs / f"train_call{len(calls) + 1}.log"
    started, at = time.monotonic(), _now()
    gpu_log = logs / f"gpu_util_call{len(calls) + 1}.csv"  # where nvidia-smi is
    job_log = logs / f"jobs_call{len(calls) + 1}.jsonl"
    budget = args.seconds - KILL_BEFORE_END_S - (started - began)
    code = _run(command, log, budget, gpu_log, job_log)
    if not args.pack:  # written into OUT_DIR as they ran (a killed call still returns them)
        (run / "calls").mkdir(exist_ok=True)
        for path in (log, gpu_log, job_log):
            if path.exists():
                shutil.copy(path, run / "calls" / path.name)
    said = [x for x in log.read_text(errors="replace").splitlines() if x.startswith("cuda-agent:")]
    calls.append(
        {
            "call": len(calls) + 1,
            "started": at,
            "command": " ".join(command).replace(sys.executable, "python"),
            "stop_after_s": round(limit),
            "wall_s": round(time.monotonic() - started, 1),
            "exit_code": code,
            "outcome": outcome(code),
            "said": said[-1] if said else "",
            **{k: whole_run(run, calls)[k] for k in ("stage_steps", "train_seconds")},
        }
    )
    _write(book, record)
    figures = {**record, "run": whole_run(run, calls)}
    if code == 0:  # the reports first: they go into the run, then out with its figures
        report(run, command, figures["run"]["calls_wall_s"])
    _keep(run, out, args.pack)
    _write(out / "learning_run.json", figures)
    last = calls[-1]
    print(
        f"learning_run: call {last['call']} {last['outcome']} after {last['wall_s']} s "
        f"(exit {code}); steps {last['stage_steps']}; invocations "
        f"{figures['run']['invocations']}, {figures['run']['wall_seconds']} s in all"
    )
    if code == 0:
        return 0
    if code in (EX_TEMPFAIL, None):
        print("learning_run: call again: learning_run.sh resume OUT_DIR")
        return EX_TEMPFAIL
    print(log.read_text(errors="replace")[-3000:])
    return 1


if __name__ == "__main__":
    sys.exit(main())
