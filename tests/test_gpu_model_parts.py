"""``benchmarks/gpu/split_model.sh`` and ``join_model.sh``: the model travels to the device in
parts that each fit one call beside the tree (64 MiB a call, the tree and ``.git`` included), and
comes back together there only whole, its checksum checked."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20


def _repo(tmp_path: Path) -> Path:
    """A git repository shaped like ours: the two scripts, a tracked file, a gguf wheel."""
    repo = tmp_path / "repo"
    (repo / "benchmarks" / "gpu").mkdir(parents=True)
    for name in ("split_model.sh", "join_model.sh", "lean_tree.sh"):
        shutil.copy(ROOT / "benchmarks" / "gpu" / name, repo / "benchmarks" / "gpu" / name)
    (repo / "tracked.bin").write_bytes(os.urandom(3 * MIB))
    (repo / ".whl").mkdir()
    (repo / ".whl" / "gguf-0.19.0-py3-none-any.whl").write_bytes(b"wheel")
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True)
    _commit_all(repo, "tree")
    return repo


def _commit_all(repo: Path, message: str) -> None:
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", message], check=True)


def _split(repo: Path, model: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "benchmarks/gpu/split_model.sh"],
        cwd=repo,
        env={**os.environ, "MODEL_FILE": str(model), **env},
        capture_output=True,
        text=True,
    )


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(os.urandom(21 * MIB + 7))
    return path


def _travels(repo: Path) -> int:
    """What a call carries without any part: tracked and untracked-not-ignored files, .git."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=repo, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    files = sum((repo / f).stat().st_size for f in out)
    return files + sum(p.stat().st_size for p in (repo / ".git").rglob("*") if p.is_file())


def test_each_part_fits_a_call_beside_the_tree_with_the_room_asked_for(repo_model):
    repo, model = repo_model
    done = _split(repo, model, MODEL_SPARE_MIB="50")
    assert done.returncode == 0, done.stderr
    parts = sorted(repo.glob(".model-?/part-??"))
    assert len(parts) >= 2  # 21 MiB do not fit in the 14 MiB left beside the tree
    travels = _travels(repo)  # the parts' folders are ignored now, so they are not counted
    for part in parts:
        assert travels + part.stat().st_size <= (64 - 50) * MIB, part
    fewer = -(-model.stat().st_size // (len(parts) - 1))  # as few as fit: one fewer would not
    assert travels + fewer > (64 - 50) * MIB
    assert (parts[-1].parent / "model.parts").read_text().strip() == str(len(parts))
    # fewer parts with more room
    assert _split(repo, model, MODEL_SPARE_MIB="6").returncode == 0
    assert len(list(repo.glob(".model-?/part-??"))) < len(parts)


def test_a_tree_that_leaves_no_room_is_refused_with_a_reason(repo_model):
    repo, model = repo_model
    done = _split(repo, model, MODEL_SPARE_MIB="61")
    assert done.returncode == 1
    assert "travel" not in done.stdout and "64 MiB" in done.stderr
    assert not list(repo.glob(".model-?"))


def _call(
    repo: Path, tmp_path: Path, folders: list[str], *args: str
) -> subprocess.CompletedProcess:
    """One device call: a fresh copy of the tracked tree with only the carried folders."""
    tree = tmp_path / "call"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(repo / "benchmarks", tree / "benchmarks")
    for folder in folders:
        shutil.copytree(repo / folder, tree / folder)
    return subprocess.run(
        ["bash", "benchmarks/gpu/join_model.sh", *args],
        cwd=tree,
        env={**os.environ, "CUDA_AGENT_MODEL_STASH": str(tmp_path / "stash")},
        capture_output=True,
        text=True,
    )


def test_the_parts_carried_one_call_each_join_into_the_same_file(repo_model, tmp_path):
    repo, model = repo_model
    assert _split(repo, model, MODEL_SPARE_MIB="50").returncode == 0
    folders = sorted(p.name for p in repo.glob(".model-?"))
    dest = tmp_path / "joined.gguf"
    for folder in folders[:-1]:
        assert _call(repo, tmp_path, [folder], "--stash").returncode == 0
    done = _call(repo, tmp_path, [folders[-1]], str(dest))
    assert done.returncode == 0, done.stderr
    assert dest.read_bytes() == model.read_bytes()


def test_a_missing_or_damaged_part_is_refused_and_leaves_no_file(repo_model, tmp_path):
    repo, model = repo_model
    assert _split(repo, model, MODEL_SPARE_MIB="50").returncode == 0
    folders = sorted(p.name for p in repo.glob(".model-?"))
    dest = tmp_path / "joined.gguf"
    missing = _call(repo, tmp_path, [folders[-1]], str(dest))  # the earlier calls never ran
    assert missing.returncode == 1 and "missing" in missing.stderr
    for folder in folders[:-1]:
        assert _call(repo, tmp_path, [folder], "--stash").returncode == 0
    first = tmp_path / "stash" / "part-aa"
    first.write_bytes(b"x" + first.read_bytes()[1:])
    damaged = _call(repo, tmp_path, [folders[-1]], str(dest))
    assert damaged.returncode == 1 and "sha256 mismatch" in damaged.stderr
    assert not dest.exists()


def _lean(repo: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "benchmarks/gpu/lean_tree.sh", mode], cwd=repo, capture_output=True, text=True
    )


def _with_figures(repo: Path) -> Path:
    """``repo`` with 4 MiB of committed figures under benchmarks/results."""
    figures = repo / "benchmarks" / "results" / "run" / "figures.json"
    figures.parent.mkdir(parents=True)
    figures.write_bytes(os.urandom(4 * MIB))
    _commit_all(repo, "figures")
    return figures


def test_the_figures_left_behind_make_fewer_parts_and_come_back_whole(repo_model):
    repo, model = repo_model
    figures = _with_figures(repo)
    kept = figures.read_bytes()
    assert _split(repo, model, MODEL_SPARE_MIB="40").returncode == 0
    with_figures = len(list(repo.glob(".model-?/part-??")))
    assert _lean(repo, "off").returncode == 0
    assert not figures.exists()
    assert _split(repo, model, MODEL_SPARE_MIB="40").returncode == 0
    assert len(list(repo.glob(".model-?/part-??"))) < with_figures
    assert _lean(repo, "on").returncode == 0
    assert figures.read_bytes() == kept


def test_figures_not_yet_committed_are_never_left_behind(repo_model):
    repo, _ = repo_model
    _with_figures(repo)
    new = repo / "benchmarks" / "results" / "run" / "new.json"
    new.write_text("{}")
    done = _lean(repo, "off")
    assert done.returncode == 1 and "new.json" in done.stderr
    assert new.exists() and (repo / "benchmarks" / "results" / "run" / "figures.json").exists()
    assert _lean(repo, "sideways").returncode == 2


@pytest.fixture
def repo_model(tmp_path: Path, model: Path) -> tuple[Path, Path]:
    return _repo(tmp_path), model
