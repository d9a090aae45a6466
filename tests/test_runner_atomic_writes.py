"""No torn file after a kill: every file the runner writes for a run is replaced whole.

A kill in the middle of a write (here: SIGKILL at the fsync, after part of the new text is in
the temporary file) leaves the old file, complete; and the runner's source writes files only
through the atomic helpers of ``runner/checkpoint.py`` (a test of the code's shape, so that a
new ``write_text`` on a run's state is caught before a kill finds it).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.runner import checkpoint
from cuda_agent.runner.checkpoint import replace_dir, write_json_atomic, write_text_atomic

RUNNER = Path(checkpoint.__file__).parent

# Where a file is opened for writing or written in place, and why that is safe.
ALLOWED = {
    ("checkpoint.py", "open"): "the helpers themselves: a temporary file, or an fsynced append",
    ("context.py", "save"): "a checkpoint's files, written into a dot directory then renamed",
    ("train.py", "save"): "the final adapter, written into a dot directory then renamed",
    ("eval/report.py", "savefig"): "a temporary name, then os.replace",
    ("metrics.py", "savefig"): "a temporary name, then os.replace",
    (
        "eval/comparison.py",
        "write_text",
    ): "`cuda-agent compare --out`: a command's output, never read",
    ("solve.py", "write_text"): "`cuda-agent solve`'s output, never read back",
    ("testing.py", "write_text"): "tests' fixture tasks, written before any run starts",
    ("testing.py", "open"): "a forked test command's standard streams (run_cli), not a run's file",
}
WRITES = {"write_text", "write_bytes", "savefig", "save", "open"}


def _writes(path: Path) -> set[tuple[str, str]]:
    """(file, call) for each call in ``path`` that may write a file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in WRITES:
            continue
        if name == "open":  # reading is fine
            mode = node.args[0] if node.args and isinstance(func, ast.Attribute) else None
            if isinstance(func, ast.Name):
                mode = node.args[1] if len(node.args) > 1 else None
            mode = next((k.value for k in node.keywords if k.arg == "mode"), mode)
            if not (isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+")):
                continue
        if name == "save" and isinstance(func, ast.Attribute):
            owner = ast.unparse(func.value)
            if owner in ("self", "ctx"):  # Run.save: the state, through write_json_atomic
                continue
        found.add((path.relative_to(RUNNER).as_posix(), name))
    return found


def test_the_runner_writes_files_only_through_the_atomic_helpers():
    found = set()
    for path in sorted(RUNNER.rglob("*.py")):
        found |= _writes(path)
    unexplained = sorted(found - set(ALLOWED))
    assert not unexplained, (
        f"{unexplained}: write a run's files with checkpoint.write_text_atomic / "
        "write_json_atomic (or stage a directory and replace_dir), then list the call here"
    )
    assert not set(ALLOWED) - found, "ALLOWED lists writes the runner no longer makes"


def _kill_at_fsync(code: str) -> None:
    """Run ``code`` in a child whose first fsync kills it (SIGKILL): the write is half done."""
    prelude = "import os, signal\nos.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)\n"
    proc = subprocess.run([sys.executable, "-c", prelude + code], check=False)
    assert proc.returncode == -9


def test_a_kill_while_a_file_is_written_leaves_the_old_file(tmp_path):
    state = tmp_path / "state.json"
    write_json_atomic(state, {"step": 1})
    _kill_at_fsync(
        "from pathlib import Path\n"
        "from cuda_agent.runner.checkpoint import write_json_atomic\n"
        f"write_json_atomic(Path({str(state)!r}), {{'step': 2, 'pad': 'x' * 100000}})\n"
    )
    assert json.loads(state.read_text()) == {"step": 1}
    write_json_atomic(state, {"step": 2})  # the leftover temporary file is no obstacle
    assert json.loads(state.read_text()) == {"step": 2}


def test_a_kill_while_a_checkpoint_is_moved_in_leaves_a_whole_one(tmp_path):
    final = tmp_path / "adapter"
    final.mkdir()
    (final / "weights").write_text("old")
    staged = tmp_path / ".adapter.partial"
    staged.mkdir()
    (staged / "weights").write_text("new")
    _kill_at_fsync(
        "from pathlib import Path\n"
        "from cuda_agent.runner.checkpoint import replace_dir\n"
        f"replace_dir(Path({str(staged)!r}), Path({str(final)!r}))\n"
    )
    assert (final / "weights").read_text() == "old"
    replace_dir(staged, final)
    assert (final / "weights").read_text() == "new" and not staged.exists()


def test_text_is_replaced_whole(tmp_path, monkeypatch):
    path = tmp_path / "eval.md"
    write_text_atomic(path, "old")

    def crash(*_args):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.os, "replace", crash)
    with pytest.raises(OSError):
        write_text_atomic(path, "new")
    assert path.read_text() == "old"
