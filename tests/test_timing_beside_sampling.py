"""``benchmarks/gpu/timing_beside_sampling.py`` on the CPU (the figures are the GPU's): every
mode runs the A/A check, the sampler samples meanwhile, and held, it enters the gate."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("sampler", ["static", "generate"])
def test_each_mode_times_the_tasks_against_themselves_while_the_sampler_samples(tmp_path, sampler):
    spec = importlib.util.spec_from_file_location(
        "timing_beside_sampling", ROOT / "benchmarks" / "gpu" / "timing_beside_sampling.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "out.json"
    args = ["--backend", "cpu", "--shape", "tiny", "--limit", "2", "--batch", "2",
            "--new-tokens", "8", "--modes", "idle,beside,held", "--sampler", sampler]  # fmt: skip
    assert module.main([str(out), *args]) == 0
    report = json.loads(out.read_text())
    assert report["tasks"] == 2 and report["torch"] and "command" in report
    for mode in ("idle", "beside", "held"):
        got = report[mode]
        assert got["n"] == 2 and [r["status"] for r in got["rows"]] == ["ok", "ok"]
        assert 0 <= got["within_1pct"] <= got["within_3pct"] <= 2
    assert report["idle"]["sampling_calls"] == 0 and report["idle"]["sampling_call_s"] is None
    assert report["sampler"] == sampler
    assert report["beside"]["sampling_calls"] > 0 and report["held"]["sampling_calls"] > 0
    for mode in ("beside", "held"):
        assert report[mode]["sampling_call_s"] > 0
