"""`cuda-agent train` end to end: stages, metrics, adapter, and resuming a killed run.

Runs the real command in a process of its own with a tiny random model (built from a config and
saved to disk, so the real loading path is used) and the real sandbox on the CPU backend. The
processes are forked from one that imported the trainer once (``runner.testing.run_cli``), but
for the slow test of the embedded default model: it starts ``python -m cuda_agent.runner``, as a
user does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.runner.testing import copy_builtin_tasks, run_cli, write_rewarded_episodes

# A guard against a hung child process, not a time limit: on a busy 2-core machine a small
# run takes many minutes.
HANG_S = 3600

SMALL = [
    "--warmstart-steps",
    "2",
    "--eval-after-warmstart",
    "yes",
    "--rl-warmup-steps",
    "1",
    "--rft-tasks",
    "2",
    "--rft-samples",
    "1",
    "--rft-turns",
    "2",
    "--rft-steps",
    "2",
    "--value-steps",
    "1",
    "--steps",
    "2",
    "--turns",
    "2",
    "--advantage",
    "gae",
    "--tasks-per-step",
    "2",
    "--group-size",
    "2",
    "--lora-rank",
    "4",
    "--eval-train",
    "true",
    "--kl-coef",
    "0.05",
    "--quiet",
]
SHORT_TASKS = ("relu", "silu")  # the two shortest CPU solutions: a small auto budget
HELDOUT_TASKS = ("tanh", "elu")
STAGES = [
    "heldout_before",
    "train_before",
    "warmstart",
    "warmstart",
    "heldout_warmstart",
    "train_warmstart",
    "rl_warmup",
    "rft",
    "rft",
    "value",
    "rl",
    "rl",
    "heldout_after",
    "train_after",
]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="module")
def short_tasks(tmp_path_factory) -> Path:
    """Two built-in task directories (task and reference solutions) copied into one folder."""
    return copy_builtin_tasks(tmp_path_factory.mktemp("tasks"), SHORT_TASKS, compact=False)


@pytest.fixture(scope="module")
def heldout_tasks(tmp_path_factory) -> Path:
    return copy_builtin_tasks(tmp_path_factory.mktemp("heldout"), HELDOUT_TASKS, compact=False)


def _train(*args: str, timeout: float = HANG_S) -> subprocess.CompletedProcess[str]:
    return run_cli(["train", *args], timeout=timeout)


def _train_from_python(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m cuda_agent.runner train ARGS``: the command's entry point itself."""
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent.runner", "train", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _args(run: Path, model: Path, tasks: Path, heldout: Path, *extra: str) -> list[str]:
    return [
        "--model",
        str(model),
        "--out",
        str(run),
        "--backend",
        "cpu",
        "--tasks",
        str(tasks),
        "--eval-tasks",
        str(heldout),
        *SMALL,
        *extra,
    ]


def test_train_runs_every_stage_and_writes_outputs(
    tmp_path, tiny_model_dir, short_tasks, heldout_tasks
):
    run = tmp_path / "run"
    write_rewarded_episodes(run)
    proc = _train(*_args(run, tiny_model_dir, short_tasks, heldout_tasks, "--curriculum", "signal"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = _records(run)
    assert [r["stage"] for r in records] == STAGES
    rl = [r for r in records if r["stage"] == "rl"]
    assert all(len(r["tasks"]) == 2 and -1.0 <= r["mean_reward"] <= 3.0 for r in rl)
    # each step says which of its tasks' groups carried a signal (the curriculum's history)
    steps = [r for r in records if r["stage"] in ("rl", "rl_warmup")]
    assert all(set(r["informative_tasks"]) <= set(r["tasks"]) for r in steps)
    assert all(r["kl"] > 0 for r in rl), "the KL to the base model after the warm start"
    for key in (
        "entropy",
        "clip_fraction",
        "kl",
        "ratio_max",
        "ratio_ess",
        "explained_variance",
        "value_loss",
        "mean_response_tokens",
        "turns_per_episode",
        "tokens_per_s",
        "decode_new_shapes",  # where sampling time goes on the GPU (compiling new shapes)
        "decode_first_step_seconds",
    ):
        assert all(key in r for r in rl), key
    rft = [r for r in records if r["stage"] == "rft"]
    assert rft[0]["collection"]["kept"] == 1 and rft[0]["collection"]["dropped_malformed"] == 1
    assert all(r["tokens"] == 4 for r in rft)  # the policy's tokens only
    value = [r for r in records if r["stage"] == "value"]
    assert -1e9 < value[0]["explained_variance"] <= 1.0
    heldout = [r for r in records if r["stage"].startswith("heldout")]
    assert all(sorted(r["tasks"]) == sorted(HELDOUT_TASKS) for r in heldout)
    assert all(0.0 <= r["pass_rate"] <= 1.0 and "fast_p" in r for r in heldout)
    # what each evaluation's sampling spent compiling new shapes (none on the CPU)
    assert all(r["decode_calls"] >= 1 and "decode_first_step_seconds" in r for r in heldout)
    # The answer budget was derived from the warm start's answers (byte tokens: one per byte)
    # and recorded in the resolved config.
    config = json.loads((run / "config.json").read_text())
    longest = max(
        len(f"```python\n{(short_tasks / n / 'solution_cpu.py').read_text().strip()}\n```")
        for n in SHORT_TASKS
    )
    assert longest < config["max_new_tokens"] <= 2 * longest + 64
    summary = json.loads((run / "summary.json").read_text())
    assert summary["backend"] == "cpu" and summary["heldout_tasks"] == sorted(HELDOUT_TASKS)
    assert summary["heldout_pass_rate_before"] is not None
    assert summary["heldout_pass_rate_after"] is not None
    assert summary["heldout_pass_rate_warmstart"] is not None  # what RL adds to the warm start
    assert (run / "eval" / "heldout_warmstart" / "eval.json").exists()
    # paired over the held-out tasks: what the run adds, and what RL adds to the warm start
    for first in ("before", "warmstart"):
        gain = summary[f"heldout_gain_after_over_{first}"]
        assert gain["tasks"] == len(HELDOUT_TASKS)
        assert gain["pass_at_1"]["ci95_low"] <= gain["pass_at_1"]["gain"]
        assert gain["pass_at_1"]["gain"] <= gain["pass_at_1"]["ci95_high"]
    assert all(len(r["ci95"]["pass_at_1"]) == 2 for r in heldout)
    assert (run / "adapter" / "adapter_config.json").exists()
    assert (run / "eval" / "heldout_after" / "eval.json").exists()
    assert list((run / "tensorboard").iterdir()), "TensorBoard events"
    assert {p.name for p in (run / "curves").iterdir()} >= {"reward.png", "heldout.png"}
    state = json.loads((run / "state.json").read_text())
    assert state["stage_steps"] == {"warmstart": 2, "rl_warmup": 1, "rft": 2, "value": 1, "rl": 2}
    # One checkpoint is kept: the committed one, with the critic beside the adapter.
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["rl-2"]
    assert (run / "checkpoints" / "rl-2" / "value").is_dir()
    # the sandbox's job log, in the run: every job it was asked for ended, with its verdict
    from cuda_agent.kernel_sandbox._parent.job_log import read_events, summarize

    assert (run / "jobs.jsonl").is_file()
    jobs = summarize(read_events(run / "jobs.jsonl"))
    assert jobs["arrived"] == jobs["ended"] == sum(jobs["statuses"].values())
    assert jobs["running"] == jobs["waiting"] == []


def test_stability_bounds_skip_or_stop_an_update(
    tmp_path, tiny_model_dir, short_tasks, heldout_tasks
):
    # An entropy floor no model reaches: every update is out of bounds.
    quick = [
        "--warmstart-steps",
        "0",
        "--rft-tasks",
        "0",
        "--value-steps",
        "0",
        "--eval-train",
        "false",
        "--guard-min-entropy",
        "1000",
    ]
    run = tmp_path / "skip"
    proc = _train(*_args(run, tiny_model_dir, short_tasks, heldout_tasks, *quick))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rl = [r for r in _records(run) if r["stage"] in ("rl", "rl_warmup")]
    assert all(r["skipped_updates"] == 1 and r["updates"] == 0 for r in rl)
    assert "mean entropy" in rl[0]["skip_reasons"][0]
    run = tmp_path / "stop"
    proc = _train(
        *_args(run, tiny_model_dir, short_tasks, heldout_tasks, *quick, "--guard-action", "stop")
    )
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert "update stopped: mean entropy" in proc.stderr and "guard_min_entropy" in proc.stderr


def test_groups_without_signal_and_too_few_kept_episodes_train_nothing(
    tmp_path, tiny_model_dir, short_tasks, heldout_tasks
):
    # A random tiny model earns the same reward on every turn: with dynamic sampling no RL
    # group carries a signal, so no RL step updates; one kept rft episode is under the minimum.
    run = tmp_path / "run"
    write_rewarded_episodes(run)
    quick = ["--warmstart-steps", "0", "--value-steps", "0", "--eval-train", "false"]
    gates = ["--drop-uniform-groups", "true", "--rft-min-kept", "2"]
    proc = _train(*_args(run, tiny_model_dir, short_tasks, heldout_tasks, *quick, *gates))
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = _records(run)
    rl = [r for r in records if r["stage"] in ("rl", "rl_warmup")]
    assert len(rl) == 3  # one warm-up step and two RL steps, each recorded
    for r in rl:
        assert r["mean_turn_reward"] == r["mean_reward"]  # one reward everywhere
        assert r["dropped_groups"] == 2  # both tasks' groups
        assert "updates" not in r and "grad_norm" not in r
    rft = [r for r in records if r["stage"] == "rft"]
    assert len(rft) == 1 and rft[0]["steps"] == 0 and rft[0]["collection"]["kept"] == 1
    state = json.loads((run / "state.json").read_text())
    assert state["stage_steps"].get("rft", 0) == 0
    assert "fewer than rft_min_kept (2)" in proc.stdout + proc.stderr


def test_bad_arguments_get_clear_errors(tmp_path):
    proc = _train("--group-size", "0")
    assert proc.returncode == 2 and "--group-size must be >= 1" in proc.stderr
    proc = _train("--resume", str(tmp_path))
    assert proc.returncode == 2 and "not a run directory" in proc.stderr
    proc = _train("--model", str(tmp_path / "missing"), "--out", str(tmp_path / "r"), "--quiet")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "missing" in proc.stderr


def test_a_budget_too_small_for_the_warm_start_is_refused(tmp_path, tiny_model_dir, short_tasks):
    # The H200 defect of 2026-12-01: answers taught by the warm start longer than the budget.
    run = tmp_path / "run"
    proc = _train(
        "--model",
        str(tiny_model_dir),
        "--out",
        str(run),
        "--backend",
        "cpu",
        "--tasks",
        str(short_tasks),
        *SMALL,
        "--max-new-tokens",
        "64",
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--max-new-tokens 64 cannot hold the warm start's cpu answers" in proc.stderr
    assert "relu" in proc.stderr and "--max-new-tokens 0" in proc.stderr
    assert not (run / "metrics.jsonl").exists(), "no stage ran"
    # Without a warm start the same budget is the user's choice.
    proc = _train(
        "--model",
        str(tiny_model_dir),
        "--out",
        str(tmp_path / "no-ws"),
        "--backend",
        "cpu",
        "--tasks",
        str(short_tasks),
        *SMALL,
        "--max-new-tokens",
        "64",
        "--warmstart-steps",
        "0",
        "--steps",
        "0",
        "--rl-warmup-steps",
        "0",
        "--rft-tasks",
        "0",
        "--value-steps",
        "0",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = _records(tmp_path / "no-ws")[-1]
    assert after["stage"] == "train_after"
    rows = (tmp_path / "no-ws" / "eval" / "train_after" / "eval_tasks.jsonl").read_text()
    assert all(json.loads(r)["stop_reason"] != "" for r in rows.splitlines())


def test_presets_and_flags_compose(tmp_path, tiny_model_dir, short_tasks):
    preset = tmp_path / "mine.toml"
    preset.write_text("[train]\nsteps = 0\nwarmstart_steps = 0\nseed = 7\nbogus = 1\n")
    proc = _train("--preset", str(preset), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "unknown settings bogus" in proc.stderr
    preset.write_text(
        "[train]\nwarmstart_steps = 0\nseed = 7\neval_train = false\n"
        "[rft]\ntasks = 0\n[value]\nsteps = 0\n[rl]\nsteps = 0\n"
    )
    run = tmp_path / "run"
    proc = _train(
        "--preset",
        str(preset),
        "--model",
        str(tiny_model_dir),
        "--out",
        str(run),
        "--backend",
        "cpu",
        "--tasks",
        str(short_tasks),
        "--seed",
        "3",
        "--quiet",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = json.loads((run / "config.json").read_text())
    assert config["steps"] == 0 and config["seed"] == 3  # the flag wins over the preset
    assert config["rft_tasks"] == 0 and config["eval_train"] is False  # stage tables
    proc = _train("--preset", "no-such-preset")
    assert proc.returncode == 2 and "presets: cpu-default, h200, multi-gpu" in proc.stderr
    # No preset given: the embedded default is cpu-default's; flags still win.
    from cuda_agent.runner.cli import _config, _parser
    from cuda_agent.runner.config import TrainConfig, read_toml

    default = _config(_parser().parse_args(["train"]))
    assert default == TrainConfig(**read_toml("cpu-default")) and default.backend == "cpu"
    assert _config(_parser().parse_args(["train", "--eval-train", "no"])).eval_train is False


def test_a_training_budget_cuts_the_training_steps_and_still_evaluates(
    tmp_path, tiny_model_dir, short_tasks, heldout_tasks
):
    # A budget any step exceeds: the first warm-start step runs, every later training step is
    # skipped (stage by stage, rft's collection too), and the evaluations after still run.
    run = tmp_path / "run"
    args = _args(run, tiny_model_dir, short_tasks, heldout_tasks, "--train-budget-s", "0.001")
    proc = _train(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stages = [r["stage"] for r in _records(run)]
    assert stages.count("warmstart") == 1 and "rl" not in stages and "rft" not in stages
    assert stages[-2:] == ["heldout_after", "train_after"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["budget_cuts"] == {
        "warmstart": 1,
        "rl_warmup": 1,
        "rft": 2,
        "value": 1,
        "rl": 2,
    }
    assert summary["train_seconds"] > 0.001
    assert summary["heldout_pass_rate_after"] is not None


def test_training_and_heldout_sets_never_meet(tmp_path, tiny_model_dir, short_tasks):
    proc = _train(
        "--model",
        str(tiny_model_dir),
        "--out",
        str(tmp_path / "r"),
        "--tasks",
        str(short_tasks),
        "--eval-tasks",
        str(short_tasks),
        "--quiet",
    )
    assert proc.returncode == 2 and "must not meet" in proc.stderr and "relu" in proc.stderr


@pytest.mark.slow
def test_default_model_runs_every_stage_and_learns_answers_that_fit(
    tmp_path, short_tasks, heldout_tasks
):
    # The cpu-default preset's stages with the embedded model, briefly. What would have caught
    # the H200 defect on the CPU: after a short warm start the greedy answers on the training
    # tasks are complete (none cut by the budget) and parse.
    run = tmp_path / "run"
    proc = _train_from_python(
        "--out",
        str(run),
        "--backend",
        "cpu",
        "--tasks",
        str(short_tasks),
        "--eval-tasks",
        str(heldout_tasks),
        "--eval-limit",  # one held-out task: the assertions are on the training tasks
        "1",
        "--warmstart-steps",  # the answers' NLL is 0.01 per token after 4 steps of 2
        "5",
        "--warmstart-batch",
        "2",
        "--rl-warmup-steps",  # as the cpu-default preset: here a single-turn RL step would
        "0",  # be the rl stage's again (the warm-up stage is the tiny-model tests')
        "--rft-tasks",
        "1",
        "--rft-samples",
        "2",
        "--rft-turns",  # one turn: multi-turn episodes of the embedded model are
        "1",  # test_agent_multiturn's; the trainer's multi-turn stages, the tiny model's
        "--rft-steps",
        "1",
        "--value-steps",
        "1",
        "--steps",
        "1",
        "--turns",
        "1",
        "--tasks-per-step",
        "1",
        "--group-size",
        "2",
        "--advantage",
        "gae",
        "--eval-train",
        "true",
        "--eval-before",  # what the untrained model writes is not what this test checks
        "false",
        # the preset keeps within 3 GB by recomputing layers and one answer per pass; these
        # steps fit without that, and take a third less time
        "--gradient-checkpointing",
        "false",
        "--micro-batch",
        "4",
        "--quiet",
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["model"] == "smollm2-135m-gguf"
    stages = {r["stage"] for r in _records(run)}
    not_asked = {"heldout_before", "train_before", "heldout_warmstart", "train_warmstart"}
    not_asked.add("rl_warmup")
    assert stages == set(STAGES) - not_asked
    rows = (run / "eval" / "train_after" / "eval_tasks.jsonl").read_text().splitlines()
    statuses = {json.loads(r)["task"]: json.loads(r)["status"] for r in rows}
    assert all(s not in ("malformed", "no_answer") for s in statuses.values()), statuses
    assert (run / "adapter" / "adapter_config.json").exists()


@pytest.mark.gpu
def test_train_runs_every_stage_on_the_gpu(tmp_path, tiny_model_dir, short_tasks):
    # The default run's stages on CUDA (policy and sandbox), with a real tokenizer: the budget
    # comes from the compact CUDA solutions the warm start teaches there.
    pytest.importorskip("cupy")
    run = tmp_path / "run"
    proc = _train(
        "--model",
        str(tiny_model_dir),
        "--out",
        str(run),
        "--backend",
        "cuda",
        "--device",
        "cuda",
        "--tasks",
        str(short_tasks),
        *SMALL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    stages = [r["stage"] for r in _records(run)]
    assert stages[0] == "train_before" and stages[-1] == "train_after" and "rl" in stages
    config = json.loads((run / "config.json").read_text())
    longest = max(
        len(f"```python\n{(short_tasks / n / 'solution_cuda_compact.py').read_text().strip()}\n```")
        for n in SHORT_TASKS
    )
    assert longest < config["max_new_tokens"] <= 2 * longest + 64
    summary = json.loads((run / "summary.json").read_text())
    assert summary["backend"] == "cuda" and summary["train_pass_rate_after"] is not None


def test_train_on_a_synthesized_task_directory(tmp_path, tiny_model_dir, heldout_tasks):
    """``cuda-agent synth`` output is a task directory the trainer takes as it is (--tasks)."""
    from cuda_agent.runner.cli import main

    tasks = tmp_path / "synth"
    argv = ["synth", "--count", "2", "--out", str(tasks), "--seed", "3", "--teachable"]
    assert main([*argv, "--max-ops", "2", "--workers", "1", "--quiet"]) == 0
    names = sorted(p.name for p in tasks.iterdir() if p.is_dir())
    assert len(names) == 2 and all((tasks / n / "solution_cpu.py").is_file() for n in names)
    run = tmp_path / "run"
    quick = ["--warmstart-steps", "2", "--rft-tasks", "0", "--value-steps", "0", "--steps", "0"]
    proc = _train(
        *_args(run, tiny_model_dir, tasks, heldout_tasks)[:10],
        *quick,
        "--eval-limit",
        "1",
        "--quiet",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = [r for r in _records(run) if r.get("stage") == "warmstart"]
    assert len(steps) == 2 and {t for r in steps for t in r["tasks"]} <= set(names)
