"""``cuda-agent train --init-from RUN_DIR``: a run starts from another run's trained weights (its
final adapter, else its last checkpoint's), so that one warm start trained once is continued by
RL and by an SFT-only control alike; a resumed run continues from its own checkpoint; weights
that are missing or of another LoRA rank are refused with exit code 2 and one line.

Runs of a tiny random model on the CPU backend: two training tasks with one-line compact
solutions, one held-out task, greedy evaluation.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.runner import deadline as deadline_module
from cuda_agent.runner.budget import inherited_budget
from cuda_agent.runner.checkpoint import trained_weights
from cuda_agent.runner.cli import main
from cuda_agent.runner.deadline import EX_TEMPFAIL
from cuda_agent.runner.testing import AfterUnits, copy_builtin_tasks

ONLY_WARMSTART = [
    "--backend", "cpu", "--rl-warmup-steps", "0", "--rft-tasks", "0", "--value-steps", "0",
    "--steps", "0", "--eval-before", "false", "--eval-train", "false", "--lora-rank", "4",
    "--max-new-tokens", "40", "--seed", "5", "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("init-from")
    model = save_tiny_model(root / "model")
    copy_builtin_tasks(root / "tasks", ("relu", "silu"))  # the warm start teaches one line
    copy_builtin_tasks(root / "heldout", ("tanh",), compact=False)
    return [
        "--model", str(model), "--tasks", str(root / "tasks"),
        "--eval-tasks", str(root / "heldout"), *ONLY_WARMSTART,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def warm(setup, tmp_path_factory) -> Path:
    """A warm-start-only run: three supervised steps."""
    run = tmp_path_factory.mktemp("warm") / "run"
    assert main(["train", *setup, "--warmstart-steps", "3", "--out", str(run)]) == 0
    return run


def _weights(adapter: Path) -> dict[str, torch.Tensor]:
    return load_file(str(adapter / "adapter_model.safetensors"))


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _eval(run: Path, name: str = "heldout_after") -> list[dict]:
    return json.loads((run / "eval" / name / "eval.json").read_text())["per_task"]


def test_a_run_started_from_another_holds_its_weights(setup, warm, tmp_path: Path) -> None:
    """No training: the run's final adapter is the warm run's, and its evaluation the same.
    Its answer budget left to auto (0) is the warm run's (40 tokens), not the 512-token floor
    of a run without a warm start: the weights write answers of the warm start's length."""
    run = tmp_path / "run"
    code = main(["train", *setup, "--warmstart-steps", "0", "--init-from", str(warm),
                 "--max-new-tokens", "0", "--out", str(run)])  # fmt: skip
    assert code == 0
    assert json.loads((run / "config.json").read_text())["max_new_tokens"] == 40
    assert _same(_weights(run / "adapter"), _weights(warm / "adapter"))
    assert _eval(run) == _eval(warm)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["init_from"] == str(warm)


def test_an_adapter_copied_alone_keeps_its_runs_answer_budget(setup, warm, tmp_path) -> None:
    """The warm run's adapter brought elsewhere without its run (as the device's adapters come
    back) still says the budget its answers were taught within: a run started from it gets
    the warm run's 40 tokens, not the 512-token floor (which on the H100 cut 10 of 23 answers
    taught at 1,024 tokens). So do its checkpoints' adapters, and the adapters in place."""
    alone = tmp_path / "elsewhere" / "adapter"
    shutil.copytree(warm / "adapter", alone)
    assert json.loads((alone / "answer_budget.json").read_text()) == {"max_new_tokens": 40}
    assert inherited_budget(str(alone)) == 40
    assert inherited_budget(str(warm / "adapter")) == 40
    checkpoint = json.loads((warm / "state.json").read_text())["checkpoint"]
    assert json.loads((warm / checkpoint / "adapter" / "answer_budget.json").read_text()) == {
        "max_new_tokens": 40
    }
    (alone / "answer_budget.json").unlink()  # an adapter from elsewhere: nothing to inherit
    assert inherited_budget(str(alone)) == 0
    run = tmp_path / "run"
    shutil.copytree(warm / "adapter", tmp_path / "adapter")
    code = main(["train", *setup, "--warmstart-steps", "0", "--init-from",
                 str(tmp_path / "adapter"), "--max-new-tokens", "0", "--out", str(run)])  # fmt: skip
    assert code == 0
    assert json.loads((run / "config.json").read_text())["max_new_tokens"] == 40


def test_training_continues_from_the_given_weights_not_from_fresh_ones(
    setup, warm, tmp_path: Path
) -> None:
    """One more supervised step from the warm run's weights: the same as a fourth step of the
    warm run would be, but its first batch (steps count afresh); unlike the same step from a
    fresh adapter."""
    started, fresh = tmp_path / "started", tmp_path / "fresh"
    one = ["train", *setup, "--warmstart-steps", "1", "--eval-after-warmstart", "false"]
    assert main([*one, "--init-from", str(warm), "--out", str(started)]) == 0
    assert main([*one, "--out", str(fresh)]) == 0
    after, initial = _weights(started / "adapter"), _weights(warm / "adapter")
    assert not _same(after, initial)  # it trained
    assert not _same(after, _weights(fresh / "adapter"))  # from the warm run's weights
    # the step's loss starts where the warm run's training left it, below the fresh start's
    nll = [_warmstart_nll(r)[0] for r in (started, fresh)]
    assert nll[0] < nll[1] and nll[1] == pytest.approx(_warmstart_nll(warm)[0], rel=1e-5)


def _warmstart_nll(run: Path) -> list[float]:
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["nll"] for r in records if r["stage"] == "warmstart"]


def test_a_resumed_run_continues_from_its_own_checkpoint(
    setup, warm, tmp_path: Path, monkeypatch
) -> None:
    """Stopped after its first step, the resumed run reads its checkpoint, not --init-from
    (which may be gone by then), and ends where an unstopped run does."""
    copy = tmp_path / "warm-copy"
    shutil.copytree(warm, copy)
    run = tmp_path / "run"
    two = ["train", *setup, "--warmstart-steps", "2", "--eval-after-warmstart", "false"]
    with monkeypatch.context() as patch:  # the baselines and one step, then the deadline
        patch.setattr(deadline_module, "Deadline", lambda at, **_: AfterUnits(2))
        code = main([*two, "--init-from", str(copy), "--stop-after", "1e6", "--out", str(run)])
    assert code == EX_TEMPFAIL
    state = json.loads((run / "state.json").read_text())
    assert state["stage_steps"] == {"warmstart": 1}
    shutil.rmtree(copy)
    assert main(["train", "--resume", str(run), "--quiet"]) == 0
    straight = tmp_path / "straight"
    assert main([*two, "--init-from", str(warm), "--out", str(straight)]) == 0
    assert _same(_weights(run / "adapter"), _weights(straight / "adapter"))


def test_weights_are_found_in_a_run_an_adapter_or_the_last_checkpoint(warm, tmp_path) -> None:
    assert trained_weights(warm) == warm / "adapter"
    assert trained_weights(warm / "adapter") == warm / "adapter"
    unfinished = tmp_path / "unfinished"
    shutil.copytree(warm, unfinished)
    shutil.rmtree(unfinished / "adapter")
    checkpoint = json.loads((unfinished / "state.json").read_text())["checkpoint"]
    assert trained_weights(unfinished) == unfinished / checkpoint / "adapter"


def test_missing_or_mismatched_weights_exit_2_with_one_line(
    setup, warm, tmp_path: Path, capsys
) -> None:
    (tmp_path / "empty").mkdir()
    cases = [
        (["--init-from", str(tmp_path / "nowhere")], "does not exist"),
        (["--init-from", str(tmp_path / "empty")], "holds no trained weights"),
        (["--init-from", str(warm), "--lora-rank", "8"], "has rank 4"),
    ]
    for i, (args, message) in enumerate(cases):
        capsys.readouterr()
        out = tmp_path / f"run{i}"
        assert main(["train", *setup, "--warmstart-steps", "1", *args, "--out", str(out)]) == 2
        said = [x for x in capsys.readouterr().err.splitlines() if x.startswith("cuda-agent:")]
        assert len(said) == 1 and "--init-from" in said[0] and message in said[0], said
