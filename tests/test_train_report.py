"""``benchmarks/train_report.py``'s learning figure (issue 29): each held-out set's block, and
with ``--control`` the SFT-only control beside RL: the control against the same warm start, and
RL's gain over the control paired over the tasks. The run directories are written here as the
trainer lays them out (config, metrics, each evaluation's eval.json)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.runner.eval.comparison import eval_intervals
from cuda_agent.runner.task_sets import HELDOUT

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "train_report.py"


def _rows(correct: list[int], samples: int = 4) -> list[dict]:
    """One row per held-out operator: ``correct[i]`` of ``samples`` samples correct."""
    return [
        {"task": name, "correct": c > 0, "speedup_vs_eager": 1.2 if c else None,
         "samples": samples, "samples_correct": c, "samples_fast_1": c}
        for name, c in zip(HELDOUT, correct, strict=True)
    ]  # fmt: skip


def _run(
    path: Path, evals: dict[str, list[dict]], steps: dict[str, int], copied: bool = False
) -> Path:
    """A run directory: config.json, metrics.jsonl (each training step 2 s) and the
    evaluations' eval.json; ``copied``: as a learning run copies them out
    (``eval_heldout_after.json``, benchmarks/gpu/learning_run.py)."""
    path.mkdir(parents=True)
    config = {"model": "/models/smol.gguf", "backend": "cuda", "max_new_tokens": 0}
    (path / "config.json").write_text(json.dumps({**config, "warmstart_steps": steps["warmstart"]}))
    records = [{"stage": "heldout_before", "pass_rate": 0.0, "fast_1": 0.0}]
    for stage, n in steps.items():
        records += [{"stage": stage, "step": k, "seconds": 2.0} for k in range(n)]
    for name, rows in evals.items():
        share = sum(r["correct"] for r in rows) / len(rows)
        records.append({"stage": f"heldout_{name}", "pass_rate": share, "fast_1": share})
        body = json.dumps({"per_task": rows, "ci95": eval_intervals(rows)})
        if copied:
            (path / f"eval_heldout_{name}.json").write_text(body)
        else:
            (path / "eval" / f"heldout_{name}").mkdir(parents=True)
            (path / "eval" / f"heldout_{name}" / "eval.json").write_text(body)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _report(tmp_path: Path, *extra: str, calls: int = 0) -> dict:
    warm = _rows([1, 0, 0, 0, 0, 0])
    rl = _run(
        tmp_path / "rl",
        {"warmstart": warm, "after": _rows([4, 4, 4, 4, 4, 0])},
        {"warmstart": 10, "rl": 5},
    )
    if calls:  # a learning run's record of its device calls (benchmarks/gpu/learning_run.py)
        book = {"calls": [{"call": k + 1} for k in range(calls)]}
        (rl / "learning_run.json").write_text(json.dumps(book))
    return _learning(tmp_path, rl, *extra)


def _learning(tmp_path: Path, rl: Path, *extra: str) -> dict:
    """learning.json of ``train_report.py`` on the run ``rl`` with ``extra`` arguments."""
    learning = tmp_path / "learning.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(rl), str(tmp_path / "train.json"), "--wall-s", "60",
         "--learning", str(learning), *extra],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(learning.read_text())


@pytest.mark.parametrize("copied", [False, True], ids=["run-directory", "learning-run-copy"])
def test_the_control_is_compared_with_the_warm_start_and_with_rl(tmp_path, copied):
    control = _run(
        tmp_path / "control",
        {"after": _rows([4, 4, 0, 0, 0, 0])},  # the warm start alone, trained as long as RL
        {"warmstart": 15},
        copied,
    )
    # given the RL run's training seconds as its budget, it asked for more steps than fit
    config = json.loads((control / "config.json").read_text())
    config.update(warmstart_steps=100_000, train_budget_s=30.0)
    (control / "config.json").write_text(json.dumps(config))
    got = _report(tmp_path, "--control", str(control))
    ops = got["heldout_ops"]
    assert ops["after_warmstart"]["pass_at_1"] == pytest.approx(1 / 24)
    assert ops["after_rl"]["pass_at_1"] == pytest.approx(20 / 24)
    sft = ops["control_sft_only"]
    assert sft["after_warmstart"] == ops["after_warmstart"]  # the same warm start
    assert sft["after_sft"]["pass_at_1"] == pytest.approx(8 / 24)
    assert sft["gain"]["pass_at_1"] == pytest.approx(7 / 24)
    assert ops["rl_over_control"]["pass_at_1"] == pytest.approx(12 / 24)
    low, high = ops["rl_over_control"]["ci95_low"], ops["rl_over_control"]["ci95_high"]
    assert low["pass_at_1"] <= 12 / 24 <= high["pass_at_1"]
    assert got["control_sft_only"] == {
        "training_s": 30.0,
        "training_stages": ["warmstart"],
        "warmstart_steps": 15,
        "train_budget_s": 30.0,
        "init_from": None,
    }


def test_a_control_judged_again_is_described_by_the_run_that_trained_it(tmp_path):
    """A control trained in an earlier session and evaluated again now (``--init-from`` its
    adapter, no steps): its evaluation is the control's side, its training is the old run's."""
    trained = _run(tmp_path / "control", {"after": _rows([1, 1, 1, 1, 1, 1])}, {"warmstart": 15})
    again = _run(tmp_path / "control_eval", {"after": _rows([4, 4, 0, 0, 0, 0])}, {"warmstart": 0})
    config = json.loads((again / "config.json").read_text())
    (again / "config.json").write_text(json.dumps({**config, "init_from": "/tmp/control-adapter"}))
    got = _report(tmp_path, "--control", str(again), "--control-trained", str(trained))
    assert got["heldout_ops"]["control_sft_only"]["after_sft"]["pass_at_1"] == pytest.approx(8 / 24)
    assert got["control_sft_only"] == {
        "training_s": 30.0,
        "training_stages": ["warmstart"],
        "warmstart_steps": 15,
        "train_budget_s": None,
        "init_from": None,
        "evaluated_in": "control_eval",
    }
    # without --control-trained the evaluation-only run says it trained nothing, from where
    alone = _learning(tmp_path, tmp_path / "rl", "--control", str(again))["control_sft_only"]
    assert alone["training_s"] == 0 and alone["init_from"] == "/tmp/control-adapter"


def test_without_a_control_the_blocks_hold_only_rl(tmp_path):
    got = _report(tmp_path)
    assert "control_sft_only" not in got and "rl_over_control" not in got["heldout_ops"]
    assert got["rl_steps"] == 5 and "device_calls" not in got  # not a learning run's directory
    assert got["heldout_ops"]["gain"]["pass_at_1"] == pytest.approx(19 / 24)


def test_a_learning_run_says_how_many_device_calls_it_took(tmp_path):
    got = _report(tmp_path, calls=3)
    assert (got["rl_steps"], got["device_calls"]) == (5, 3)


def test_a_warm_start_run_of_its_own_is_the_warm_start_point(tmp_path):
    """RL and the control both started from a warm-start-only run (--init-from): that run's
    final evaluation is the point both are measured from."""
    warm = _run(tmp_path / "warm", {"after": _rows([2, 0, 0, 0, 0, 0])}, {"warmstart": 40})
    rl = _run(tmp_path / "rl", {"after": _rows([4, 4, 4, 0, 0, 0])}, {"warmstart": 0, "rl": 5})
    control = _run(tmp_path / "control", {"after": _rows([4, 0, 0, 0, 0, 0])}, {"warmstart": 9})
    got = _learning(tmp_path, rl, "--warm", str(warm), "--control", str(control))
    ops = got["heldout_ops"]
    assert ops["after_warmstart"]["pass_at_1"] == pytest.approx(2 / 24)
    assert ops["gain"]["pass_at_1"] == pytest.approx(10 / 24)
    assert ops["control_sft_only"]["gain"]["pass_at_1"] == pytest.approx(2 / 24)
    assert ops["rl_over_control"]["pass_at_1"] == pytest.approx(8 / 24)
    assert got["heldout_after_warmstart"]["pass_rate"] == pytest.approx(1 / 6)
    assert got["warmstart_run"]["warmstart_steps"] == 40
    assert got["rl_steps"] == 5


def _l1_rows(correct: list[int]) -> list[dict]:
    """Rows of the first KernelBench problems of the subset, one sample each."""
    from cuda_agent.runner.kernelbench_subset import L1_SUBSET

    return [
        {"task": f"L1_{stem}", "correct": c > 0, "speedup_vs_eager": 1.1 if c else None,
         "samples": 1, "samples_correct": c, "samples_fast_1": c}
        for stem, c in zip(L1_SUBSET, correct, strict=False)
    ]  # fmt: skip


def test_a_set_judged_last_in_runs_of_its_own_joins_each_side(tmp_path):
    """The KernelBench problems evaluated by evaluation-only runs of the warm start's, RL's and
    the control's weights (``--also``): their block sits beside the held-out ops', each side
    from its own run, and a task judged twice is refused."""
    warm = _run(tmp_path / "warm", {"after": _rows([2, 0, 0, 0, 0, 0])}, {"warmstart": 40})
    rl = _run(tmp_path / "rl", {"after": _rows([4, 4, 4, 0, 0, 0])}, {"warmstart": 0, "rl": 5})
    control = _run(tmp_path / "control", {"after": _rows([4, 0, 0, 0, 0, 0])}, {"warmstart": 9})
    also = [
        _run(tmp_path / f"l1_{name}", {"after": _l1_rows(correct)}, {"warmstart": 0})
        for name, correct in (("warm", [1, 0, 0, 0]), ("rl", [1, 1, 1, 0]), ("control", [0, 0, 0, 0]))
    ]  # fmt: skip
    for run, side in zip(also, ("warm", "rl", "control"), strict=True):  # as on the device
        config = json.loads((run / "config.json").read_text())
        config["init_from"] = f"/tmp/learning-chain/{side}"
        (run / "config.json").write_text(json.dumps(config))
    args = ["--warm", str(warm), "--control", str(control)]
    got = _learning(tmp_path, rl, *args, "--also", *map(str, also))
    l1 = got["kernelbench_l1_subset"]
    assert (l1["tasks"], l1["samples"]) == (4, 1)
    assert l1["after_warmstart"]["pass_at_1"] == pytest.approx(1 / 4)
    assert l1["after_rl"]["pass_at_1"] == pytest.approx(3 / 4)
    assert l1["rl_over_control"]["pass_at_1"] == pytest.approx(3 / 4)
    assert l1["control_sft_only"]["gain"]["pass_at_1"] == pytest.approx(-1 / 4)
    # the held-out ops' block is as without them
    without = _learning(tmp_path, rl, *args)
    assert got["heldout_ops"] == without["heldout_ops"]
    assert "kernelbench_l1_subset" not in without
    # a control's run missing from --also, or the same tasks judged twice: refused
    # without the control's own run, the set's block holds RL and the warm start only
    two = _learning(tmp_path, rl, *args, "--also", str(also[0]), str(also[1]))
    assert two["kernelbench_l1_subset"]["gain"] == l1["gain"]
    assert "rl_over_control" not in two["kernelbench_l1_subset"]
    for bad, said in (
        ([str(also[0])], "may name one for the control"),
        ([str(also[1]), str(also[0]), str(also[2])], "started from /tmp/learning-chain/rl, not"),
        ([str(also[0]), str(warm), str(also[2])], "tasks judged already: elu"),
    ):
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), str(rl), str(tmp_path / "t.json"), "--wall-s", "1",
             "--learning", str(tmp_path / "l.json"), *args, "--also", *bad],
            capture_output=True, text=True, check=False, cwd=ROOT,
        )  # fmt: skip
        assert proc.returncode == 2 and said in proc.stderr


def test_the_warm_start_point_may_be_the_runs_own_evaluation_before_training(tmp_path):
    """``--warm-point before``: a run started from the warm start's weights evaluated them
    before training (as it evaluates after): that is the point, not --warm's own evaluation."""
    warm = _run(tmp_path / "warm", {"after": _rows([2, 0, 0, 0, 0, 0])}, {"warmstart": 40})
    rl = _run(
        tmp_path / "rl",
        {"before": _rows([3, 1, 0, 0, 0, 0]), "after": _rows([4, 4, 4, 0, 0, 0])},
        {"warmstart": 0, "rl": 5},
    )
    got = _learning(tmp_path, rl, "--warm", str(warm), "--warm-point", "before")
    ops = got["heldout_ops"]
    assert ops["after_warmstart"]["pass_at_1"] == pytest.approx(4 / 24)
    assert ops["gain"]["pass_at_1"] == pytest.approx(8 / 24)
    assert got["heldout_after_warmstart"]["pass_rate"] == pytest.approx(2 / 6)
    assert got["warmstart_run"]["warmstart_steps"] == 40


def test_a_report_made_off_the_device_names_the_gpu_of_a_file_the_device_wrote(tmp_path):
    """The run's own learning.json did not come back: --ran-on names another file of the same
    calls (a benchmark's provenance: 'machine' and 'torch')."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU here names itself")
    provenance = tmp_path / "b_train.json"
    provenance.write_text(json.dumps({"machine": "1 x NVIDIA H100 80GB HBM3", "torch": "2.11.0"}))
    got = _report(tmp_path, "--ran-on", str(provenance))
    assert (got["gpu"], got["torch"]) == ("1 x NVIDIA H100 80GB HBM3", "2.11.0")
    # made again later, from a tree at another commit: the device's commit and date stay
    ran = {"gpu": "NVIDIA H200", "torch": "2.11.0", "commit": "0c97bd2", "date": "2026-12-07"}
    provenance.write_text(json.dumps(ran))
    again = _report(tmp_path / "again", "--ran-on", str(provenance))
    assert (again["commit"], again["date"], again["gpu"]) == (
        "0c97bd2",
        "2026-12-07",
        "NVIDIA H200",
    )
