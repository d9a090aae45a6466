"""The evaluation sets (issue 29) never meet a training set: the held-out compositions share no
operator combination (family) with, and are less than 0.9 similar to, every task of every
training set; each named set loads where the trainer and ``cuda-agent eval`` take it, and
``kernelbench-l1-subset`` says how to get the checkout it needs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent.data import TaskSet, family_of, load_embedded
from cuda_agent.data.similarity import SimilarityIndex
from cuda_agent.kernel_sandbox import TaskError
from cuda_agent.runner.config import TrainConfig, read_toml
from cuda_agent.runner.eval.command import eval_tasks_from
from cuda_agent.runner.kernelbench_subset import ENV, L1_SUBSET, load_l1_subset
from cuda_agent.runner.task_sets import HELDOUT, TRAINING_SETS, heldout_guard, load_set, task_sets

HELDOUT_COMPOSITIONS = load_embedded("heldout_compositions")
HELDOUT_AXES = load_embedded("heldout_axis_compositions")
# each shipped held-out composition set and the training set it was drawn beside
HELDOUT_SETS = {"heldout-compositions": HELDOUT_COMPOSITIONS, "heldout-axes": HELDOUT_AXES}


def _families(name: str) -> set[str]:
    """The data package's families of a training set (from the manifest's operators where the
    set has one, else from the torch calls of the source)."""
    if name.startswith("synth"):  # synth, synth-variants, synth-axes: their manifest rows
        names = {t.name for t in load_set(name)}
        embedded = ("cpu_compositions", "axis_compositions")
        entries = [e for set_name in embedded for e in load_embedded(set_name).entries]
        found = {e.family for e in entries if e.name in names}
        assert len({e.name for e in entries if e.name in names}) == len(names), name
        return found
    return {family_of(t) for t in load_set(name)}


def test_there_are_enough_to_resolve_a_change_and_each_can_be_checked() -> None:
    assert len(HELDOUT_COMPOSITIONS) >= 64
    assert len(HELDOUT_COMPOSITIONS.families()) >= 64  # distinct combinations (87 of 96)
    for task in HELDOUT_COMPOSITIONS:
        assert {"cpu"} <= set(task.solutions) and "cuda" in task.compact_solutions, task.name
    counts = [len(e.metadata["ops"]) for e in HELDOUT_COMPOSITIONS.entries]
    assert set(counts) <= {1, 2, 3} and counts.count(2) > len(counts) / 2  # mostly pairs


def test_the_axis_set_can_resolve_a_change_too() -> None:
    assert len(HELDOUT_AXES) >= 48 and len(HELDOUT_AXES.families()) >= 40
    for task in HELDOUT_AXES:
        assert {"cpu"} <= set(task.solutions) and "cuda" in task.compact_solutions, task.name


@pytest.mark.parametrize("heldout", HELDOUT_SETS)
@pytest.mark.parametrize("training", TRAINING_SETS)
def test_no_training_set_meets_a_heldout_composition_set_by_family(
    training: str, heldout: str
) -> None:
    shared = {e.family for e in HELDOUT_SETS[heldout].entries} & _families(training)
    assert not shared, f"{training} trains on the families {sorted(shared)} of {heldout}"


@pytest.mark.parametrize("heldout", HELDOUT_SETS)
def test_no_training_task_is_as_similar_as_the_decontamination_threshold(heldout: str) -> None:
    training = {t.name: t.source for name in TRAINING_SETS for t in load_set(name)}
    index = SimilarityIndex.build(training)
    worst = max(
        (index.nearest(t)[1], t.name, index.nearest(t)[0]) for t in HELDOUT_SETS[heldout]
    )  # fmt: skip
    assert worst[0] < 0.9, worst


def test_a_named_set_and_a_count_is_its_first_tasks_in_order() -> None:
    first = load_set("heldout-compositions:6")
    assert [t.name for t in first] == [t.name for t in HELDOUT_COMPOSITIONS.tasks()[:6]]
    both = eval_tasks_from("heldout-ops+heldout-compositions:2")
    assert [t.name for t in both] == [
        *(t.name for t in load_set("heldout-ops")),
        *(t.name for t in first[:2]),
    ]
    for bad in ("heldout-ops:0", "heldout-ops:two"):
        with pytest.raises(ValueError, match="first N tasks"):
            load_set(bad)


def test_the_named_sets_load_where_train_and_eval_take_them() -> None:
    ops = load_set("heldout-ops")
    assert sorted(t.name for t in ops) == sorted(HELDOUT)
    _, heldout = task_sets(TrainConfig())  # the default: heldout-ops
    assert [t.name for t in heldout] == [t.name for t in ops]
    train, heldout = task_sets(TrainConfig(**{**read_toml("h200"),
                                              "eval_tasks": "heldout-compositions"}))  # fmt: skip
    assert [t.name for t in heldout] == list(HELDOUT_COMPOSITIONS.names) and len(train) == 216
    both = eval_tasks_from("heldout-ops+heldout-compositions")
    assert len(both) == len(ops) + len(HELDOUT_COMPOSITIONS)


def test_synthesized_training_sets_stay_clear_of_every_shipped_evaluation_set() -> None:
    families, sources = heldout_guard()
    assert {e.family for e in HELDOUT_COMPOSITIONS.entries} <= families
    assert {e.family for e in HELDOUT_AXES.entries} <= families
    assert set(HELDOUT_AXES.names) <= set(sources)
    # a held-out set made again (make_axis_compositions.py --heldout) is not kept clear of itself
    families, sources = heldout_guard(leave_out=["heldout_axis_compositions"])
    assert not set(HELDOUT_AXES.names) & set(sources)
    assert set(HELDOUT_COMPOSITIONS.names) <= set(sources)
    assert {"elu", "leaky_relu", "tanh", "hardswish", "amax", "mean"} <= families
    assert set(HELDOUT_COMPOSITIONS.names) | set(HELDOUT) <= set(sources)


def test_kernelbench_l1_subset_without_a_checkout_names_the_fix(monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(TaskError, match=f"pass --kernelbench DIR or set {ENV}=DIR"):
        load_set("kernelbench-l1-subset")
    with pytest.raises(TaskError, match=f"pass --kernelbench DIR or set {ENV}=DIR"):
        task_sets(TrainConfig(eval_tasks="kernelbench-l1-subset"))


def test_kernelbench_l1_subset_from_a_checkout_missing_a_problem(tmp_path: Path) -> None:
    level1 = tmp_path / "KernelBench" / "level1"
    level1.mkdir(parents=True)
    (level1 / "19_ReLU.py").write_text(
        "import torch\nfrom torch import nn\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x)\n\n"
        "def get_inputs():\n    return [torch.rand(4, 4)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    with pytest.raises(TaskError, match=r"lacks level-1 problems .*level1/20_LeakyReLU\.py"):
        load_l1_subset(str(tmp_path))


@pytest.mark.skipif(not os.environ.get(ENV), reason=f"no KernelBench checkout: set {ENV}")
def test_kernelbench_l1_subset_loads_at_kernelbenchs_own_sizes() -> None:
    tasks = load_set("kernelbench-l1-subset")
    assert [t.name for t in tasks] == [f"L1_{stem}" for stem in L1_SUBSET]
    raw = Path(os.environ[ENV])
    level1 = next(p for p in (raw / "KernelBench" / "level1", raw / "level1", raw) if p.is_dir())
    for task, stem in zip(tasks, L1_SUBSET, strict=True):
        assert task.source == (level1 / f"{stem}.py").read_text()  # as it is, sizes and all
    assert isinstance(TaskSet.from_tasks(tasks), TaskSet)
