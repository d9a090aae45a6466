"""Several learning runs in order over back-to-back device calls, one command for every call:
a warm start, RL from its weights, and the SFT-only control from the same weights for RL's
training seconds, say (issue 29). ``learning_run.py`` runs one; this runs a plan of them, so a
call that finishes one run goes straight on to the next instead of ending half used.

    python benchmarks/gpu/learning_chain.py OUT_DIR PLAN.json [--seconds S] [--margin M]
        [--root DIR] [--min-seconds T] [--bundle]
    (or: bash benchmarks/gpu/learning_run.sh chain OUT_DIR PLAN.json ..., which sets the
    environment)

PLAN.json: ``{"runs": [{"name": "warm", "flags": [train flags...]}, ...]}``. A run's flags may
name an earlier run of the plan: ``{run:NAME}`` is its directory (``--init-from {run:warm}``)
and ``{train_seconds:NAME}`` its training seconds, whole (``--train-budget-s
{train_seconds:rl}``); they are read when the run starts, so NAME must be finished by then.

Every call goes down the plan: a finished run's figures are copied again, the first unfinished
one is started or resumed (``learning_run.main``, in ``ROOT/NAME``, its figures in
``OUT_DIR/NAME``) with what is left of the call, and when it finishes, the next one starts if at
least ``--min-seconds`` are left. Exit status: 0 every run is finished, 75 call again (the
same command), 1 an error. ``OUT_DIR/chain.json`` says where each run stands.

``--bundle``: the device returns at most 8 files from a call (16 MiB each, 64 MiB in all, two
folders down), fewer than a chain's loose figures, and the trained adapters are lost with the
machine. With ``--bundle`` every call ends (whatever its exit) with OUT_DIR holding only
``figures.tgz`` (every file the chain wrote there, the runs' folders and ``chain.json``
included, and each run's evaluations' answers, ``NAME/eval_<evaluation>_episodes/``) and, for each run of the plan that has an adapter (its final one, else its newest
checkpoint's), ``NAME_adapter16.txz`` (``adapter16.py pack``: about 8.8 MB, float16, for
evaluating, not for resuming; about 2 s each): at most one file more than the plan has runs. Here, ``tar xzf
figures.tgz`` lays the figures out again, and ``python benchmarks/gpu/adapter16.py unpack
NAME_adapter16.txz DIR`` an adapter.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adapter16
import learning_run

EX_TEMPFAIL = learning_run.EX_TEMPFAIL
REFERENCE = re.compile(r"\{(run|train_seconds):([A-Za-z0-9_-]+)\}")


def read_plan(path: Path) -> list[dict[str, Any]]:
    """The plan's runs, checked: unique names, a list of string flags each, and references to
    earlier runs only. ValueError saying what is wrong."""
    try:
        runs = json.loads(path.read_text())["runs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f'{path}: not a plan ({{"runs": [...]}}): {exc}') from None
    seen: list[str] = []
    for run in runs:
        name, flags = run.get("name"), run.get("flags")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", name) or name in seen:
            raise ValueError(f"{path}: run names must be unique words, not {name!r}")
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise ValueError(f"{path}: run {name!r}: flags must be a list of strings")
        for _, other in (m.groups() for f in flags for m in REFERENCE.finditer(f)):
            if other not in seen:
                raise ValueError(f"{path}: run {name!r} names {other!r}, not a run before it")
        seen.append(name)
    return runs


def resolved(flags: list[str], root: Path) -> list[str]:
    """``flags`` with each ``{run:NAME}`` and ``{train_seconds:NAME}`` replaced (module
    docstring). ValueError when NAME's training seconds are not known (it has not finished)."""

    def one(match: re.Match[str]) -> str:
        kind, name = match.groups()
        if kind == "run":
            return str(root / name)
        state = root / name / "state.json"
        if not (root / name / "summary.json").exists() or not state.exists():
            raise ValueError(f"{match.group(0)}: run {name!r} has not finished")
        seconds = json.loads(state.read_text()).get("train_seconds", 0.0)
        return f"{max(1.0, seconds):.0f}"  # (0 would be no budget at all)

    return [REFERENCE.sub(one, flag) for flag in flags]


def bundle(out: Path, root: Path, names: list[str]) -> list[Path]:
    """OUT_DIR as ``--bundle`` leaves it (module docstring): everything in ``out``, and the
    episodes of each evaluation of the runs in ``names``, into ``out/figures.tgz``, the loose
    copies removed, then ``NAME_adapter16.txz`` of each run in
    ``names`` whose directory ``root/NAME`` has an adapter. Returns what ``out`` holds. An
    adapter that cannot be packed is said and passed over: the figures still come back."""
    adapters = {f"{name}_adapter16.txz" for name in names}
    partial = out / ".figures.tgz.partial"
    kept = {"figures.tgz", partial.name, *adapters}
    loose = [p for p in sorted(out.iterdir()) if p.name not in kept]
    with tarfile.open(partial, "w:gz") as tar:
        for path in loose:
            tar.add(path, arcname=path.name)
        for name in names:  # the answers themselves: which kernel each sample wrote
            for episodes in sorted((root / name / "eval").glob("*/episodes")):
                tar.add(episodes, arcname=f"{name}/eval_{episodes.parent.name}_episodes")
    partial.replace(out / "figures.tgz")
    for path in loose:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    for name in names:
        adapter = adapter16.latest_adapter(root / name)
        if adapter is not None:
            try:
                adapter16.pack(adapter, out / f"{name}_adapter16.txz")
            except (ValueError, OSError) as error:
                print(f"learning_chain: {name}: the adapter is not bundled: {error}")
    return sorted(out.iterdir())


def main(argv: list[str] | None = None) -> int:
    began = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("plan", type=Path)
    parser.add_argument("--seconds", type=float, default=570.0, help="this call's time")
    parser.add_argument("--margin", type=float, default=30.0, help="left after each trainer")
    parser.add_argument("--root", type=Path, default=Path("/tmp/learning-chain"))
    parser.add_argument("--min-seconds", type=float, default=120.0,
                        help="the least time worth starting the next run with")  # fmt: skip
    parser.add_argument("--bundle", action="store_true",
                        help="leave figures.tgz and each run's NAME_adapter16.txz only")  # fmt: skip
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        runs = read_plan(args.plan)
    except ValueError as exc:
        print(f"learning_chain: {exc}")
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        return _chain(args, runs, began)
    finally:  # whatever the exit, an error's too
        if args.bundle:
            held = bundle(args.out, args.root, [run["name"] for run in runs])
            print(f"learning_chain: bundled: {', '.join(p.name for p in held)}")


def _chain(args: argparse.Namespace, runs: list[dict[str, Any]], began: float) -> int:
    """The plan's runs for this call (module docstring); the exit status."""
    where: dict[str, str] = {}
    code = 0
    for run in runs:
        name = run["name"]
        directory, out = args.root / name, args.out / name
        left = args.seconds - (time.monotonic() - began)
        finished = (directory / "summary.json").exists()
        if not finished and left < args.min_seconds:
            code = EX_TEMPFAIL  # (this run and the ones after it wait for the next call)
            break
        base = ["--run", str(directory), "--seconds", f"{left:.0f}", "--margin", f"{args.margin:g}"]
        if finished or (directory / "learning_run.json").exists():
            code = learning_run.main(["resume", str(out), *base])
        else:
            try:
                flags = resolved(run["flags"], args.root)
            except ValueError as exc:
                print(f"learning_chain: {name}: {exc}")
                return 1
            code = learning_run.main(["start", str(out), *base, "--", *flags])
        where[name] = {0: "finished", EX_TEMPFAIL: "deadline"}.get(code, "error")
        if code != 0:
            break
    for run in runs:
        where.setdefault(run["name"], "waiting")
    (args.out / "chain.json").write_text(json.dumps({"runs": where}, indent=2) + "\n")
    print(f"learning_chain: {', '.join(f'{k} {v}' for k, v in where.items())}")
    if code == 0:
        return 0
    if code == EX_TEMPFAIL:
        print("learning_chain: call again with the same command")
        return EX_TEMPFAIL
    return 1


if __name__ == "__main__":
    sys.exit(main())
