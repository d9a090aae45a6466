"""``benchmarks/gpu/learning_run.py`` (issue 29): the trainer's command line of each device
call. The trainer does not save ``--unit-estimates``; a resumed call must pass them again, or
the first evaluation of a run that never timed one would be guessed at (on the H200 that guess
lost a call)."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str = "learning_run"):
    """A script of ``benchmarks/gpu`` as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "gpu" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_call_runs_the_trainer_with_its_limit_and_the_estimates(tmp_path):
    train_command = _load().train_command
    run = tmp_path / "run"
    flags = ["--preset", "h200", "--unit-estimates", "prior/state.json", "--steps", "0"]
    head = [sys.executable, "-m", "cuda_agent.runner", "train", "--quiet"]
    # No config.json yet: a new run, whatever the mode says.
    assert train_command("resume", run, "/m.gguf", flags, 500.4) == [
        *head, "--model", "/m.gguf", "--out", str(run), *flags, "--stop-after", "500",
    ]  # fmt: skip
    run.mkdir()
    (run / "config.json").write_text("{}")
    assert train_command("resume", run, "/m.gguf", flags, 300) == [
        *head, "--resume", str(run), "--unit-estimates", "prior/state.json", "--stop-after", "300",
    ]  # fmt: skip
    assert train_command("resume", run, "/m.gguf", ["--steps", "3"], 300) == [
        *head, "--resume", str(run), "--stop-after", "300",
    ]  # fmt: skip


def _run_dir(root: Path) -> Path:
    run = root / "run"
    (run / "checkpoints" / "warmstart-3").mkdir(parents=True)
    (run / "checkpoints" / "warmstart-3" / "adapter.bin").write_bytes(
        random.Random(0).randbytes(300_000)
    )
    (run / "tensorboard").mkdir()
    (run / "tensorboard" / "events").write_text("x" * 1000)
    (run / "state.json").write_text('{"stage_steps": {"warmstart": 3}}')
    (run / "learning_run.json").write_text('{"flags": [], "calls": []}')
    return run


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_pack_lays_the_run_out_again_without_its_events(tmp_path):
    m = _load()
    run = _run_dir(tmp_path)
    parts = m.pack(run, tmp_path / "out" / "pack", part_bytes=100_000)
    assert len(parts) > 1 and all(p.stat().st_size <= 100_000 for p in parts)
    back = tmp_path / "again" / "run"
    m.unpack(tmp_path / "out" / "pack", back)
    want = {k: v for k, v in _files(run).items() if not k.startswith("tensorboard")}
    assert _files(back) == want
    with pytest.raises(ValueError, match="exists already"):
        m.unpack(tmp_path / "out" / "pack", back)
    # a second pack replaces the first's parts
    (run / "checkpoints" / "warmstart-3" / "adapter.bin").write_bytes(b"small")
    assert len(m.pack(run, tmp_path / "out" / "pack", part_bytes=100_000)) == 1
    assert sorted(p.name for p in (tmp_path / "out" / "pack").iterdir()) == ["run.tgz.000"]


def test_a_torn_or_gapped_pack_is_refused_and_lays_out_nothing(tmp_path):
    m = _load()
    parts = m.pack(_run_dir(tmp_path), tmp_path / "pack", part_bytes=100_000)
    parts[-1].write_bytes(parts[-1].read_bytes()[:50])  # the copy back cut short
    with pytest.raises(ValueError, match="torn or incomplete"):
        m.unpack(tmp_path / "pack", tmp_path / "back")
    assert not (tmp_path / "back").exists()
    assert not any(p.name.startswith(".back") for p in tmp_path.iterdir())
    parts[1].unlink()
    with pytest.raises(ValueError, match="no complete pack"):
        m.unpack(tmp_path / "pack", tmp_path / "back")


def test_a_call_on_a_fresh_machine_resumes_from_the_pack(tmp_path, capsys):
    m = _load()
    run = _run_dir(tmp_path)
    (run / "summary.json").write_text("{}")  # a finished run: no trainer needed to resume it
    m.pack(run, tmp_path / "carried")
    lost = tmp_path / "machine2" / "run"
    out = tmp_path / "out"
    assert m.main(["resume", str(out), "--run", str(lost)]) == 1  # gone, and no pack named
    assert "--from-pack" in capsys.readouterr().out
    argv = ["resume", str(out), "--run", str(lost), "--from-pack", str(tmp_path / "carried")]
    assert m.main([*argv, "--pack"]) == 0
    assert (lost / "state.json").read_text() == (run / "state.json").read_text()
    assert [p.name for p in (out / "pack").iterdir()] == ["run.tgz.000"]
    assert sorted(p.name for p in out.iterdir()) == ["learning_run.json", "pack"]
    assert m.main(["unpack", str(out / "pack"), "--run", str(tmp_path / "here")]) == 0
    assert (tmp_path / "here" / "summary.json").is_file()
    assert not (tmp_path / "here" / "checkpoints").exists()  # finished: its adapter is enough


@pytest.mark.slow
def test_a_packed_run_returns_within_the_devices_file_limit(tmp_path, monkeypatch):
    """A whole (tiny, CPU) run through ``start --pack``: what the call leaves in OUT_DIR is its
    record and the pack (the device returns 8 files), and the pack holds the finished run's
    adapter, summary and reports, without its checkpoints."""
    from cuda_agent.policy.testing import save_tiny_model
    from cuda_agent.runner.testing import copy_builtin_tasks

    m = _load()
    model = save_tiny_model(tmp_path / "model")
    copy_builtin_tasks(tmp_path / "tasks", ("relu",))
    copy_builtin_tasks(tmp_path / "heldout", ("tanh",), compact=False)
    flags = [
        "--model", str(model), "--tasks", str(tmp_path / "tasks"),
        "--eval-tasks", str(tmp_path / "heldout"), "--backend", "cpu", "--rl-warmup-steps", "0",
        "--rft-tasks", "0", "--value-steps", "0", "--steps", "0", "--eval-before", "false",
        "--eval-train", "false", "--lora-rank", "4", "--max-new-tokens", "40",
        "--warmstart-steps", "2",
    ]  # fmt: skip
    monkeypatch.chdir(ROOT)  # the script's paths are the repository's
    out, run = tmp_path / "out", tmp_path / "run"
    assert m.main(["start", str(out), "--run", str(run), "--pack", "--", *flags]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["learning_run.json", "pack"]
    assert len(list((out / "pack").iterdir())) == 1
    back = tmp_path / "back"
    m.unpack(out / "pack", back)
    for name in ("summary.json", "learning.json", "train_learning.json", "calls/train_call1.log"):
        assert (back / name).is_file(), name
    assert (back / "adapter" / "adapter_model.safetensors").is_file()
    assert not (back / "checkpoints").exists()


def test_a_plan_names_only_earlier_runs_and_a_reference_needs_a_finished_run(tmp_path):
    c = _load("learning_chain")
    plan = tmp_path / "plan.json"
    bad = [
        ("not json", "not a plan"),
        ('{"runs": [{"name": "a", "flags": ["--init-from", "{run:b}"]}, {"name": "b", '
         '"flags": []}]}', "not a run before it"),
        ('{"runs": [{"name": "a", "flags": []}, {"name": "a", "flags": []}]}', "unique"),
        ('{"runs": [{"name": "a", "flags": "--steps 0"}]}', "list of strings"),
    ]  # fmt: skip
    for text, said in bad:
        plan.write_text(text)
        with pytest.raises(ValueError, match=said):
            c.read_plan(plan)
    root = tmp_path / "root"
    flags = ["--init-from", "{run:warm}", "--train-budget-s", "{train_seconds:rl}"]
    (root / "rl").mkdir(parents=True)
    (root / "rl" / "state.json").write_text('{"train_seconds": 455.6}')
    with pytest.raises(ValueError, match="has not finished"):
        c.resolved(flags, root)
    (root / "rl" / "summary.json").write_text("{}")
    assert c.resolved(flags, root) == ["--init-from", str(root / "warm"), "--train-budget-s", "456"]


@pytest.mark.slow
def test_a_chain_runs_its_plan_in_order_and_the_second_starts_from_the_first(tmp_path, monkeypatch):
    """Two tiny CPU runs: a warm start, then a run from its weights whose training budget is
    the first's training seconds; a call with too little time left for the second stops
    before it (75) and the same command finishes the chain."""
    from cuda_agent.policy.testing import save_tiny_model
    from cuda_agent.runner.testing import copy_builtin_tasks

    c = _load("learning_chain")
    model = save_tiny_model(tmp_path / "model")
    copy_builtin_tasks(tmp_path / "tasks", ("relu",))
    copy_builtin_tasks(tmp_path / "heldout", ("tanh",), compact=False)
    common = [
        "--model", str(model), "--tasks", str(tmp_path / "tasks"),
        "--eval-tasks", str(tmp_path / "heldout"), "--backend", "cpu", "--rl-warmup-steps", "0",
        "--rft-tasks", "0", "--value-steps", "0", "--steps", "0", "--eval-before", "false",
        "--eval-train", "false", "--lora-rank", "4", "--max-new-tokens", "40",
    ]  # fmt: skip
    plan = tmp_path / "plan.json"
    runs = [
        {"name": "warm", "flags": [*common, "--warmstart-steps", "2"]},
        {"name": "more", "flags": [*common, "--init-from", "{run:warm}", "--warmstart-steps",
                                   "100", "--train-budget-s", "{train_seconds:warm}"]},
    ]  # fmt: skip
    plan.write_text(json.dumps({"runs": runs}))
    monkeypatch.chdir(ROOT)  # the scripts' paths are the repository's
    out, root = tmp_path / "out", tmp_path / "root"
    argv = [str(out), str(plan), "--root", str(root), "--margin", "5"]
    # the first run takes a few seconds of the 60: fewer than 59 are left for the second
    assert c.main([*argv, "--seconds", "60", "--min-seconds", "59"]) == 75
    assert json.loads((out / "chain.json").read_text())["runs"] == {
        "warm": "finished", "more": "waiting"
    }  # fmt: skip
    assert c.main([*argv, "--seconds", "600"]) == 0
    more = json.loads((root / "more" / "config.json").read_text())
    assert more["init_from"] == str(root / "warm")
    warm_seconds = json.loads((root / "warm" / "state.json").read_text())["train_seconds"]
    assert more["train_budget_s"] == float(f"{max(1.0, warm_seconds):.0f}")
    for name in ("warm", "more"):
        assert (out / name / "learning.json").is_file(), name


@pytest.mark.parametrize("plan", sorted((ROOT / "benchmarks" / "gpu" / "plans").glob("*.json")))
def test_each_shipped_plan_is_a_plan_whose_runs_the_trainer_accepts(plan, tmp_path, monkeypatch):
    from cuda_agent.runner.cli import _config, _parser

    c = _load("learning_chain")
    if "runs" not in json.loads(plan.read_text()):
        return  # (the estimates beside the plans)
    monkeypatch.chdir(ROOT)  # the plans' paths are the repository's
    for run in c.read_plan(plan):
        (tmp_path / run["name"]).mkdir()
        (tmp_path / run["name"] / "summary.json").write_text("{}")
        (tmp_path / run["name"] / "state.json").write_text('{"train_seconds": 450}')
    for run in c.read_plan(plan):
        args = _parser().parse_args(["train", *c.resolved(run["flags"], tmp_path)])
        _config(args)  # the preset and the flags make a valid TrainConfig
