"""The ``kernel-sandbox eval`` command: a verdict exits 0, a usage error exits 2."""

from __future__ import annotations

import json
import subprocess
import sys

from cuda_agent.kernel_sandbox import builtin_tasks


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
