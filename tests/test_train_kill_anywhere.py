"""Kill-anywhere training: ``cuda-agent train`` killed with SIGKILL at 22 seeded random moments,
resumed after each, ends where an unkilled run with the same seed ends.

The moments come from the unkilled run's own timeline: while it runs, the test notes when each
metrics record is committed (``state.json``'s ``metrics_bytes``), which cuts the run into
phases (the work before the first record, between two records, after the last one: saving the
adapter, curves and summary). Every phase gets one kill (early in it) and the rest fall on
random phases; a kill waits for its phase to begin in the resumed process (the process has
rewritten ``config.json`` at start-up and committed as many records), then sleeps a random
fraction of that phase's length in the unkilled run. Which phase a kill really hit is read back from the
state it left, and every stage and every evaluation must have been hit: where a busy machine
ran a one-step phase past its kill, a second run is killed at other seeded moments, and both
must end as the unkilled run.

The run is small: the tiny random model of ``cuda_agent.policy.testing``, two training and two
held-out tasks, every stage with one or two steps, and answers of at most 40 tokens (the
training tasks teach a one-line compact answer, so the warm start accepts the budget).

Checked against the unkilled run: every step in the metrics exactly once and in the same order,
every record's figures (all but wall times and decoder caches), every evaluation's
``eval.json``, the final adapter, the critic and the optimizers' state. On the CPU these are
expected bitwise equal (same seeds, same batches, one thread order); the comparison allows a
relative 1e-6 all the same, since the resumed process reloads float32 weights into a fresh
model and a BLAS may pick another kernel for the first call.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.runner.testing import (
    CliProcess,
    copy_builtin_tasks,
    run_cli,
    start_cli,
    steady,
    write_rewarded_episodes,
)

# A guard against a hung child process, not a time limit: on a busy 2-core machine a small
# run takes many minutes.
HANG_S = 3600

pytestmark = pytest.mark.slow

SEED = 30
KILLS = 22
SMALL = [
    "--warmstart-steps", "2", "--eval-after-warmstart", "yes", "--rl-warmup-steps", "1",
    "--rft-tasks", "2", "--rft-samples", "1", "--rft-turns", "2", "--rft-steps", "2",
    "--value-steps", "1", "--steps", "2", "--turns", "2", "--advantage", "gae",
    "--tasks-per-step", "2", "--group-size", "2", "--lora-rank", "4", "--eval-train", "true",
    "--kl-coef", "0.05", "--max-new-tokens", "40", "--seed", "5", "--quiet",
]  # fmt: skip
# One compute thread: on a 2-core machine beside this test's polling (and CI's other work) two
# OpenMP threads wait on each other at every barrier and a step takes several times longer.
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# Figures that measure the machine, not the training: they differ between two runs.


def _start(*args: str) -> CliProcess:
    """The command in its own process group (forked from a process that imported the trainer
    once: ``runner.testing.start_cli``); its error output in a file."""
    log = Path(args[args.index("--out") + 1] if "--out" in args else args[1]) / "stderr.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    return start_cli(["train", *args], stdout=Path(os.devnull), stderr=log, env=ONE_THREAD)


def _errors(run: Path) -> str:
    return (run / "stderr.log").read_text()[-3000:]


def _committed(run: Path) -> int:
    """Records of finished work: the lines within the state's ``metrics_bytes``."""
    try:
        size = json.loads((run / "state.json").read_text())["metrics_bytes"]
        with (run / "metrics.jsonl").open("rb") as fh:
            return fh.read(size).count(b"\n")
    except (FileNotFoundError, KeyError, json.JSONDecodeError):
        return 0


def _started_since(run: Path, launched: float) -> bool:
    """Whether the process launched at ``launched`` (wall clock) is past its start-up: it
    writes the resolved config once the policy is loaded."""
    try:
        return (run / "config.json").stat().st_mtime >= launched
    except FileNotFoundError:
        return False


def _unkilled(run: Path, args: list[str]) -> list[float]:
    """Run to the end; the phases' lengths in seconds (phase i ends with record i, the last
    one with the exit)."""
    launched = time.time()
    proc = _start(*args)
    marks: list[float] = []
    while proc.poll() is None:
        now = time.monotonic()
        if not marks and _started_since(run, launched):
            marks.append(now)
        while marks and _committed(run) >= len(marks):
            marks.append(now)
        time.sleep(0.05)
    marks.append(time.monotonic())
    assert proc.returncode == 0, _errors(run)
    return [b - a for a, b in itertools.pairwise(marks)]


def _kill_in_phase(run: Path, args: list[str], phase: int, delay: float) -> bool:
    """Start (or resume) the run, wait for ``phase`` to begin, sleep ``delay`` and SIGKILL it;
    False when the run finished first."""
    launched = time.time()
    proc = _start(*args)
    deadline = time.monotonic() + 300
    while not (_started_since(run, launched) and _committed(run) >= phase):
        assert proc.poll() is None, f"the run ended before phase {phase} began: {_errors(run)}"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(delay)
    if proc.poll() is None:
        proc.kill()  # SIGKILL to its process group
    proc.wait(timeout=60)
    if proc.returncode == 0:
        return False
    assert proc.returncode == -signal.SIGKILL, _errors(run)
    return True


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _close(a: Any, b: Any, where: str) -> None:
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9), f"{where}: {a} != {b}"
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{where}: {sorted(a)} != {sorted(b)}"
        for k in a:
            _close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _tensors_close(a: Any, b: Any, where: str) -> None:
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        a, b = dict(enumerate(a)), dict(enumerate(b))
    assert a.keys() == b.keys(), where
    for k in a:
        if isinstance(a[k], dict | list):
            _tensors_close(a[k], b[k], f"{where}.{k}")
        elif isinstance(a[k], torch.Tensor):
            torch.testing.assert_close(a[k], b[k], rtol=1e-6, atol=1e-9, msg=f"{where}.{k}")
        else:
            _close(a[k], b[k], f"{where}.{k}")


def _weights(root: Path) -> dict[str, Any]:
    """Every safetensors file under ``root`` (adapter, critic) by relative path."""
    return {str(p.relative_to(root)): load_file(p) for p in sorted(root.rglob("*.safetensors"))}


def _optimizers(checkpoint: Path) -> dict[str, Any]:
    """Each optimizer's per-parameter state in parameter order, and its settings.

    The parameter indices are left out: a critic optimizer built in a process that ran the
    earlier stages lists only the value head (2 parameters), one built in a freshly resumed
    process the value adapter's too (30), although neither gives the adapter a gradient in
    these runs; the moments of the parameters that have state are compared (found by this
    test, left open in issue 30's note).
    """
    out = {}
    for p in sorted(checkpoint.glob("optimizer-*.pt")):
        saved = torch.load(p, map_location="cpu", weights_only=False)
        groups = [{k: v for k, v in g.items() if k != "params"} for g in saved["param_groups"]]
        out[p.name] = {"state": list(saved["state"].values()), "groups": groups}
    return out


def _killed_run(
    run: Path, common: list[str], phases: list[float], expected: list[dict], seed: int
) -> list[str]:
    """The run started and SIGKILLed at ``KILLS`` moments drawn from ``seed``, resumed after
    each and then to its end; the stage each kill hit ("finish": after the last record).

    One kill in every phase, the rest anywhere; in time order, each at a fraction of its
    phase's length in the unkilled run. The one kill of each phase falls in its first 40%: a
    resumed process on a busy machine may run a short phase (an evaluation of two tasks)
    faster than the unkilled one did."""
    rng = random.Random(seed)
    extra = rng.choices(range(len(phases)), k=KILLS - len(phases))
    moments = sorted(
        [(p, rng.uniform(0.02, 0.4)) for p in range(len(phases))]
        + [(p, rng.uniform(0.05, 0.85)) for p in extra]
    )
    write_rewarded_episodes(run)
    hit: list[str] = []
    for i, (phase, fraction) in enumerate(moments):
        args = [*common, "--out", str(run)] if i == 0 else ["--resume", str(run), "--quiet"]
        if _kill_in_phase(run, args, phase, fraction * phases[phase]):
            done = _committed(run)
            hit.append(expected[done]["stage"] if done < len(expected) else "finish")
    resumed = run_cli(["train", "--resume", str(run), "--quiet"], env=ONE_THREAD, timeout=HANG_S)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(hit) >= 20, hit
    return hit


def test_a_run_killed_at_random_moments_ends_as_the_unkilled_run(tmp_path):
    model = save_tiny_model(tmp_path / "model")
    tasks = copy_builtin_tasks(tmp_path / "tasks", ("relu", "silu"), compact=True)
    heldout = copy_builtin_tasks(tmp_path / "heldout", ("tanh", "elu"), compact=False)
    common = ["--model", str(model), "--backend", "cpu", "--tasks", str(tasks)]
    common += ["--eval-tasks", str(heldout), *SMALL]

    reference = tmp_path / "unkilled"
    write_rewarded_episodes(reference)
    phases = _unkilled(reference, [*common, "--out", str(reference)])
    expected = _records(reference)
    assert len(phases) == len(expected) + 1

    # The kills must fall over every stage, every evaluation and the end. On a busy machine a
    # one-step phase can end before its kill (a kill then hits a later phase), so a second run
    # with other moments is killed where the first missed a stage; each run must end as the
    # unkilled one.
    everywhere = {r["stage"] for r in expected} | {"finish"}
    hits: set[str] = set()
    for attempt in range(2):
        run = tmp_path / f"killed-{attempt}"
        hits |= set(_killed_run(run, common, phases, expected, SEED + attempt))
        _assert_same_run(run, reference, expected)
        if hits == everywhere:
            break
    assert hits == everywhere, sorted(everywhere - hits)


def _assert_same_run(run: Path, reference: Path, expected: list[dict]) -> None:
    # Every step exactly once, in order, with the unkilled run's figures.
    got = _records(run)
    assert [(r["stage"], r.get("step")) for r in got] == [
        (r["stage"], r.get("step")) for r in expected
    ]
    _close(steady(got), steady(expected), "metrics")
    # The same evaluation results.
    for name in sorted(p.name for p in (reference / "eval").iterdir()):
        a = json.loads((run / "eval" / name / "eval.json").read_text())
        b = json.loads((reference / "eval" / name / "eval.json").read_text())
        _close(steady(a), steady(b), f"eval/{name}")
        rows = (run / "eval" / name / "eval_tasks.jsonl").read_text().splitlines()
        assert len(rows) == len(b["per_task"]), f"{name}: a task evaluated twice"
    # The same final adapter, critic and optimizer state.
    _tensors_close(_weights(run / "adapter"), _weights(reference / "adapter"), "adapter")
    (last,) = (run / "checkpoints").iterdir()
    (unkilled_last,) = (reference / "checkpoints").iterdir()
    assert last.name == unkilled_last.name
    _tensors_close(_weights(last), _weights(unkilled_last), "checkpoint")
    optimizers = _optimizers(last)
    assert optimizers, "the last checkpoint holds the optimizers"
    _tensors_close(optimizers, _optimizers(unkilled_last), "optimizers")
    state = json.loads((run / "state.json").read_text())
    unkilled_state = json.loads((reference / "state.json").read_text())
    # every committed training step's time is in the training seconds, kills or not
    stepped = sum(r["seconds"] for r in got if r.get("step") is not None and "seconds" in r)
    assert state["train_seconds"] >= stepped
    assert state["stage_steps"] == unkilled_state["stage_steps"]
    assert state["finished_stages"] == unkilled_state["finished_stages"]
