"""``benchmarks/rl_step_figures.py``: issue 28's RL-step figures from a run's metrics, on
records laid out as the trainer writes them (other stages and evaluations among the steps)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location(
        "rl_step_figures", ROOT / "benchmarks" / "rl_step_figures.py"
    )
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _step(k: int, seconds: float, sampling: float, rollout: float, busy: float, answers=32, jobs=8):
    return {"stage": "rl", "step": k, "seconds": seconds, "sampling_s": sampling,
            "rollout_s": rollout, "evaluations": answers, "sandbox_jobs": jobs,
            "sandbox_s": busy, "distinct_answers": jobs / answers, "reruns_alone": 1}  # fmt: skip


def test_the_figures_of_a_run_and_without_its_first_step(tmp_path):
    m = _module()
    records = [
        {"stage": "baselines", "seconds": 4.0},
        _step(0, 30.0, 20.0, 27.0, 9.0, jobs=16),  # first decode, first visits
        _step(1, 10.0, 4.0, 7.0, 6.0),
        {"stage": "heldout_after", "pass_rate": 0.5, "sampling_s": 9.0},
        _step(2, 8.0, 4.0, 6.0, 3.0),
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert m.main([str(tmp_path), str(tmp_path / "out.json"), "--skip-first", "1"]) == 0
    got = json.loads((tmp_path / "out.json").read_text())
    assert got["steps"] == 3 and got["answers"] == 96 and got["sandbox_jobs"] == 32
    assert got["answers_per_minute"] == pytest.approx(60 * 96 / 48, abs=0.1)
    assert got["sandbox_share"] == pytest.approx((7 + 3 + 2) / 48, abs=1e-3)
    assert got["sandbox_busy_s"] == pytest.approx(9 + 6 + 3)
    assert got["sandbox_jobs_per_busy_minute"] == pytest.approx(60 * 32 / 18, abs=0.1)
    assert got["median_step_s"] == 10.0 and got["reruns_alone"] == 3
    rest = got["without_first"]
    assert rest["steps"] == 2 and rest["sandbox_share"] == pytest.approx(5 / 18, abs=1e-3)


def test_a_run_resumed_over_calls_is_also_figured_without_each_calls_first_step(tmp_path):
    m = _module()
    steps = [_step(0, 30.0, 20.0, 27.0, 9.0), _step(1, 10.0, 4.0, 7.0, 6.0),
             _step(2, 40.0, 20.0, 35.0, 9.0), _step(3, 8.0, 4.0, 6.0, 3.0)]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    calls = [{"call": 1, "stage_steps": {"rl": 2}}, {"call": 2, "stage_steps": {"rl": 4}}]
    (tmp_path / "learning_run.json").write_text(json.dumps({"calls": calls}))
    assert m.main([str(tmp_path), str(tmp_path / "out.json")]) == 0
    got = json.loads((tmp_path / "out.json").read_text())
    assert got["first_steps_of_calls"] == [0, 2]  # the second call began at step 2
    rest = got["without_first_of_each_call"]
    assert rest["steps"] == 2 and rest["answers_per_minute"] == pytest.approx(60 * 64 / 18, abs=0.1)
    # one call: nothing more to leave out than --skip-first does
    (tmp_path / "learning_run.json").write_text(json.dumps({"calls": calls[:1]}))
    assert m.main([str(tmp_path), str(tmp_path / "out.json")]) == 0
    assert "without_first_of_each_call" not in json.loads((tmp_path / "out.json").read_text())


def test_a_run_without_rl_steps_is_an_error_not_a_figure(tmp_path):
    m = _module()
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"stage": "warmstart", "step": 0}) + "\n")
    assert m.main([str(tmp_path), str(tmp_path / "out.json")]) == 1
    assert not (tmp_path / "out.json").exists()


def test_the_gpu_busy_share_is_the_utilisation_inside_the_sandbox_windows(tmp_path):
    m = _module()
    records = [
        {**_step(0, 10.0, 4.0, 7.0, 6.0), "sandbox_windows": [[100.0, 104.0], [102.0, 106.0]]},
        {**_step(1, 10.0, 4.0, 7.0, 6.0), "sandbox_windows": [[120.0, 121.0]]},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert m.main([str(tmp_path), str(tmp_path / "without.json")]) == 0
    assert json.loads((tmp_path / "without.json").read_text())["gpu_busy_share"] is None
    # two calls' logs; readings outside every window (99, 110, 125) do not count, a reading
    # inside two overlapping windows (103) counts once, a line cut short by a kill is skipped
    (tmp_path / "gpu_util_call1.csv").write_text("99.0,1.00\n101.0,0.20\n103.0,0.40\n")
    (tmp_path / "gpu_util_call2.csv").write_text("105.5,0.60\n110.0,1.00\n120.5,0.80\n125,0.9\n12")
    assert m.main([str(tmp_path), str(tmp_path / "out.json"), "--skip-first", "1"]) == 0
    got = json.loads((tmp_path / "out.json").read_text())
    assert got["gpu_busy_share"] == pytest.approx((0.2 + 0.4 + 0.6 + 0.8) / 4, abs=1e-3)
    assert got["without_first"]["gpu_busy_share"] == pytest.approx(0.8)
    assert got["gpu_busy_steps"] == 2
    # a third call on another machine whose clock covers 119-122 again: its readings and the
    # second call's cannot be told apart there, so the step inside (120-121) is left out
    (tmp_path / "gpu_util_call3.csv").write_text("119.0,0.10\n120.7,0.00\n122.0,0.10\n")
    assert m.main([str(tmp_path), str(tmp_path / "clash.json")]) == 0
    got = json.loads((tmp_path / "clash.json").read_text())
    assert got["gpu_busy_steps"] == 1
    assert got["gpu_busy_share"] == pytest.approx((0.2 + 0.4 + 0.6) / 3, abs=1e-3)


def test_the_utilisation_log_stamps_each_reading_with_the_machines_monotonic_clock(
    tmp_path, monkeypatch
):
    """``gpu_util.UtilisationLog`` on a stand-in for ``nvidia-smi`` that prints what the real
    one prints (a percentage a line, "[N/A]" where it has none): readings in the file and in
    ``samples``, stamped while the block ran; no command, nothing started and nothing written."""
    import sys
    import time

    sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
    from gpu_util import UtilisationLog, read_log

    fake = tmp_path / "fake-smi"
    args = tmp_path / "args"  # what it was asked: one GPU, the first visible one
    fake.write_text(
        f"#!/bin/sh\necho \"$@\" > {args}\necho 37\necho '[N/A]'\necho 80\nexec sleep 30\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    log = tmp_path / "util.csv"
    before = time.monotonic()
    with UtilisationLog(log, command=str(fake)) as util:
        deadline = time.monotonic() + 20
        while len(util.samples) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    after = time.monotonic()
    assert [share for _, share in util.samples] == [0.37, 0.80]
    assert all(before <= t <= after for t, _ in util.samples)
    assert read_log(log) == [(round(t, 3), share) for t, share in util.samples]
    assert util.proc is not None and util.proc.poll() is not None  # the reader was stopped
    assert args.read_text().split()[-2:] == ["-i", "3"]
    with UtilisationLog(tmp_path / "none.csv", command="no-such-nvidia-smi") as absent:
        assert absent.proc is None
    assert not (tmp_path / "none.csv").exists()
