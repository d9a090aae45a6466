"""``benchmarks/learning_tables.py``: the Markdown tables of a learning.json, every figure read
from the file (the warm start, RL and the control with their intervals, the gains marked where
their interval excludes zero, where the tasks went)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from cuda_agent.runner.eval.comparison import compare, learning_entry

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location(
        "learning_tables", ROOT / "benchmarks" / "learning_tables.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(correct: list[int]) -> list[dict]:
    return [
        {"task": f"t{i}", "correct": c > 0, "speedup_vs_eager": 1.5 if c else None,
         "samples": 4, "samples_correct": c, "samples_fast_1": c // 2}
        for i, c in enumerate(correct)
    ]  # fmt: skip


def _learning() -> dict:
    """A learning.json's per-set block as train_report.py builds it, with a control."""
    warm, rl, sft = _rows([0] * 20 + [2] * 12), _rows([0] * 20 + [4] * 12), _rows([4] * 32)
    block = learning_entry(warm, rl)
    control = learning_entry(warm, sft, sides=("after_warmstart", "after_sft"))
    block["control_sft_only"] = control
    block["rl_over_control"] = learning_entry(sft, rl)["gain"]
    assert compare(warm, rl)["right_of_n"]["up"] == 12
    return {"rl_steps": 55, "training_s": 473.4, "gpu": "NVIDIA H100 80GB HBM3",
            "torch": "2.11.0", "commit": "0c97bd2e", "device_calls": 2,
            "control_sft_only": {"warmstart_steps": 1541, "training_s": 428.4},
            "heldout_compositions": block}  # fmt: skip


def test_the_tables_show_each_side_each_gain_and_where_the_tasks_went(tmp_path, capsys):
    path = tmp_path / "learning.json"
    path.write_text(json.dumps(_learning()))
    assert _module().main([str(path), "--out", str(tmp_path / "tables.md")]) == 0
    text = capsys.readouterr().out
    assert text == (tmp_path / "tables.md").read_text()
    assert "55 RL steps, 473 training seconds" in text and "1541 supervised steps" in text
    assert "### heldout_compositions (32 tasks, 4 samples each)" in text
    pass_row = next(line for line in text.splitlines() if line.startswith("| pass@1 |"))
    assert pass_row.count("%") == 3 and "18.8%" in pass_row and "37.5%" in pass_row
    rl_gain = next(line for line in text.splitlines() if line.startswith("| RL over the warm"))
    assert rl_gain.startswith("| RL over the warm start | +18.8 [") and " * |" in rl_gain
    assert "| warm start | 20 | 0 | 12 | 0 | 0 |" in text
    assert "RL: 12 tasks up, 0 down, 20 the same (`2->4` x12)." in text
    assert "control: 32 tasks up" in text


def test_a_file_without_a_per_set_block_is_refused_with_the_reason(tmp_path, capsys):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"benchmark": "train_default"}))
    assert _module().main([str(path)]) == 2
    assert "no per-set block" in capsys.readouterr().err
    assert _module().main([str(tmp_path / "missing.json")]) == 2
