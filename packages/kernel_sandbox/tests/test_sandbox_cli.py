"""The ``kernel-sandbox`` commands: ``eval`` exits 0 on any verdict, ``check-task`` 0 for a
task with no finding and 1 for one with findings; both exit 2 on a usage error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cuda_agent.kernel_sandbox import builtin_tasks
from cuda_agent.kernel_sandbox.cli import _config, _parser

DEGENERATE_TASK = """
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x * {scale}


def get_inputs():
    return [torch.randn(256)]


def get_init_inputs():
    return []
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent.kernel_sandbox.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_eval_prints_json_verdicts(tmp_path):
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    (tmp_path / "task.py").write_text(relu.source)
    (tmp_path / "good.py").write_text(relu.solutions["cpu"])
    (tmp_path / "bad.py").write_text("import torch\n")
    good = _cli(
        "eval", str(tmp_path / "task.py"), str(tmp_path / "good.py"), "--backend", "cpu", "--json"
    )
    assert good.returncode == 0, good.stderr
    data = json.loads(good.stdout)
    assert data["status"] == "ok" and data["speedup_vs_eager"] > 0
    bad = _cli("eval", str(tmp_path / "task.py"), str(tmp_path / "bad.py"), "--backend", "cpu")
    assert bad.returncode == 0 and bad.stdout.startswith("compile_error:")


def test_usage_errors_exit_2(tmp_path):
    missing = _cli("eval", str(tmp_path / "nope.py"), str(tmp_path / "c.py"), "--backend", "cpu")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    # A directory without model_new.py is not a work directory: a usage error, said plainly.
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    (tmp_path / "task.py").write_text(relu.source)
    (tmp_path / "empty").mkdir()
    bad_dir = _cli("eval", str(tmp_path / "task.py"), str(tmp_path / "empty"), "--backend", "cpu")
    assert bad_dir.returncode == 2 and "model_new.py" in bad_dir.stderr


def test_check_task_exit_codes_and_json(tmp_path):
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    (tmp_path / "relu.py").write_text(relu.source)
    (tmp_path / "zeros.py").write_text(DEGENERATE_TASK.format(scale=0))
    (tmp_path / "broken.py").write_text("class Model(:\n")
    good = _cli("check-task", str(tmp_path / "relu.py"), "--backend", "cpu")
    assert good.returncode == 0 and good.stdout.startswith("ok:"), good.stderr
    bad = _cli("check-task", str(tmp_path / "zeros.py"), "--backend", "cpu", "--json")
    assert bad.returncode == 1, bad.stderr
    data = json.loads(bad.stdout)
    assert data["ok"] is False and data["task"] == "zeros"
    assert {f["code"] for f in data["findings"]} == {
        "near_zero_output",
        "constant_output",
        "input_independent_output",
    }
    assert _cli("check-task", str(tmp_path / "nope.py")).returncode == 2
    broken = _cli("check-task", str(tmp_path / "broken.py"), "--backend", "cpu")
    assert broken.returncode == 2 and "not valid Python" in broken.stderr


def test_check_task_judges_at_the_chosen_tolerance(tmp_path):
    # Outputs about 1e-3: an all-zero answer passes at 1e-2 (cuda-agent, the default; see
    # test_sandbox_validate_task.py), not at 1e-4 (kernelbench), and again when --atol
    # overrides the preset.
    path = tmp_path / "milli.py"
    path.write_text(DEGENERATE_TASK.format(scale=1e-3))
    strict = _cli("check-task", str(path), "--backend", "cpu", "--tolerance", "kernelbench")
    assert strict.returncode == 0 and "atol=0.0001" in strict.stdout, strict.stdout
    loose = _cli(
        "check-task", str(path), "--backend", "cpu", "--tolerance", "kernelbench", "--atol", "0.01"
    )
    assert loose.returncode == 1 and "near_zero_output" in loose.stdout, loose.stdout


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], (1e-2, 1e-2)),
        (["--tolerance", "kernelbench"], (1e-4, 1e-4)),
        (["--tolerance", "kernelbench", "--rtol", "0.5"], (1e-4, 0.5)),
        (["--atol", "0.2"], (0.2, 1e-2)),
    ],
)
def test_tolerance_flags_override_the_preset(flags, expected):
    for command in (["eval", "task.py", "model_new.py"], ["check-task", "task.py"]):
        tolerances = _config(_parser().parse_args([*command, *flags])).tolerances()
        assert (tolerances.atol, tolerances.rtol) == expected


def test_unknown_tolerance_preset_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        _parser().parse_args(["eval", "task.py", "model_new.py", "--tolerance", "torchbench"])
    assert exit_.value.code == 2 and "kernelbench" in capsys.readouterr().err
