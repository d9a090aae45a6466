"""Several learning runs in order over back-to-back device calls, one command for every call:
a warm start, RL from its weights, and the SFT-only control from the same weights for RL's
training seconds, say (issue 29). ``learning_run.py`` runs one; this runs a plan of them, so a
call that finishes one run goes straight on to the next instead of ending half used.

    python benchmarks/gpu/learning_chain.py OUT_DIR PLAN.json [--seconds S] [--margin M]
        [--root DIR] [--min-seconds T]
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
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
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
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        runs = read_plan(args.plan)
    except ValueError as exc:
        print(f"learning_chain: {exc}")
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
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
