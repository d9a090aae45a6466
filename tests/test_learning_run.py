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


def test_each_call_leaves_the_earlier_calls_logs_beside_its_own(tmp_path, monkeypatch):
    """A run over two calls: the second call's OUT_DIR holds the first call's trainer log, GPU
    readings and job log beside its own, so the last call's figures are the whole run's."""
    m = _load()
    run = _run_dir(tmp_path)
    (run / "config.json").write_text("{}")

    def trainer(command, log, budget, gpu_log, job_log):  # the call's files, then the deadline
        for path in (log, gpu_log, job_log):
            path.write_text(f"{path.name} of {log.parent.name}")
        return m.EX_TEMPFAIL

    monkeypatch.setattr(m, "_run", trainer)
    first, second = tmp_path / "first", tmp_path / "second"
    assert m.main(["resume", str(first), "--run", str(run)]) == m.EX_TEMPFAIL
    assert m.main(["resume", str(second), "--run", str(run)]) == m.EX_TEMPFAIL
    logs = [f"{k}_call{n}.{e}" for n in (1, 2) for k, e in
            (("train", "log"), ("gpu_util", "csv"), ("jobs", "jsonl"))]  # fmt: skip
    assert sorted(set(logs) & {p.name for p in second.iterdir()}) == sorted(logs)
    assert (second / "jobs_call1.jsonl").read_text() == "jobs_call1.jsonl of first"
    assert (second / "jobs_call2.jsonl").read_text() == "jobs_call2.jsonl of second"
    assert not any("call2" in p.name for p in first.iterdir())


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
    for name in ("summary.json", "learning.json", "train_learning.json", "calls/train_call1.log",
                 "calls/jobs_call1.jsonl"):  # fmt: skip
        assert (back / name).is_file(), name
    # the sandbox's job log of the call: whatever it judged, nothing left under way
    from cuda_agent.kernel_sandbox._parent.job_log import read_events, summarize

    jobs = summarize(read_events(back / "calls" / "jobs_call1.jsonl"))
    assert jobs["arrived"] == jobs["ended"] and jobs["running"] == jobs["waiting"] == []
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
    argv = [str(out), str(plan), "--root", str(root), "--margin", "5", "--bundle"]
    # the first run takes a few seconds of the 60: fewer than 59 are left for the second
    assert c.main([*argv, "--seconds", "60", "--min-seconds", "59"]) == 75
    assert json.loads(_members(out / "figures.tgz")["chain.json"])["runs"] == {
        "warm": "finished", "more": "waiting"
    }  # fmt: skip
    assert c.main([*argv, "--seconds", "600"]) == 0
    more = json.loads((root / "more" / "config.json").read_text())
    assert more["init_from"] == str(root / "warm")
    warm_seconds = json.loads((root / "warm" / "state.json").read_text())["train_seconds"]
    assert more["train_budget_s"] == float(f"{max(1.0, warm_seconds):.0f}")
    # the last call's bundle holds both runs' reports, the first's from the call before
    figures = _members(out / "figures.tgz")
    for name in ("warm", "more"):
        assert json.loads(figures[f"{name}/learning.json"])["benchmark"] == "learning", name
        assert f"{name}/train_learning.json" in figures, name


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


def _adapter(path: Path, seed: int = 0) -> Path:
    """An adapter directory as ``Policy.save`` writes one: random float32 LoRA weights, the
    configs and a tokenizer file (which the float16 pack leaves out: it is the base model's)."""
    import torch
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(seed)
    weights = {
        f"base_model.model.layers.{i}.q_proj.lora_{ab}.weight": torch.randn(shape, generator=gen)
        for i in range(4)
        for ab, shape in (("A", (16, 64)), ("B", (64, 16)))
    }
    path.mkdir(parents=True)
    save_file(weights, str(path / "adapter_model.safetensors"), metadata={"format": "pt"})
    (path / "adapter_config.json").write_text(json.dumps({"r": 16, "seed": seed}))
    (path / "policy_config.json").write_text(json.dumps({"lora_rank": 16}))
    (path / "tokenizer.json").write_text("{}")
    return path


def _same_as_float16(back: Path, original: Path) -> None:
    """``back``'s weights are ``original``'s rounded to float16, in float32 again."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file

    got = load_file(str(back / "adapter_model.safetensors"))
    want = load_file(str(original / "adapter_model.safetensors"))
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key].dtype == torch.float32, key
        assert torch.equal(got[key], value.half().float()), key
    assert any(not torch.equal(got[k], want[k]) for k in want)  # float16 did round them
    with safe_open(str(back / "adapter_model.safetensors"), "pt") as fh:
        assert fh.metadata() == {"format": "pt"}


def test_an_adapter_packed_in_float16_comes_back_in_float32(tmp_path):
    a = _load("adapter16")
    src = _adapter(tmp_path / "adapter")
    (src / "answer_budget.json").write_text('{"max_new_tokens": 1024}\n')  # the trainer's
    archive = a.pack(src, tmp_path / "a.txz")
    fp32 = (src / "adapter_model.safetensors").stat().st_size
    assert archive.stat().st_size < 0.6 * fp32  # half the bytes a weight, less the compression
    back = a.unpack(archive, tmp_path / "back")
    assert sorted(p.name for p in back.iterdir()) == [
        "adapter_config.json", "adapter_model.safetensors", "answer_budget.json",
        "policy_config.json",
    ]  # fmt: skip
    for name in ("adapter_config.json", "policy_config.json", "answer_budget.json"):
        assert (back / name).read_bytes() == (src / name).read_bytes()
    _same_as_float16(back, src)
    with pytest.raises(ValueError, match="exists already"):
        a.unpack(archive, back)
    with pytest.raises(ValueError, match="not an adapter"):
        a.pack(tmp_path / "back" / "nothing", tmp_path / "b.txz")


def test_a_split_adapter_is_joined_from_its_first_part_and_a_missing_part_refused(tmp_path):
    a = _load("adapter16")
    src = _adapter(tmp_path / "adapter")
    whole = a.pack(src, tmp_path / "a.txz").read_bytes()
    parts = a.split(tmp_path / "a.txz", 2)
    assert [p.name for p in parts] == ["a.txz.0", "a.txz.1"]
    assert not (tmp_path / "a.txz").exists()
    assert b"".join(p.read_bytes() for p in parts) == whole
    assert abs(parts[0].stat().st_size - parts[1].stat().st_size) <= 1
    _same_as_float16(a.unpack(parts[0], tmp_path / "back"), src)
    assert a.main(["unpack", str(parts[0]), str(tmp_path / "back")]) == 1  # exists: refused
    parts[1].unlink()  # the last part left behind: the stream ends early
    with pytest.raises(ValueError, match="torn or a part is missing"):
        a.unpack(parts[0], tmp_path / "again")
    parts = a.split(a.pack(src, tmp_path / "a.txz"), 3)
    parts[1].unlink()  # a gap
    with pytest.raises(ValueError, match="part 1 of the archive is missing"):
        a.unpack(parts[0], tmp_path / "again")
    assert not any(p.name.startswith((".again", "again")) for p in tmp_path.iterdir())


def test_a_torn_or_foreign_archive_is_refused_and_lays_out_nothing(tmp_path):
    import tarfile

    a = _load("adapter16")
    archive = a.pack(_adapter(tmp_path / "adapter"), tmp_path / "a.txz")
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(ValueError, match="torn"):
        a.unpack(archive, tmp_path / "back")
    with pytest.raises(ValueError, match="no such archive"):
        a.unpack(tmp_path / "none.txz", tmp_path / "back")
    (tmp_path / "notes.txt").write_text("not an adapter")
    with tarfile.open(tmp_path / "other.txz", "w:xz") as tar:
        tar.add(tmp_path / "notes.txt", arcname="adapter_config.json")
    with pytest.raises(ValueError, match=r"no adapter_model\.safetensors"):
        a.unpack(tmp_path / "other.txz", tmp_path / "back")
    assert not any(p.name.startswith((".back", "back")) for p in tmp_path.iterdir())


def test_the_latest_adapter_is_the_final_one_else_the_highest_step_checkpoints(tmp_path):
    a = _load("adapter16")
    run = tmp_path / "run"
    assert a.latest_adapter(run) is None
    for name in ("warmstart-9", "rl-12", "rl-3", ".rl-20.partial"):
        _adapter(run / "checkpoints" / name / "adapter")
    (run / "checkpoints" / "rl-15" / "adapter").mkdir(parents=True)  # half written: no weights
    (run / "checkpoints" / "rl-15" / "adapter" / "adapter_config.json").write_text("{}")
    assert a.latest_adapter(run) == run / "checkpoints" / "rl-12" / "adapter"  # 12 > 9, by number
    _adapter(run / "adapter")
    assert a.latest_adapter(run) == run / "adapter"


def _members(archive: Path) -> dict[str, bytes]:
    import tarfile

    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_a_bundle_leaves_the_figures_in_one_archive_and_each_runs_adapter(tmp_path):
    c = _load("learning_chain")
    out, root = tmp_path / "out", tmp_path / "root"
    (out / "warm" / "deep").mkdir(parents=True)
    (out / "rl").mkdir()
    (out / "chain.json").write_text('{"runs": {}}')
    (out / "warm" / "metrics.jsonl").write_text('{"step": 0}\n')
    (out / "warm" / "deep" / "train_call1.log").write_text("log")
    (out / "rl" / "state.json").write_text("{}")
    wrote = _files(out)
    _adapter(root / "warm" / "adapter", seed=1)
    _adapter(root / "rl" / "checkpoints" / "rl-2" / "adapter", seed=2)
    (root / "control").mkdir()  # not started: no adapter
    episodes = root / "warm" / "eval" / "heldout_after" / "episodes"  # the answers
    episodes.mkdir(parents=True)
    (episodes / "relu.jsonl").write_text('{"answer": "kernel"}\n')
    held = c.bundle(out, root, ["warm", "rl", "control"])
    names = ["figures.tgz", "rl_adapter16.txz", "warm_adapter16.txz"]
    assert [p.name for p in held] == names
    assert sorted(p.name for p in out.iterdir()) == names
    answers = {"warm/eval_heldout_after_episodes/relu.jsonl": b'{"answer": "kernel"}\n'}
    assert _members(out / "figures.tgz") == {**wrote, **answers}
    back = c.adapter16.unpack(out / "rl_adapter16.txz", tmp_path / "rl")
    _same_as_float16(back, root / "rl" / "checkpoints" / "rl-2" / "adapter")


def test_a_bundled_chain_call_leaves_the_bundle_whatever_its_exit(tmp_path):
    """A call that finds the first run finished (no trainer needed) and too little time for the
    second: exit 75, and OUT_DIR holds the figures' archive and the first run's adapter."""
    c = _load("learning_chain")
    out, root, plan = tmp_path / "out", tmp_path / "root", tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"runs": [{"name": "warm", "flags": []}, {"name": "rl", "flags": []}]})
    )
    (root / "warm").mkdir(parents=True)
    (root / "warm" / "learning_run.json").write_text('{"flags": [], "calls": []}')
    (root / "warm" / "summary.json").write_text('{"done": true}')
    (root / "warm" / "learning.json").write_text('{"benchmark": "learning"}')  # an earlier call's
    _adapter(root / "warm" / "adapter")
    argv = [str(out), str(plan), "--root", str(root), "--min-seconds", "100000", "--bundle"]
    assert c.main(argv) == 75
    assert sorted(p.name for p in out.iterdir()) == ["figures.tgz", "warm_adapter16.txz"]
    figures = _members(out / "figures.tgz")
    assert json.loads(figures["chain.json"])["runs"] == {"warm": "finished", "rl": "waiting"}
    assert figures["warm/summary.json"] == b'{"done": true}'
    assert "warm/learning_run.json" in figures
    assert figures["warm/learning.json"] == b'{"benchmark": "learning"}'
