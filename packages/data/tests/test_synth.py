"""synthesize: kept tasks load, are deterministic and pass the filters they were kept by; the
manifest accounts for every candidate; a killed run resumes without losing or repeating one."""

from __future__ import annotations

import json
import random

import pytest

from cuda_agent.data import WINDOWS, compose, cpu_solution, load_embedded, run_filters, synthesize
from cuda_agent.data.synth import MANIFEST
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig, load_tasks, task_from_source


def _rows(directory):
    return [json.loads(line) for line in (directory / MANIFEST).read_text().splitlines()]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    report = synthesize(out, count=4, backend="cpu", seed=5, workers=2, max_ops=3)
    return out, report


def test_kept_tasks_are_written_and_every_candidate_is_in_the_manifest(made):
    out, report = made
    rows = _rows(out)
    assert report.kept == 4 and report.candidates == len(rows)
    assert [r["index"] for r in rows] == list(range(len(rows)))  # each candidate once, in order
    kept = [r for r in rows if r["kept"]]
    assert len(kept) == 4
    assert sorted(t.name for t in load_tasks(out)) == sorted(r["name"] for r in kept)
    for row in rows:
        assert row["kept"] == (row["dropped_by"] is None)
        assert row["n_ops"] == len(row["ops"]) <= 3
        if row["kept"]:
            low, high = WINDOWS["cpu"]
            assert low <= row["eager_ms"] <= high and row["compile_ms"] > 0
    summary = json.loads((out / "synth_report.json").read_text())
    assert summary["kept"] == 4 and sum(summary["op_counts"].values()) == 4
    first = next(iter(summary["filters"].values()))
    assert first["in"] == len(rows)


def test_kept_tasks_are_deterministic_and_pass_their_filters_again(made):
    out, _ = made
    rows = [r for r in _rows(out) if r["kept"]]
    for row in rows:
        again = compose(random.Random(f"5:{row['index']}"), row["index"], 3)
        assert (out / row["name"] / "task.py").read_text() == again.source
    tasks = [t for t in load_tasks(out)]
    # The eager time was inside the window when kept (checked above); timed again here, on a
    # machine the rest of the suite may be loading, it need not be (a 10 ms bound measured 15
    # ms in CI). Every other filter must keep the task again; the window is not re-judged.
    verdicts = run_filters(tasks, "cpu", (0.0, float("inf")), workers=1)
    assert all(v.kept for v in verdicts), [(v.task, v.dropped_by, v.reason) for v in verdicts]
    assert all(v.eager_ms is not None and v.eager_ms > 0 for v in verdicts)


def test_a_killed_run_resumes_without_losing_or_repeating_a_candidate(made, tmp_path):
    out, _ = made
    rows = _rows(out)
    cut = len(rows) // 2
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    # the manifest as a kill left it: the first rows whole, the next one cut mid-line
    text = "".join(json.dumps(r) + "\n" for r in rows[:cut]) + json.dumps(rows[cut])[:20]
    (resumed / MANIFEST).write_text(text)
    for row in rows[:cut]:
        if row["kept"]:
            (resumed / row["name"]).mkdir()
            (resumed / row["name"] / "task.py").write_text(
                (out / row["name"] / "task.py").read_text()
            )
    report = synthesize(resumed, count=4, backend="cpu", seed=5, workers=2, max_ops=3)
    again = _rows(resumed)
    assert [r["index"] for r in again] == list(range(len(again)))
    assert report.kept == 4
    # the same candidates get the same verdicts (the window filter can move with timing noise)
    for a, b in zip(rows, again, strict=False):
        assert a["name"] == b["name"]
        if a["dropped_by"] not in ("window", "surplus") and b["dropped_by"] not in (
            "window",
            "surplus",
        ):
            assert a["dropped_by"] == b["dropped_by"]


def test_filters_drop_what_they_name():
    template = """
import torch
from torch import nn

N = 4096


class Model(nn.Module):
    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
"""
    cases = {
        "ok": "torch.relu(x)",
        "nan": "torch.log(x)",
        "noise": "x + torch.rand_like(x)",
        "zero": "x * 0",
    }
    tasks = [task_from_source(template.format(body=b), name=n) for n, b in cases.items()]
    verdicts = {v.task: v for v in run_filters(tasks, "cpu", (0.0, 1e9), workers=2)}
    assert verdicts["ok"].kept and verdicts["ok"].eager_ms is not None
    assert verdicts["nan"].dropped_by == "non_finite"
    assert verdicts["noise"].dropped_by == "nondeterministic"
    assert verdicts["zero"].dropped_by == "trivial"
    narrow = run_filters(tasks[:1], "cpu", (1e6, 1e7), workers=1)[0]
    assert narrow.dropped_by == "window" and "outside" in narrow.reason


def test_a_wrong_reference_solution_is_dropped():
    comp = compose(random.Random(3), 0, teachable=True)
    assert comp.ops == ("exp", "hardswish")
    wrong = (
        cpu_solution(comp)
        .replace("out[i] = v;", "out[i] = v + 1.f;")
        .replace("out[r] = v;", "out[r] = v + 1.f;")
    )
    task = comp.to_task()
    [good] = run_filters([task], "cpu", (0.0, 1e9), {task.name: cpu_solution(comp)}, workers=1)
    [bad] = run_filters([task], "cpu", (0.0, 1e9), {task.name: wrong}, workers=1)
    assert good.kept and good.solution_ok is True
    assert bad.dropped_by == "solution" and bad.solution_ok is False


def test_bad_arguments_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="backend"):
        synthesize(tmp_path, count=1, backend="tpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="count"):
        synthesize(tmp_path, count=0)
    with pytest.raises(ValueError, match="teachable"):
        synthesize(tmp_path, count=1, axes=True)
    with pytest.raises(ValueError, match="workers"):
        run_filters([], "cpu", workers=0)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("cpu_compositions", 200),
        ("heldout_compositions", 96),
        ("axis_compositions", 120),
        ("heldout_axis_compositions", 48),
    ],
)
def test_embedded_compositions_solutions_pass_the_sandbox(name, size):
    """A sample of each shipped set: tasks load with their metadata, solutions are correct."""
    embedded = load_embedded(name)
    assert len(embedded) == size
    sample = random.Random(0).sample(embedded.tasks(), 8)
    with Sandbox(SandboxConfig(backend="cpu")) as box:
        for task in sample:
            assert box.evaluate(task, task.solutions["cpu"], measure_time=False).correct, task.name
    assert all(e.family for e in embedded.entries)


def test_a_synth_directory_loads_as_a_task_set_with_its_metadata(made):
    from cuda_agent.data import TaskSet

    out, _ = made
    tasks = TaskSet.from_dir(out)  # the manifest's dropped candidates are not tasks
    assert len(tasks) == 4
    for entry in tasks.entries:
        assert entry.metadata["source"] == "synthesized" and entry.metadata["kept"] is True
        assert entry.family == "+".join(sorted(set(entry.metadata["ops"])))
