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


def test_a_run_without_rl_steps_is_an_error_not_a_figure(tmp_path):
    m = _module()
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"stage": "warmstart", "step": 0}) + "\n")
    assert m.main([str(tmp_path), str(tmp_path / "out.json")]) == 1
    assert not (tmp_path / "out.json").exists()
