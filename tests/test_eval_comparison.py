"""Comparing evaluations (``runner.comparison``, ``cuda-agent compare``): the paired gain of
each metric over the same tasks with its interval, read from eval.json files as the runner
writes them; two evaluations of different tasks are refused with the tasks named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.runner.cli import main
from cuda_agent.runner.eval.comparison import (
    METRICS,
    compare,
    compare_files,
    compare_sets,
    eval_intervals,
    table,
)
from cuda_agent.runner.report.terminal import train_table


def _rows(correct: list[int], samples: int = 1) -> list[dict]:
    """One row per task: ``correct[i]`` of ``samples`` samples correct, half of those faster."""
    return [
        {"task": f"t{i}", "correct": c > 0, "speedup_vs_eager": 1.5 if c else None,
         "samples": samples, "samples_correct": c, "samples_fast_1": c}
        for i, c in enumerate(correct)
    ]  # fmt: skip


def _write(path: Path, rows: list[dict]) -> Path:
    path.mkdir(parents=True)
    (path / "eval.json").write_text(json.dumps({"per_task": rows, "ci95": eval_intervals(rows)}))
    return path


def test_identical_evaluations_gain_nothing_and_a_broad_gain_is_significant() -> None:
    before = _rows([0] * 48 + [1] * 16)
    same = compare(before, before)
    for metric in METRICS:
        assert same[metric]["gain"] == same[metric]["ci95_low"] == same[metric]["ci95_high"] == 0
        assert not same[metric]["significant"]
    after = _rows([1] * 30 + [0] * 18 + [1] * 16)  # 30 more tasks solved, none lost
    better = compare(before, after)
    assert better["tasks"] == 64 and better["pass_at_1"]["gain"] == pytest.approx(30 / 64)
    assert better["pass_at_1"]["significant"] and better["pass_at_1"]["ci95_low"] > 0.3
    assert better["pass_at_1"]["before"] == 0.25 and better["pass_at_1"]["after_ci95"][0] > 0.6
    one = compare(before, _rows([1] + [0] * 47 + [1] * 16))  # one task more: noise
    assert not one["pass_at_1"]["significant"] and one["pass_at_1"]["ci95_low"] == 0.0
    assert "pass_at_1" in table(better) and "significant" in table(better)


def test_pass_at_k_is_compared_up_to_the_samples_every_task_has() -> None:
    got = compare(_rows([0, 1, 4, 2], samples=4), _rows([4, 4, 4, 2], samples=4))
    assert {"pass_at_2"} <= set(got) and "pass_at_5" not in got
    assert got["pass_at_1"]["gain"] == pytest.approx((4 / 4 + 3 / 4 + 0 + 0) / 4)


def test_evaluations_of_other_tasks_are_refused(tmp_path: Path, capsys) -> None:
    a = _write(tmp_path / "a", _rows([1, 0]))
    b = _write(tmp_path / "b", _rows([1, 0, 1]))
    with pytest.raises(ValueError, match="in one only: t2"):
        compare_files(a, b)
    assert main(["compare", str(a), str(b)]) == 2
    assert "in one only: t2" in capsys.readouterr().err
    assert main(["compare", str(a), str(tmp_path / "nothing")]) == 2


def test_the_compare_command_prints_the_table_and_writes_json(tmp_path: Path, capsys) -> None:
    a = _write(tmp_path / "eval" / "heldout_warmstart", _rows([0] * 40))
    b = _write(tmp_path / "eval" / "heldout_after", _rows([1] * 20 + [0] * 20))
    out = tmp_path / "gain.json"
    assert main(["compare", str(a), str(b / "eval.json"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "40 tasks" in printed and "+50.0%" in printed and "significant" in printed
    saved = json.loads(out.read_text())
    assert saved["fast_1"]["significant"] and saved["seed"] == 0
    assert "right_of_n" not in saved and "tasks by right" not in printed  # one sample a task


def test_with_several_samples_the_comparison_says_where_the_tasks_went(tmp_path, capsys):
    from cuda_agent.runner.report.evaluations import gains_table

    a = _write(tmp_path / "a", _rows([2, 2, 2, 2, 4], samples=4))
    b = _write(tmp_path / "b", _rows([0, 0, 4, 4, 4], samples=4))
    assert main(["compare", str(a), str(b)]) == 0
    printed = capsys.readouterr().out
    assert "+0.0%" in printed  # pass@1 did not move ...
    assert "2 tasks up, 2 down, 1 the same; 2->0 x2, 2->4 x2" in printed  # ... its tasks did
    got = compare_files(a, b)
    assert got["right_of_n"]["before"] == [0, 0, 4, 0, 1]
    ten = table(compare(_rows([10, 1, 5], samples=10), _rows([1, 10, 5], samples=10)))
    assert "1->10 x1, 10->1 x1" in ten
    assert "5->5" not in ten  # a task that stayed is counted, not listed
    page = gains_table("rl over warm", got)
    assert "2 tasks up, 2 down, 1 the same" in page and page.count("<table>") == 2


def test_a_learning_entry_has_both_sides_with_intervals_and_the_gain() -> None:
    from cuda_agent.runner.eval.comparison import learning_entry

    warm, rl = _rows([0] * 40 + [1] * 24), _rows([1] * 20 + [0] * 20 + [1] * 24)
    got = learning_entry(warm, rl)
    assert (got["tasks"], got["samples"]) == (64, 1)
    assert got["after_warmstart"]["pass_at_1"] == 24 / 64 and got["after_rl"]["pass_at_1"] == 0.6875
    low, high = got["after_rl"]["ci95"]["fast_1"]
    assert low <= got["after_rl"]["fast_1"] <= high
    assert got["gain"]["pass_at_1"] == pytest.approx(20 / 64)
    assert got["gain"]["ci95_low"]["pass_at_1"] > 0 and got["gain"]["significant"]["pass_at_1"]


def test_rows_without_the_per_sample_count_leave_that_figure_out() -> None:
    old = [{k: v for k, v in r.items() if k != "samples_fast_1"}
           for r in _rows([0, 2, 1], samples=2)]  # fmt: skip
    got = eval_intervals(old)
    assert "fast_1_at_1" not in got and got["pass_at_1"]["estimate"] == 0.5


def test_rows_of_an_old_run_give_the_per_sample_count_under_its_old_name() -> None:
    rows = _rows([0, 2, 1], samples=2)
    old = [{k.replace("samples_fast_1", "samples_faster_than_eager"): v for k, v in r.items()}
           for r in rows]  # fmt: skip
    assert eval_intervals(old) == eval_intervals(rows) and "fast_1_at_1" in eval_intervals(old)


def test_the_report_reads_an_old_eval_json_under_the_new_names(tmp_path: Path) -> None:
    from cuda_agent.runner.report.evaluations import Evaluation, figures_table, gains_table

    old = {"tasks": 2, "pass_rate": 0.5, "faster_than_eager": 0.5, "faster_than_compile": 0.0,
           "per_task": [], "ci95": {"faster_than_eager": {"estimate": 0.5, "low": 0.0,
                                                          "high": 1.0}}}  # fmt: skip
    (tmp_path / "eval.json").write_text(json.dumps(old))
    e = Evaluation.read(tmp_path, "heldout_after")
    assert e.result["fast_1"] == 0.5 and e.result["fast_1_compile"] == 0.0
    assert e.result["ci95"]["fast_1"]["high"] == 1.0
    assert "fast_1 (best sample)" in figures_table([e])
    gain = {"before": 0.1, "before_ci95": [0, 0.2], "after": 0.5, "after_ci95": [0.3, 0.7],
            "gain": 0.4, "ci95_low": 0.2, "ci95_high": 0.6, "significant": True}  # fmt: skip
    assert 'data-metric="fast_1"' in gains_table("old", {"faster_than_eager": gain, "tasks": 2})


def test_each_named_set_of_one_evaluation_is_compared_on_its_own_tasks() -> None:
    # t0..t31 improve (a set RL helped), t32..t63 get worse (a set it hurt): together they
    # cancel, apart each set's gain is what its own tasks say, with its own interval.
    before = _rows([0] * 32 + [1] * 32)
    after = _rows([1] * 32 + [0] * 32)
    sets = {"helped": [f"t{i}" for i in range(32)], "hurt": [f"t{i}" for i in range(32, 64)],
            "absent": ["nowhere"]}  # fmt: skip
    whole = compare(before, after)
    by_set = compare_sets(before, after, sets)
    assert whole["pass_at_1"]["gain"] == 0 and not whole["pass_at_1"]["significant"]
    assert set(by_set) == {"helped", "hurt"}  # a set the evaluation does not hold: no entry
    assert by_set["helped"]["tasks"] == 32 and by_set["helped"]["pass_at_1"]["gain"] == 1.0
    assert (
        by_set["hurt"]["pass_at_1"]["gain"] == -1.0 and by_set["hurt"]["pass_at_1"]["significant"]
    )
    summary = {
        "run_dir": "runs/x",
        "heldout_gain_after_over_before": whole,
        "heldout_sets": {k: {"gain_after_over_before": v} for k, v in by_set.items()},
    }
    lines = train_table(summary).splitlines()
    at = lines.index("  helped (32 tasks):")
    assert lines[at + 1].split()[0] == "before" and "0.0%" in lines[at + 1]
    assert "+100.0%" in lines[at + 3] and lines[at + 3].strip().startswith("gain over before")
    assert "  hurt (32 tasks):" in lines and "-100.0% [-100.0%, -100.0%] *" in train_table(summary)
