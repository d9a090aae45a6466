"""`cuda-agent eval` and `evaluate_tasks`, for real on the CPU: a scripted policy with known
outcomes gives exactly the expected metrics; a killed evaluation resumes without redoing or
losing a task; the tiny local model, a trained adapter and a real served endpoint run end to
end; a user's mistakes are one line on stderr and exit code 2."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, builtin_tasks, task_from_source
from cuda_agent.policy import Sample
from cuda_agent.policy.testing import save_tiny_model
from cuda_agent.runner.cli import main
from cuda_agent.runner.config import TrainConfig
from cuda_agent.runner.eval.command import EvalOptions, tasks_of
from cuda_agent.runner.eval.evaluate import CONFIG_FILE, ROWS_FILE, EvaluationError, evaluate_tasks
from cuda_agent.runner.task_sets import task_sets
from cuda_agent.runner.testing import run_cli

TASKS = {t.name: t for t in builtin_tasks()}
RELU, SILU, ADD_MUL = TASKS["relu"], TASKS["silu"], TASKS["add_mul"]
NO_CODE = "I would rather not write a kernel today."
# A guard against a hung child process, not a time limit: on a busy 2-core machine a small
# run takes many minutes.
HANG_S = 3600
KERNELBENCH_STYLE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(16, 256)]


def get_init_inputs():
    return []
"""


class Killed(BaseException):
    """A kill in the middle of an evaluation (not an Exception: nothing catches it)."""


@dataclass
class ScriptedPolicy:
    """Chat messages in (no tokenizer, as a remote endpoint): the i-th sample for a task is
    ``answers[task][i]`` (default: no code). Counts what it is asked per task; raises
    ``fail`` when asked about task ``fail_at``."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    asked: Counter[str] = field(default_factory=Counter)
    fail_at: str = ""
    fail: BaseException = field(default_factory=lambda: Killed())
    seeds: dict[str, object] = field(default_factory=dict)  # the seed each task was sampled with

    def generate(self, prompts, *, n=1, **kwargs):
        rows = []
        for messages in prompts:
            match = re.search(r"\(task `([^`]+)`\)", messages[1]["content"])
            assert match, messages[1]["content"][:200]
            task = match.group(1)
            if task == self.fail_at:
                raise self.fail
            self.asked[task] += 1
            self.seeds[task] = kwargs.get("seed")
            texts = self.answers.get(task, [NO_CODE])
            rows.append([Sample([], [], texts[i % len(texts)], "stop", []) for i in range(n)])
        return rows


def _answer(task) -> str:
    return f"Here it is:\n```python\n{task.solutions['cpu']}```"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(backend="cpu", workers=1, repeats=5, timing_budget_s=0.3)) as sb:
        yield sb


def test_known_outcomes_give_exactly_the_expected_metrics(sandbox, tmp_path: Path) -> None:
    # relu: both samples correct; silu: one of two; add_mul: none (no code at all).
    policy = ScriptedPolicy({"relu": [_answer(RELU)], "silu": [_answer(SILU), NO_CODE]})
    result = evaluate_tasks(policy, sandbox, [RELU, SILU, ADD_MUL], samples=2, out_dir=tmp_path,
                            model="scripted", log=lambda _: None)  # fmt: skip
    assert result == json.loads((tmp_path / "eval.json").read_text())
    assert result["tasks"] == 3 and result["pass_rate"] == pytest.approx(2 / 3)
    # where the time went: three answers with code judged (add_mul's and one silu's have none)
    assert result["seconds"]["evaluations"] == 3
    # relu's two samples are one program: judged once (AgentConfig.share_verdicts)
    assert result["seconds"]["sandbox_jobs"] == 2
    assert result["seconds"]["sandbox"] > 0 and result["seconds"]["sampling"] >= 0
    assert result["fast_p"]["0"] == result["fast_p_compile"]["0"] == pytest.approx(2 / 3)
    assert result["pass_at_k"] == pytest.approx({"1": (1 + 0.5 + 0) / 3, "2": 2 / 3})
    # The CPU times no torch.compile: nothing is faster than it, and eval.md says why.
    assert result["fast_1_compile"] == 0.0 and result["geomean_speedup_vs_compile"] is None
    rows = {r["task"]: r for r in result["per_task"]}
    assert [r["task"] for r in result["per_task"]] == ["relu", "silu", "add_mul"]
    assert (rows["relu"]["samples_correct"], rows["silu"]["samples_correct"]) == (2, 1)
    # each figure with its bootstrap interval over the tasks; pass@1 is the mean over samples
    ci = result["ci95"]
    assert ci["pass_at_1"]["estimate"] == pytest.approx(result["pass_at_k"]["1"])
    assert ci["pass_rate"]["estimate"] == pytest.approx(result["pass_rate"])
    assert ci["fast_1"]["estimate"] == pytest.approx(result["fast_1"])
    assert ci["pass_at_2"]["estimate"] == pytest.approx(2 / 3) and ci["confidence"] == 0.95
    for name in ("pass_at_1", "fast_1_at_1", "pass_rate", "fast_1"):
        assert 0.0 <= ci[name]["low"] <= ci[name]["estimate"] <= ci[name]["high"] <= 1.0
    faster = [rows[n]["samples_fast_1"] for n in ("relu", "silu", "add_mul")]
    assert faster[2] == 0 and 0 <= faster[0] <= 2 and 0 <= faster[1] <= 1
    for name in ("relu", "silu"):
        assert rows[name]["correct"] and rows[name]["status"] == "ok"
        assert rows[name]["best_reward"] >= 1.0 and rows[name]["speedup_vs_eager"] > 0
    assert rows["add_mul"] == {**rows["add_mul"], "correct": False, "status": "malformed",
                               "best_reward": -1.0, "samples_correct": 0, "turns": 1}  # fmt: skip
    fast = [rows[n]["speedup_vs_eager"] for n in ("relu", "silu")]
    assert result["geomean_speedup_vs_eager"] == pytest.approx((fast[0] * fast[1]) ** 0.5)
    assert result["fast_1"] == pytest.approx(sum(s > 1 for s in fast) / 3)
    assert result["config"]["samples"] == 2 and result["config"]["model"] == "scripted"
    assert (tmp_path / "kernels" / "relu.py").read_text() == RELU.solutions["cpu"]
    md = (tmp_path / "eval.md").read_text()
    assert "| Pass rate |" in md and "66.7%" in md and "not faster than compile" in md
    assert "| add_mul | no | malformed |" in md and "## pass@k" in md
    assert "## How sure: 95% bootstrap intervals over tasks" in md and "| pass_at_1 |" in md
    assert (tmp_path / "eval.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len((tmp_path / ROWS_FILE).read_text().splitlines()) == 3


def test_answers_the_sandbox_could_not_judge_are_counted_apart(sandbox, tmp_path: Path) -> None:
    """A task whose reference fails (its forward raises): relu's honest answers to it are
    ``unjudged``, not the answers' failure; eval.json and the log count them."""
    broken = task_from_source(
        RELU.source.replace("return torch.relu(x)", "raise RuntimeError('broken reference')"),
        name="broken_relu",
    )
    policy = ScriptedPolicy({"relu": [_answer(RELU)], "broken_relu": [_answer(RELU)]})
    lines: list[str] = []
    result = evaluate_tasks(policy, sandbox, [RELU, broken], samples=2, out_dir=tmp_path,
                            model="scripted", log=lines.append)  # fmt: skip
    rows = {r["task"]: r for r in result["per_task"]}
    assert rows["broken_relu"]["status"] == "unjudged" and not rows["broken_relu"]["correct"]
    assert (rows["broken_relu"]["samples_unjudged"], rows["relu"]["samples_unjudged"]) == (2, 0)
    assert result["unjudged_samples"] == 2
    assert any(line.startswith("2 of 4 samples unjudged") for line in lines)
    assert any("broken_relu: unjudged (0/2 samples correct, 2 unjudged" in line for line in lines)


def test_micro_batches_that_take_turns_with_the_sandbox_give_the_same_verdicts(
    sandbox, tmp_path: Path
) -> None:
    """``eval_micro_batches`` (2 on the CUDA backend: sampling overlaps judging) changes when
    answers are judged, not what they are judged: the same rows as one batch."""
    from cuda_agent.agent import AgentConfig
    from cuda_agent.runner.eval.evaluate import micro_batches

    answers = {"relu": [_answer(RELU)], "silu": [_answer(SILU), NO_CODE]}
    steady = ("task", "correct", "samples", "samples_correct", "status", "stop_reason")
    rows = {}
    for parts in (1, 2):
        result = evaluate_tasks(
            ScriptedPolicy(answers), sandbox, [RELU, SILU, ADD_MUL], samples=2, batch=3,
            agent_config=AgentConfig(micro_batches=parts), log=lambda _: None,
        )  # fmt: skip
        rows[parts] = [{k: r[k] for k in steady} for r in result["per_task"]]
    assert rows[1] == rows[2] and [r["samples_correct"] for r in rows[2]] == [2, 1, 0]
    assert (micro_batches(0, "cuda"), micro_batches(0, "cpu"), micro_batches(3, "cpu")) == (2, 1, 3)


def test_a_killed_evaluation_resumes_without_redoing_or_losing_a_task(
    sandbox, tmp_path: Path
) -> None:
    tasks = [RELU, SILU, ADD_MUL]
    first = ScriptedPolicy(fail_at="add_mul")  # killed when it reaches the third task
    with pytest.raises(Killed):
        evaluate_tasks(first, sandbox, tasks, out_dir=tmp_path, batch=1, log=lambda _: None)
    assert first.asked == {"relu": 1, "silu": 1}
    rows_file = tmp_path / ROWS_FILE
    assert [json.loads(x)["task"] for x in rows_file.read_text().splitlines()] == ["relu", "silu"]
    assert not (tmp_path / "eval.json").exists()
    with rows_file.open("a") as fh:  # and a row that the kill cut short
        fh.write('{"task": "add_mul", "corr')
    logged: list[str] = []
    second = ScriptedPolicy()
    result = evaluate_tasks(second, sandbox, tasks, out_dir=tmp_path, batch=1, log=logged.append)
    assert second.asked == {"add_mul": 1}  # only the unfinished task is evaluated again
    assert "resuming: 2 of 3 tasks already evaluated" in logged
    assert [r["task"] for r in result["per_task"]] == ["relu", "silu", "add_mul"]
    lines = rows_file.read_text().splitlines()
    assert sorted(json.loads(x)["task"] for x in lines) == ["add_mul", "relu", "silu"]
    third = ScriptedPolicy()  # all done: nothing is asked, the same result, no time spent
    again = evaluate_tasks(third, sandbox, tasks, out_dir=tmp_path, batch=1, log=logged.append)
    assert {**again, "seconds": result["seconds"]} == result and again["seconds"] == {}
    assert not third.asked
    for other in ({"turns": 2}, {"batch": 2}):  # (chunks, and so the samples' seeds, differ)
        with pytest.raises(ValueError, match="other settings"):
            evaluate_tasks(third, sandbox, tasks, out_dir=tmp_path, log=logged.append,
                           **{"batch": 1, **other})  # fmt: skip


def test_a_chunk_killed_between_its_rows_is_judged_again_and_written_once(
    sandbox, tmp_path: Path
) -> None:
    """A kill after the first row of a two-task chunk: the chunk is judged again whole (its
    samples' seeds follow from the chunk), and the rows file then holds each task once (the
    kill-anywhere test found ``relu`` twice in it)."""
    tasks = [RELU, SILU]
    whole = evaluate_tasks(ScriptedPolicy(), sandbox, tasks, out_dir=tmp_path / "whole",
                           batch=2, log=lambda _: None)  # fmt: skip
    rows_file = tmp_path / "cut" / ROWS_FILE
    rows_file.parent.mkdir()
    (tmp_path / "cut" / "eval_config.json").write_text(
        (tmp_path / "whole" / "eval_config.json").read_text()
    )
    first = (tmp_path / "whole" / ROWS_FILE).read_text().splitlines()[0]
    rows_file.write_text(first + "\n")  # the kill fell after the chunk's first row
    again = ScriptedPolicy()
    result = evaluate_tasks(again, sandbox, tasks, out_dir=tmp_path / "cut", batch=2,
                            log=lambda _: None)  # fmt: skip
    assert again.asked == {"relu": 1, "silu": 1}  # the whole chunk, once
    lines = [json.loads(x)["task"] for x in rows_file.read_text().splitlines()]
    assert sorted(lines) == ["relu", "silu"]  # each task once
    steady = ("task", "correct", "samples", "samples_correct", "status")
    assert [{k: r[k] for k in steady} for r in result["per_task"]] == [
        {k: r[k] for k in steady} for r in whole["per_task"]
    ]


def test_parts_are_judged_in_chunks_and_a_unit_may_stop_before_one(sandbox, tmp_path: Path) -> None:
    """``parts`` order the tasks and bound each chunk (``batch`` within a part); ``unit`` wraps
    every chunk with work and may stop the evaluation before one: the chunks before it are
    written, and a rerun judges only the rest. ``part_samples`` gives a part its own count."""
    tasks = [RELU, SILU, ADD_MUL]
    parts = [("b", ["add_mul"]), ("a", ["relu", "silu"])]
    entered: list[tuple[str, list[str]]] = []

    class Stop(Exception):
        pass

    @contextlib.contextmanager
    def unit(label, chunk):
        if len(entered) == 2:
            raise Stop
        entered.append((label, [t.name for t in chunk]))
        yield

    policy = ScriptedPolicy()
    with pytest.raises(Stop):
        evaluate_tasks(policy, sandbox, tasks, out_dir=tmp_path, batch=1, parts=parts,
                       unit=unit, log=lambda _: None)  # fmt: skip
    assert entered == [("b", ["add_mul"]), ("a", ["relu"])]
    assert policy.asked == {"add_mul": 1, "relu": 1}
    entered.clear()
    again = ScriptedPolicy()
    result = evaluate_tasks(again, sandbox, tasks, out_dir=tmp_path, batch=1, parts=parts,
                            unit=unit, log=lambda _: None)  # fmt: skip
    assert entered == [("a", ["silu"])] and again.asked == {"silu": 1}
    assert [r["task"] for r in result["per_task"]] == ["relu", "silu", "add_mul"]
    counted = evaluate_tasks(ScriptedPolicy(), sandbox, tasks, out_dir=tmp_path / "counts",
                             parts=parts, part_samples={"b": 3, "z": 5}, log=lambda _: None)  # fmt: skip
    assert {r["task"]: r["samples"] for r in counted["per_task"]} == {
        "relu": 1, "silu": 1, "add_mul": 3,  # a part's own count; "z" names no part: ignored
    }  # fmt: skip
    assert sorted(counted["pass_at_k"]) == ["1"]  # pass@k up to the fewest samples
    with pytest.raises(ValueError, match="--set-samples names starter, which is not one of"):
        EvalOptions(tasks="heldout-ops+heldout-compositions", set_samples="starter=2")
    for wrong, said in (
        ([("a", ["relu", "silu"])], "in no part: add_mul"),
        ([("a", ["relu", "silu", "add_mul", "relu"])], "in two parts: relu"),
        ([("a", ["relu", "silu", "add_mul", "gelu"])], "not a task: gelu"),
    ):
        with pytest.raises(ValueError, match=said):
            evaluate_tasks(again, sandbox, tasks, parts=wrong, log=lambda _: None)


def test_a_chunk_cut_short_while_written_is_judged_again_whole_with_its_seed(
    sandbox, tmp_path: Path
) -> None:
    """A kill while a chunk's rows were being written leaves part of it done: the resumed
    evaluation judges that chunk again whole, and every chunk is cut and seeded as in an
    unkilled evaluation (the seed is the chunk's first task's), so a sampled evaluation gives
    the same answers whether it was killed or not."""
    tasks = [RELU, SILU, ADD_MUL]
    settings = dict(batch=2, temperature=0.7, seed=5, log=lambda _: None)
    whole = ScriptedPolicy()
    evaluate_tasks(whole, sandbox, tasks, out_dir=tmp_path / "whole", **settings)
    assert whole.seeds["relu"] == whole.seeds["silu"] != whole.seeds["add_mul"]
    cut = tmp_path / "cut"  # as a kill left it: the first chunk's first row only
    cut.mkdir()
    (cut / CONFIG_FILE).write_text((tmp_path / "whole" / CONFIG_FILE).read_text())
    rows = (tmp_path / "whole" / ROWS_FILE).read_text().splitlines()
    (cut / ROWS_FILE).write_text(next(x for x in rows if '"relu"' in x) + "\n")
    resumed = ScriptedPolicy()
    result = evaluate_tasks(resumed, sandbox, tasks, out_dir=cut, **settings)
    assert resumed.asked == {"relu": 1, "silu": 1, "add_mul": 1}
    assert resumed.seeds == whole.seeds
    assert [r["task"] for r in result["per_task"]] == ["relu", "silu", "add_mul"]


def test_a_policy_that_answers_nothing_is_an_error_and_records_nothing(
    sandbox, tmp_path: Path
) -> None:
    policy = ScriptedPolicy(fail_at="silu", fail=RuntimeError("the server went away"))
    with pytest.raises(EvaluationError, match="silu: RuntimeError: the server went away"):
        evaluate_tasks(policy, sandbox, [RELU, SILU], out_dir=tmp_path, log=lambda _: None)
    rows = (tmp_path / ROWS_FILE).read_text().splitlines()
    assert [json.loads(x)["task"] for x in rows] == ["relu"]  # silu is redone on a rerun


def test_the_tiny_local_model_and_a_trained_adapter(sandbox, tmp_path: Path) -> None:
    from cuda_agent.policy import Policy, PolicyConfig

    model = save_tiny_model(tmp_path / "tiny")
    policy = Policy.load(PolicyConfig(model=str(model), device="cpu"))
    result = evaluate_tasks(policy, sandbox, [RELU, SILU], max_new_tokens=16, log=lambda _: None)
    assert result["tasks"] == 2 and result["pass_rate"] == 0.0  # a random model writes no code
    assert all(r["status"] == "malformed" and r["turns"] == 1 for r in result["per_task"])
    # The adapter of a run directory, through the CLI (its base model from policy_config.json).
    policy.save(tmp_path / "run" / "adapter")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "19_ReLU.py").write_text(KERNELBENCH_STYLE)
    out = tmp_path / "out"
    done = _cli("--adapter", str(tmp_path / "run"), "--tasks", str(tmp_path / "tasks"),
                "--max-new-tokens", "8", "--backend", "cpu", "--device", "cpu",
                "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    saved = json.loads((out / "eval.json").read_text())
    assert [r["task"] for r in saved["per_task"]] == ["19_ReLU"]
    assert str(model) in saved["config"]["model"] and "adapter" in saved["config"]["model"]
    assert re.search(r"pass@1 +0\.0% \[0\.0%, 0\.0%\]", done.stdout)  # the closing table
    assert (out / "eval.md").exists() and (out / "report.html").exists()
    assert (out / "jobs.jsonl").is_file()  # the sandbox's job log (no answer reached it here)


def test_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    from cuda_agent.policy import testing

    missing = testing.missing_serving_extras()
    if missing:
        pytest.skip(f"transformers serving extras not installed: {', '.join(missing)}")
    (tmp_path / "tasks").mkdir()
    for name in ("19_ReLU", "20_ReLU_again"):
        (tmp_path / "tasks" / f"{name}.py").write_text(KERNELBENCH_STYLE)
    out = tmp_path / "out"
    with testing.serve_tiny_model(tmp_path / "server") as (base_url, model_id, _):
        done = _cli("--endpoint", base_url, "--tasks", str(tmp_path / "tasks"), "--turns", "2",
                    "--max-new-tokens", "8", "--backend", "cpu", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    saved = json.loads((out / "eval.json").read_text())
    assert saved["config"]["model"] == model_id and saved["tasks"] == 2
    assert [r["task"] for r in saved["per_task"]] == ["19_ReLU", "20_ReLU_again"]
    assert all(r["status"] == "malformed" for r in saved["per_task"])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(["eval", "--quiet", *args], timeout=HANG_S)  # a process of its own


def test_a_missing_task_directory_exits_2_with_one_line(tmp_path: Path) -> None:
    done = _cli("--tasks", str(tmp_path / "nope"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith(
        f"cuda-agent: no task file or directory {tmp_path / 'nope'} (or name a set: all, builtin"
    )


def test_other_mistakes_exit_2_with_a_clear_message(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("CUDA_AGENT_KERNELBENCH", raising=False)
    broken = tmp_path / "broken.py"
    broken.write_text("class Model(:\n")
    (tmp_path / "empty-run").mkdir()
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cases = [
        (["--tasks", str(broken)], "not valid Python"),
        (
            ["--tasks", "builtin", "--adapter", str(tmp_path / "empty-run")],
            "holds no trained weights",
        ),
        (["--tasks", "builtin", "--endpoint", f"http://127.0.0.1:{port}/v1"], f"{port}"),
        (["--tasks", "builtin", "--backend", "tpu"], "--backend must be"),
        (["--tasks", "builtin", "--sizes", "tiny"], "--sizes must be full or small"),
        (["--tasks", "builtin", "--micro-batches", "-1"], "--micro-batches must be 0 (auto)"),
        (["--tasks", "kernelbench-l1-subset"], "pass --kernelbench DIR or set CUDA_AGENT_KERNELB"),
        (["--tasks", "kernelbench-l1-subset", "--kernelbench", str(tmp_path)], "no KernelBench"),
    ]
    for args, message in cases:
        assert main(["eval", "--quiet", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("cuda-agent: ") and message in err and err.count("\n") == 1, err


def test_small_sizes_evaluate_the_heldout_compositions_as_training_evaluates_them() -> None:
    """``--sizes small``: the held-out compositions at their manifest's ``small_sizes`` (the
    tasks ``cuda-agent train --eval-sizes small`` evaluates), built-in tasks as they are."""
    spec = "heldout-compositions:3+heldout-ops:2"
    full = tasks_of(EvalOptions(tasks=spec))
    small = tasks_of(EvalOptions(tasks=spec, sizes="small"))
    train = TrainConfig(tasks="compact", eval_tasks=spec, eval_sizes="small")
    assert small == task_sets(train)[1]
    assert [t.name for t in small] == [t.name for t in full]
    pairs = zip(small[:3], full[:3], strict=True)
    assert all(t.sizes["BATCH"] < f.sizes["BATCH"] for t, f in pairs)
    assert small[3:] == full[3:]
