"""``cuda-agent train`` with a deadline (``--stop-after``, ``--deadline``): an invocation stops
cleanly between two units of work with exit code 75 and a line saying where and how to go on,
and the next invocation (``--resume``) continues with no step lost or done twice.

The runs are the command's ``main`` in this process (no interpreter and torch start-up per
invocation): a tiny random model, two training tasks with one-line compact solutions, one
held-out task, every unit kind once or a few times (the baselines, three evaluations, two
warm-start steps, a single-turn RL step, the rft collection, three RL steps), answers of at most
40 tokens. Where a test needs the deadline to fall at a known boundary, it replaces wall time
with a deadline that falls after a number of units (``AfterUnits``); the wall-time decisions
themselves are checked with a fake clock. Results are compared with an unstopped run of the
same seed as the kill test does (``test_train_kill_anywhere.py``): every step once and in the
same order, every figure but wall times within a relative 1e-6, the same evaluations, adapter
and last checkpoint.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.runner import deadline as deadline_module
from cuda_agent.runner.cli import _deadline, _parser, _process_start, main
from cuda_agent.runner.deadline import EX_TEMPFAIL, MARGIN, Deadline, DeadlineStop
from cuda_agent.runner.testing import AfterUnits, copy_builtin_tasks, steady

IMPORTED = time.time()
SMALL = [
    "--backend", "cpu", "--warmstart-steps", "2", "--eval-after-warmstart", "yes",
    "--rl-warmup-steps", "1", "--rft-tasks", "1", "--rft-samples", "1", "--rft-turns", "1",
    "--rft-steps", "1", "--value-steps", "0", "--steps", "3", "--turns", "1",
    "--tasks-per-step", "1", "--group-size", "2", "--lora-rank", "4", "--eval-train", "false",
    "--max-new-tokens", "40", "--seed", "5", "--quiet",
]  # fmt: skip
# The units of the run in order, as a stop names the one it did not start.
UNITS = [
    "the baselines",
    "heldout_before",
    "warmstart step 1/2",
    "warmstart step 2/2",
    "heldout_warmstart",
    "rl_warmup step 1/1",
    "the rft collection",  # the random model earns no reward: nothing kept, no rft step
    "rl step 1/3",
    "rl step 2/3",
    "rl step 3/3",
    "heldout_after",
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> list[str]:
    """The model and task flags of every run here."""
    root = tmp_path_factory.mktemp("deadline")
    model = save_tiny_model(root / "model")
    copy_builtin_tasks(root / "tasks", ("relu", "silu"))  # the warm start teaches one line
    copy_builtin_tasks(root / "heldout", ("tanh",), compact=False)
    tasks = ["--tasks", str(root / "tasks"), "--eval-tasks", str(root / "heldout")]
    return ["--model", str(model), *tasks, *SMALL]


@pytest.fixture(scope="module")
def reference(setup, tmp_path_factory) -> Path:
    """The unstopped run."""
    run = tmp_path_factory.mktemp("unstopped") / "run"
    assert main(["train", *setup, "--out", str(run)]) == 0
    return run


def _invoke(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``cuda-agent ARGV``: its exit code and its error output."""
    capsys.readouterr()
    code = main(argv)
    return code, capsys.readouterr().err


def _said(err: str) -> list[str]:
    """The command's own lines of error output (transformers reports loading there too)."""
    return [line for line in err.splitlines() if line.startswith("cuda-agent:")]


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


def _weights_close(a: Path, b: Path, where: str) -> None:
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*.safetensors"))
    assert files and files == sorted(str(p.relative_to(b)) for p in b.rglob("*.safetensors"))
    for name in files:
        x, y = load_file(a / name), load_file(b / name)
        assert x.keys() == y.keys(), f"{where}/{name}"
        for k in x:
            torch.testing.assert_close(x[k], y[k], rtol=1e-6, atol=1e-9, msg=f"{where}/{k}")


def _same_as_unstopped(run: Path, reference: Path) -> None:
    """Every step once, in order, with the unstopped run's figures, evaluations and weights."""
    got, expected = _records(run), _records(reference)
    assert [(r["stage"], r.get("step")) for r in got] == [
        (r["stage"], r.get("step")) for r in expected
    ]
    _close(steady(got), steady(expected), "metrics")
    for name in ("heldout_before", "heldout_warmstart", "heldout_after"):
        a = json.loads((run / "eval" / name / "eval.json").read_text())
        b = json.loads((reference / "eval" / name / "eval.json").read_text())
        _close(steady(a), steady(b), f"eval/{name}")
        rows = (run / "eval" / name / "eval_tasks.jsonl").read_text().splitlines()
        assert len(rows) == 1, f"{name}: a task evaluated twice"
    _weights_close(run / "adapter", reference / "adapter", "adapter")
    (last,) = (run / "checkpoints").iterdir()
    assert last.name == "rl-3"
    _weights_close(last, reference / "checkpoints" / "rl-3", "checkpoint")
    state, unstopped = (json.loads((r / "state.json").read_text()) for r in (run, reference))
    assert state["stage_steps"] == unstopped["stage_steps"]
    assert state["finished_stages"] == unstopped["finished_stages"]


def test_the_deadline_starts_a_unit_only_when_it_is_expected_to_finish():
    now = [0.0]
    deadline = Deadline(at=100.0, clock=lambda: now[0])
    # The first unit of an invocation starts while any time is left, whatever an earlier one
    # recorded: otherwise a unit longer than an invocation would never run.
    deadline.check("rl", "rl step 1/9", recorded=500.0)
    deadline.finished("rl", 30.0)
    now[0] = 30.0
    deadline.check("rl", "rl step 2/9")  # 70 s left, 37.5 needed
    deadline.finished("rl", 20.0)
    now[0] = 62.0
    deadline.check("rl", "rl step 3/9")  # 38 s left: the longest step (30 s) and a quarter fits
    now[0] = 63.0
    with pytest.raises(DeadlineStop) as stop:
        deadline.check("rl", "rl step 3/9")
    assert (stop.value.left, stop.value.needed) == (37.0, MARGIN * 30.0)
    assert str(stop.value) == (
        "stopped for the deadline before rl step 3/9 (37 s left, about 38 s needed); "
        "nothing is lost"
    )
    # A kind this process has not timed: what an earlier invocation recorded, else the
    # caller's estimate (--unit-estimates), else none: it is taken to need half the invocation
    # (guessed from other kinds, the first evaluation of a run was killed on the H200).
    with pytest.raises(DeadlineStop) as stop:
        deadline.check("evaluation heldout", "heldout_after")
    assert stop.value.needed is None
    assert str(stop.value) == (
        "stopped for the deadline before heldout_after (37 s left; its kind was never timed "
        "and is taken to need half an invocation (--unit-estimates gives estimates)); "
        "nothing is lost"
    )
    deadline.check("evaluation heldout", "heldout_after", recorded=20.0)
    with pytest.raises(DeadlineStop):
        deadline.check("evaluation heldout", "heldout_after", recorded=40.0)
    deadline.prior["evaluation heldout"] = 20.0
    deadline.check("evaluation heldout", "heldout_after")
    with pytest.raises(DeadlineStop):  # the run's own record comes before the caller's
        deadline.check("evaluation heldout", "heldout_after", recorded=40.0)
    deadline.finished("evaluation heldout", 4.0)  # this process's own timing comes first
    deadline.check("evaluation heldout", "heldout_after", recorded=40.0)
    # With half the invocation left, a kind never timed starts; so does an invocation's first
    # unit, whatever is left.
    now[0] = 50.0
    deadline.check("collection", "the rft collection")
    now[0] = 51.0
    with pytest.raises(DeadlineStop):
        deadline.check("collection", "the rft collection")
    Deadline(at=100.0, clock=lambda: 99.0, started=0.0).check("collection", "the collection")
    # Past the deadline nothing starts, not even an invocation's first unit.
    now[0] = 100.0
    with pytest.raises(DeadlineStop) as stop:
        Deadline(at=100.0, clock=lambda: now[0]).check("rl", "rl step 3/9")
    assert "before rl step 3/9 (the deadline passed 0.0 s ago)" in str(stop.value)


def test_a_run_stopped_at_every_kind_of_boundary_ends_as_the_unstopped_run(
    setup, reference, tmp_path, monkeypatch, capsys
):
    # Each invocation does two units and stops before the third: before a step inside a
    # stage, before an evaluation, before the collection, before the first step of a stage.
    monkeypatch.setattr(deadline_module, "Deadline", lambda at, **_: AfterUnits(2))
    run = tmp_path / "run"
    codes: list[int] = []
    stops: list[str] = []
    argv = ["train", *setup, "--out", str(run), "--stop-after", "1e6"]
    while len(codes) < 10:
        code, err = _invoke(argv, capsys)
        codes.append(code)
        if code != EX_TEMPFAIL:
            break
        (line,) = _said(err)  # one line: where it stopped and how to go on
        assert line.startswith("cuda-agent: stopped for the deadline before ")
        assert line.endswith(f"nothing is lost: continue with cuda-agent train --resume {run}")
        stops.append(
            line.removeprefix("cuda-agent: stopped for the deadline before ").split(" (")[0]
        )
        argv = ["train", "--resume", str(run), "--quiet", "--stop-after", "1e6"]
    assert codes == [EX_TEMPFAIL] * 5 + [0]
    assert stops == UNITS[2::2]
    _same_as_unstopped(run, reference)
    # The summary's figures are the whole run's: six invocations, their wall seconds summed.
    summary = json.loads((run / "summary.json").read_text())
    assert summary["invocations"] == 6
    sessions = summary["sessions"]
    assert [s["end"] for s in sessions] == ["deadline"] * 5 + ["finished"]
    assert [s.get("stopped_before") for s in sessions] == [*stops, None]
    assert [s["stage_steps"].get("rl", 0) for s in sessions] == [0, 0, 0, 1, 3, 3]
    # each invocation says where it ran (a run's calls may land on different hosts)
    for s in sessions:
        assert s["machine"]["cpu_cores"] == os.cpu_count() and s["machine"]["cpu"]
        assert s["machine"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
        visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
        assert len(s["machine"]["gpus"]) == visible
    assert summary["wall_seconds"] == pytest.approx(sum(s["seconds"] for s in sessions))
    steps = sum(r["seconds"] for r in _records(run) if r.get("step") is not None)
    assert summary["train_seconds"] >= steps > 0
    assert json.loads((reference / "summary.json").read_text())["invocations"] == 1


def test_a_deadline_passed_at_start_stops_before_the_first_unit(setup, reference, tmp_path, capsys):
    run = tmp_path / "run"
    code, err = _invoke(
        ["train", *setup, "--out", str(run), "--deadline", "2000-01-01T00:00:00+00:00"], capsys
    )
    assert code == EX_TEMPFAIL
    (line,) = _said(err)
    assert line.startswith("cuda-agent: stopped for the deadline before the baselines (the ")
    assert line.endswith(f"--resume {run}") and err.endswith(f"{line}\n")
    # The minimum was done: the policy loaded and config.json written (so --resume works);
    # no unit, no metrics, no checkpoint; the invocation is on record.
    assert json.loads((run / "config.json").read_text())["seed"] == 5
    assert not (run / "metrics.jsonl").exists() or not (run / "metrics.jsonl").read_text()
    assert not (run / "checkpoints").exists() or not list((run / "checkpoints").iterdir())
    state = json.loads((run / "state.json").read_text())
    assert state["finished_stages"] == [] and state["checkpoint"] == ""
    assert [(s["end"], s["stopped_before"]) for s in state["sessions"]] == [
        ("deadline", "the baselines")
    ]
    # --stop-after counts from the process's start (this test process began long before).
    code, err = _invoke(["train", "--resume", str(run), "--quiet", "--stop-after", "0"], capsys)
    assert code == EX_TEMPFAIL and "before the baselines" in err
    code, err = _invoke(["train", "--resume", str(run), "--quiet"], capsys)
    assert code == 0, err
    _same_as_unstopped(run, reference)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["invocations"] == 3
    assert [s["end"] for s in summary["sessions"]] == ["deadline", "deadline", "finished"]


def test_a_run_without_the_evaluation_before_starts_at_the_warm_start(setup, tmp_path, capsys):
    """``--eval-before false`` (the untrained model's score known, device time short): no
    ``heldout_before``, the first unit after the baselines is the warm start, and the summary
    still compares the end with the warm start."""
    run = tmp_path / "run"
    flags = ["--eval-before", "false", "--rl-warmup-steps", "0", "--rft-tasks", "0", "--steps", "1"]
    code, err = _invoke(["train", *setup, *flags, "--out", str(run)], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (run / "eval").iterdir()) == [
        "heldout_after",
        "heldout_warmstart",
    ]
    stages = [r["stage"] for r in _records(run)]
    assert stages[0] == "warmstart" and "heldout_before" not in stages
    # each evaluation's record says where its time went (the tiny model writes no code, so
    # the sandbox judged nothing: test_eval counts what it judges)
    (after,) = [r for r in _records(run) if r["stage"] == "heldout_after"]
    assert after["sampling_s"] > 0 and after["sandbox_s"] >= 0 and "evaluation_s" in after
    summary = json.loads((run / "summary.json").read_text())
    assert summary["heldout_pass_rate_before"] is None
    assert "heldout_gain_after_over_before" not in summary
    assert summary["heldout_gain_after_over_warmstart"]["pass_rate"]["after"] is not None


def test_deadline_flags(capsys):
    def parse(*flags: str) -> argparse.Namespace:
        return _parser().parse_args(["train", *flags])

    for bad in (["--stop-after", "-1"], ["--stop-after", "soon"], ["--deadline", "tomorrow"]):
        with pytest.raises(SystemExit) as exit_:
            parse(*bad)
        assert exit_.value.code == 2
    assert "--stop-after" in capsys.readouterr().err
    assert _deadline(parse()) is None
    assert _deadline(parse("--deadline", "1700000000")) == 1_700_000_000.0
    assert _deadline(parse("--deadline", "2023-11-14T22:13:20Z")) == 1_700_000_000.0
    # with both, the earlier; --stop-after counts from this process's start, not from now
    # (the process may have started long ago: a whole test session runs in it)
    soon = time.time() + 10
    assert _deadline(parse("--stop-after", "1e9", "--deadline", str(soon))) == soon
    started = _process_start()
    assert started <= IMPORTED + 1  # /proc's boot time is to the second
    assert _deadline(parse("--stop-after", "5", "--deadline", "1e12")) == pytest.approx(
        started + 5, abs=1.0
    )


def test_unit_estimates_flag(tmp_path, capsys):
    """``--unit-estimates``: another run's timings (its directory or state.json) or a JSON
    object; a file that is neither is an argument error, and the flag needs a deadline."""
    run = tmp_path / "run"
    run.mkdir()
    timings = {"evaluation heldout": 253.5, "rl": 98}
    (run / "state.json").write_text(json.dumps({"rl_steps_done": 3, "unit_seconds": timings}))
    (tmp_path / "plain.json").write_text(json.dumps({"warmstart": 2}))
    parse = _parser().parse_args
    expected = {"evaluation heldout": 253.5, "rl": 98.0}
    assert parse(["train", "--unit-estimates", str(run)]).unit_estimates == expected
    assert parse(["train", "--unit-estimates", str(run / "state.json")]).unit_estimates == expected
    assert parse(["train", "--unit-estimates", str(tmp_path / "plain.json")]).unit_estimates == {
        "warmstart": 2.0
    }
    for bad in ({"rl": "slow"}, [1, 2], {"rl": -1}):
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(SystemExit) as exit_:
            parse(["train", "--unit-estimates", str(tmp_path / "bad.json")])
        assert exit_.value.code == 2
        assert "expected a run's state.json or a JSON object" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["train", "--unit-estimates", str(tmp_path / "missing")])
    assert "cannot read unit estimates" in capsys.readouterr().err
    assert main(["train", "--unit-estimates", str(run), "--quiet"]) == 2
    assert "--unit-estimates needs --stop-after or --deadline" in capsys.readouterr().err


def test_a_unit_the_estimates_say_will_not_fit_waits_for_the_next_invocation(
    setup, tmp_path, capsys
):
    """Another run's timings (``--unit-estimates``) keep an evaluation this run never timed
    from starting where it would not finish; ``--resume`` without them starts it first."""
    run = tmp_path / "run"
    estimates = tmp_path / "estimates.json"
    estimates.write_text(json.dumps({"evaluation heldout": 1e6}))
    flags = ["--eval-before", "false", "--rl-warmup-steps", "0", "--rft-tasks", "0"]
    flags += ["--steps", "1", "--stop-after", "1e5", "--unit-estimates", str(estimates)]
    code, err = _invoke(["train", *setup, *flags, "--out", str(run)], capsys)
    assert code == EX_TEMPFAIL, err
    (line,) = _said(err)
    assert line.startswith("cuda-agent: stopped for the deadline before heldout_warmstart (")
    assert "about 1250000 s needed" in line
    assert json.loads((run / "state.json").read_text())["stage_steps"] == {"warmstart": 2}
    code, err = _invoke(["train", "--resume", str(run), "--quiet", "--stop-after", "1e5"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (run / "eval").iterdir()) == [
        "heldout_after",
        "heldout_warmstart",
    ]


def test_the_warm_start_ends_at_its_nll_target_and_a_resumed_run_reads_the_window_back(
    setup, tmp_path, capsys, monkeypatch
):
    """``--warmstart-until-nll``: the warm start ends once a full window of steps has a
    median NLL at or below the target (a target every NLL meets: exactly ``NLL_WINDOW``
    steps), and a run stopped inside the window counts the steps it did before (not a new
    window after the resume). 0 is no target."""
    from cuda_agent.runner.stages.warmstart import NLL_WINDOW, reached

    flags = ["--warmstart-steps", str(NLL_WINDOW + 5), "--eval-before", "false",
             "--eval-after-warmstart", "false", "--rl-warmup-steps", "0", "--rft-tasks", "0",
             "--steps", "0"]  # fmt: skip
    run = tmp_path / "run"
    argv = ["train", *setup, *flags, "--warmstart-until-nll", "1e9", "--out", str(run)]
    monkeypatch.setattr(deadline_module, "Deadline", lambda at, **_: AfterUnits(8))
    code, err = _invoke([*argv, "--stop-after", "1e6"], capsys)
    assert code == EX_TEMPFAIL, err
    monkeypatch.undo()
    code, err = _invoke(["train", "--resume", str(run)], capsys)
    assert code == 0, err
    steps = [r["step"] for r in _records(run) if r["stage"] == "warmstart"]
    assert steps == list(range(NLL_WINDOW))
    # the rule reads a full window's median; 0 is no target
    assert not reached([0.0] * (NLL_WINDOW - 1), 1.0) and reached([0.0] * NLL_WINDOW, 1e-9)
    assert not reached([0.5] * NLL_WINDOW, 0.4) and not reached([0.0] * NLL_WINDOW, 0.0)


def test_an_evaluation_of_several_sets_is_stopped_between_them_and_never_redone(
    setup, tmp_path, monkeypatch, capsys
):
    """``--eval-tasks A+B``: each named set is a unit of the evaluation, written as it ends
    (with its own number of samples where ``--eval-set-samples`` gives one).
    A deadline stops the run between the sets (an evaluation longer than an invocation
    finishes over several; on 2026-12-05 one was killed whole at two calls' ends), the next
    invocation judges only the set not yet judged, and the result is the unstopped run's."""
    root = tmp_path / "sets"
    first = copy_builtin_tasks(root / "first", ("tanh",), compact=False)
    second = copy_builtin_tasks(root / "second", ("elu",), compact=False)
    flags = [*setup, "--eval-tasks", f"{first}+{second}", "--eval-set-samples", f"{second}=2"]
    flags += ["--warmstart-steps", "0"]
    flags += ["--rl-warmup-steps", "0", "--rft-tasks", "0", "--steps", "0"]
    unstopped = tmp_path / "unstopped"
    assert main(["train", *flags, "--out", str(unstopped)]) == 0

    monkeypatch.setattr(deadline_module, "Deadline", lambda at, **_: AfterUnits(2))
    run = tmp_path / "run"
    argv = ["train", *flags, "--out", str(run), "--stop-after", "1e6"]
    stops = []
    for _ in range(4):
        code, err = _invoke(argv, capsys)
        if code != EX_TEMPFAIL:
            break
        (line,) = _said(err)
        stops.append(
            line.removeprefix("cuda-agent: stopped for the deadline before ").split(" (")[:2]
        )
        argv = ["train", "--resume", str(run), "--quiet", "--stop-after", "1e6"]
    assert code == 0, err
    # baselines + the first set; the second set + the first set after; the second set after
    assert [s[0] for s in stops] == ["heldout_before", "heldout_after"]
    assert all(s[1].startswith(f"{second}: task 2 of 2)") for s in stops), stops
    for name in ("heldout_before", "heldout_after"):
        rows = (run / "eval" / name / "eval_tasks.jsonl").read_text().splitlines()
        got = {json.loads(r)["task"]: json.loads(r)["samples"] for r in rows}  # each once
        assert len(rows) == 2 and got == {"tanh": 1, "elu": 2}  # the second set: its own count
        a = json.loads((run / "eval" / name / "eval.json").read_text())
        b = json.loads((unstopped / "eval" / name / "eval.json").read_text())
        _close(steady(a["per_task"]), steady(b["per_task"]), f"eval/{name}")
    state = json.loads((run / "state.json").read_text())
    assert {f"evaluation heldout: {first}", f"evaluation heldout: {second}"} <= set(
        state["unit_seconds"]
    )
