"""`cuda-agent train` as one job over two processes (torchrun and `accelerate launch`, gloo, the
CPU), against one process on the same global batch and seed (`runner/distributed.py`).

The small run passes through every stage: held-out evaluation before, a warm-start step, an
evaluation after it, a single-turn RL warm-up step, rejection fine-tuning (its episodes
written ahead: a random tiny model earns no reward, so nothing it collects would be kept), a
value pre-training step and a multi-turn RL step, then the evaluation after.

Why the two runs can be compared sample for sample: each step's two tasks go one to each
process, and one process samples a step's tasks in two micro-batches of one task each
(`AgentConfig.micro_batches`), each `generate` call seeded alike. So every `generate` call of
the two-process run is one of the one-process run's, with the same prompts and seed: the
sampled episodes (temperature 1) are the same. The held-out evaluation is greedy; one process
evaluates both tasks in one batch, two processes one each. The updates average the processes'
gradients with the agreed denominators (`collective.py`): the same update within float
tolerance. The RL stage is PPO with the critic (GAE, its advantages whitened over every
process's tokens); the single-turn warm-up uses a group advantage (grpo).

Each test takes about a minute on a busy 2-core machine (`slow`: in the suite all the same).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.runner.testing import copy_builtin_tasks, train_command, write_rewarded_episodes

ROOT = Path(__file__).resolve().parents[1]
HANG_S = 1800  # a guard against a hung child, not a time limit (a busy 2-core machine)
SHORT_TASKS = ("relu", "silu")
HELDOUT_TASKS = ("tanh", "elu")
STAGES = [
    "heldout_before",
    "warmstart",
    "heldout_warmstart",
    "rl_warmup",
    "rft",
    "value",
    "rl",
    "heldout_after",
]
SMALL = [
    "--warmstart-steps", "1",
    "--eval-after-warmstart", "yes",
    "--rl-warmup-steps", "1",
    "--rft-tasks", "2", "--rft-samples", "1", "--rft-turns", "1", "--rft-steps", "1",
    "--value-steps", "1",
    "--steps", "1", "--turns", "2", "--tasks-per-step", "2", "--group-size", "2",
    "--micro-batch", "1",
    "--lora-rank", "4",
    "--eval-train", "false",
    "--kl-coef", "0.05",
    "--advantage", "gae",  # RL with the critic: the policy's and the critic's updates
    "--quiet",
]  # fmt: skip
# What a one-process and a two-process run must agree on, record by record.
COMPARED = (
    "mean_reward", "pass_rate", "mean_response_tokens", "turns_per_episode", "frac_truncated",
    "nll", "tokens", "grad_norm", "trained_tokens", "kl", "entropy", "clip_fraction",
    "updates", "skipped_updates", "ratio_max", "ratio_mean", "value_loss",
    "explained_variance", "rows", "tasks", "stop_reasons", "statuses", "verdicts",
)  # fmt: skip


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dp-inputs")
    return {
        "model": save_tiny_model(root / "model"),
        "tasks": copy_builtin_tasks(root / "tasks", SHORT_TASKS, compact=False),
        "heldout": copy_builtin_tasks(root / "heldout", HELDOUT_TASKS, compact=False),
    }


def _env() -> dict[str, str]:
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}


def _args(run: Path, inputs: dict[str, Path]) -> list[str]:
    return ["--model", str(inputs["model"]), "--out", str(run), "--backend", "cpu",
            "--tasks", str(inputs["tasks"]), "--eval-tasks", str(inputs["heldout"]),
            *SMALL]  # fmt: skip


def _train(world: int, run: Path, inputs: dict[str, Path]) -> None:
    write_rewarded_episodes(run)
    done = subprocess.run(train_command(world, *_args(run, inputs)), cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=HANG_S)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _weights(run: Path) -> dict[str, torch.Tensor]:
    """The final adapter's tensors and the last checkpoint's critic's."""
    from safetensors.torch import load_file

    out = {
        f"adapter/{k}": v for k, v in load_file(run / "adapter/adapter_model.safetensors").items()
    }
    state = json.loads((run / "state.json").read_text())
    for path in sorted((run / state["checkpoint"] / "value").rglob("*")):
        if path.suffix == ".safetensors":
            out.update({f"value/{path.name}/{k}": v for k, v in load_file(path).items()})
        elif path.suffix in (".pt", ".bin"):
            loaded = torch.load(path, map_location="cpu")
            if isinstance(loaded, dict):
                tensors = {k: v for k, v in loaded.items() if isinstance(v, torch.Tensor)}
                out.update({f"value/{path.name}/{k}": v for k, v in tensors.items()})
    return out


def _same(one: object, two: object, where: str) -> None:
    if isinstance(one, float) and isinstance(two, float):
        assert two == pytest.approx(one, rel=1e-4, abs=1e-5, nan_ok=True), where
    elif isinstance(one, dict) and isinstance(two, dict):
        assert one.keys() == two.keys(), where
        for key in one:
            _same(one[key], two[key], f"{where}.{key}")
    else:
        assert one == two, where


def _check_same_run(one: Path, two: Path) -> None:
    first, second = _records(one), _records(two)
    assert [r["stage"] for r in first] == [r["stage"] for r in second] == STAGES
    for a, b in zip(first, second, strict=True):
        for key in COMPARED:
            assert (key in a) == (key in b), f"{a['stage']}.{key}"
            if key in a:
                _same(a[key], b[key], f"{a['stage']}.{key}")
    weights_one, weights_two = _weights(one), _weights(two)
    assert weights_one.keys() == weights_two.keys()
    assert any(k.startswith("value/") for k in weights_one), "the critic's weights"
    for name, tensor in weights_one.items():
        torch.testing.assert_close(weights_two[name], tensor, rtol=1e-4, atol=1e-5, msg=name)


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory, inputs) -> Path:
    run = tmp_path_factory.mktemp("dp") / "two"
    _train(2, run, inputs)
    return run


@pytest.mark.slow
def test_two_processes_make_the_one_process_run(tmp_path, inputs, two_process_run) -> None:
    one = tmp_path / "one"
    _train(1, one, inputs)
    _check_same_run(one, two_process_run)
    two = two_process_run
    # rank 0 alone wrote: one metrics file, the merged evaluations, one adapter and summary
    summary = json.loads((two / "summary.json").read_text())
    assert summary["heldout_tasks"] == sorted(HELDOUT_TASKS)
    assert summary["heldout_pass_rate_after"] is not None
    evaluated = json.loads((two / "eval" / "heldout_after" / "eval.json").read_text())
    assert sorted(row["task"] for row in evaluated["per_task"]) == sorted(HELDOUT_TASKS)
    rows = (two / "eval" / "heldout_after" / "eval_tasks.jsonl").read_text().splitlines()
    assert len(rows) == len(HELDOUT_TASKS)
    assert (two / "report.html").exists() and (two / "adapter" / "adapter_config.json").exists()
    assert [p.name for p in (two / "checkpoints").iterdir()] == ["rl-1"]


def _running(run: Path) -> list[int]:
    """The live processes whose command line names ``run`` (the killed run's workers)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(run).encode() in cmdline and stat not in ("Z", "X"):
            found.append(int(proc.name))
    return found


def _state(run: Path) -> dict:
    try:
        return json.loads((run / "state.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


@pytest.mark.slow
def test_a_two_process_run_killed_mid_run_resumes_under_two(
    tmp_path, inputs, two_process_run
) -> None:
    """Under `accelerate launch` (the other run is torchrun's): killed, then resumed under
    the same launcher, it ends as the uninterrupted run."""
    run = tmp_path / "killed"
    write_rewarded_episodes(run)
    command = train_command(2, *_args(run, inputs), launcher="accelerate")
    err = tmp_path / "killed.err"
    with err.open("w") as sink:
        proc = subprocess.Popen(command, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                                stderr=sink, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline and proc.poll() is None:
        if _state(run).get("stage_steps", {}).get("rl_warmup", 0) >= 1:
            os.killpg(proc.pid, signal.SIGKILL)  # the launcher (not its workers: below)
            break
        time.sleep(0.1)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    # the launcher's workers (sessions of their own, out of the kill's reach) end with it
    # (``run_lock.stop_with_launcher``), before the resumed run starts
    while _running(run) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(run), "a worker of the killed launcher went on running"
    said = err.read_text()  # (a worker lived on some seconds before this, and wrote)
    assert said.count("the launcher (pid") == 2, said[-4000:]
    again = train_command(2, "--resume", str(run), "--quiet", launcher="accelerate")
    resumed = subprocess.run(again, cwd=ROOT, env=_env(), capture_output=True, text=True,
                             timeout=HANG_S)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    records = _records(run)
    assert [r["stage"] for r in records] == STAGES, "no step lost or repeated"
    assert [s["processes"] for s in _state(run)["sessions"]] == [2, 2]
    # and the same run as the uninterrupted one: nothing redone differently
    _check_same_run(two_process_run, run)
