"""The training and held-out task sets of a run never meet."""

import shutil
from importlib import resources
from pathlib import Path

import pytest

from cuda_agent.data import load_embedded
from cuda_agent.kernel_sandbox import builtin_tasks
from cuda_agent.runner.config import TrainConfig
from cuda_agent.runner.task_sets import HELDOUT, TaskSetError, task_sets


def test_the_default_split_holds_out_tasks_the_starter_suite_lacks():
    train, heldout = task_sets(TrainConfig())
    assert [t.name for t in heldout] == sorted(HELDOUT)
    assert not {t.name for t in train} & set(HELDOUT) and len(train) == 9
    train, heldout = task_sets(TrainConfig(tasks="builtin"))
    assert len(train) == 40 - len(HELDOUT) and len(heldout) == len(HELDOUT)
    assert not {t.source for t in train} & {t.source for t in heldout}
    _, few = task_sets(TrainConfig(eval_limit=2))
    assert len(few) == 2


def test_sets_that_meet_are_refused_by_name_or_by_source(tmp_path: Path):
    builtin = Path(str(resources.files("cuda_agent.kernel_sandbox") / "builtin"))
    shutil.copytree(builtin / "relu", tmp_path / "mine" / "relu")
    with pytest.raises(TaskSetError, match="must not meet; in both: relu"):
        task_sets(TrainConfig(tasks="starter", eval_tasks=str(tmp_path / "mine")))
    # the same problem under another name is the same task
    shutil.copytree(builtin / "relu", tmp_path / "renamed" / "my_relu")
    with pytest.raises(TaskSetError, match="relu"):
        task_sets(TrainConfig(tasks="starter", eval_tasks=str(tmp_path / "renamed")))
    # a directory of the user's with no held-out set: nothing held out
    train, heldout = task_sets(TrainConfig(tasks=str(tmp_path / "mine")))
    assert [t.name for t in train] == ["relu"] and heldout == []


def test_the_shipped_compositions_train_beside_the_starter_suite_and_never_meet_heldout():
    from cuda_agent.data import family_of, load_embedded, similarity
    from cuda_agent.runner.task_sets import heldout_guard

    train, heldout = task_sets(TrainConfig(tasks="starter+synth"))
    assert len(train) == 9 + 200 and [t.name for t in heldout] == sorted(HELDOUT)
    assert all("cpu" in t.solutions for t in train)  # every one can be taught
    families, sources = heldout_guard()
    assert {"elu", "leaky_relu", "tanh", "hardswish", "amax", "mean"} <= families
    embedded = load_embedded()
    assert not {family_of(e.task, e.metadata) for e in embedded.entries} & families
    worst = max(similarity(t.source, s) for t in embedded.tasks()[:50] for s in sources.values())
    assert worst < 0.9


def test_the_compact_set_is_the_starter_suite_and_more_short_kernels_never_heldout():
    from cuda_agent.runner.budget import warmstart_solution

    train, heldout = task_sets(TrainConfig(tasks="compact"))
    names = {t.name for t in train}
    starter, _ = task_sets(TrainConfig())
    assert {t.name for t in starter} < names and {"mish", "scale_tanh_add"} <= names
    assert not names & set(HELDOUT) and [t.name for t in heldout] == sorted(HELDOUT)
    for t in train:  # what the warm start teaches on the GPU is the short form
        assert warmstart_solution(t, "cuda", "compact") == t.compact_solutions["cuda"]


def test_the_h200_preset_teaches_every_training_task_a_compact_cuda_kernel_and_holds_out_six():
    from cuda_agent.runner.budget import warmstart_solution
    from cuda_agent.runner.config import read_toml

    config = TrainConfig(**read_toml("h200"))
    train, heldout = task_sets(config)
    assert len(train) == 16 + 200 and [t.name for t in heldout] == sorted(HELDOUT)
    assert not {t.source for t in train} & {t.source for t in heldout}
    for t in train:
        assert warmstart_solution(t, "cuda", "compact") == t.compact_solutions["cuda"], t.name


def test_the_cpu_default_evaluates_a_fixed_subset_of_both_heldout_sets():
    from cuda_agent.data import load_embedded
    from cuda_agent.runner.config import read_toml

    train, heldout = task_sets(TrainConfig(**read_toml("cpu-default")))
    compositions = [t.name for t in load_embedded("heldout_compositions").tasks()[:6]]
    assert [t.name for t in heldout] == [*sorted(HELDOUT), *compositions]
    assert not {t.source for t in train} & {t.source for t in heldout}


def test_the_parts_of_a_joined_held_out_set_are_named_with_their_tasks():
    from cuda_agent.runner.task_sets import named_parts

    parts = named_parts("heldout-ops+heldout-compositions:3")
    assert list(parts) == ["heldout-ops", "heldout-compositions:3"]
    assert sorted(parts["heldout-ops"]) == sorted(HELDOUT)
    assert len(parts["heldout-compositions:3"]) == 3
    assert named_parts("heldout-ops") == {}  # one set: nothing to show apart


def test_small_training_sizes_shrink_the_compositions_batch_and_never_the_heldout_tasks(
    tmp_path: Path,
):
    """``train_sizes = "small"``: each shipped composition at its manifest's smaller batch (a
    fifth of it, typically), a user's task at its ``SMALL_SIZES``, every other task as it is;
    the held-out tasks at their own sizes."""
    flags = {"eval_tasks": "heldout-compositions:4+heldout-ops"}
    full, heldout = task_sets(TrainConfig(tasks="compact+synth", **flags))
    small, heldout_small = task_sets(
        TrainConfig(tasks="compact+synth", train_sizes="small", **flags)
    )
    assert [t.name for t in small] == [t.name for t in full]
    assert [t.source for t in heldout_small] == [t.source for t in heldout]
    manifest = {e.name: e.metadata for e in load_embedded("cpu_compositions").entries}
    for before, after in zip(full, small, strict=True):
        if before.name in manifest:
            assert after.sizes == {**before.sizes, **manifest[before.name]["small_sizes"]}
            assert after.sizes["BATCH"] < before.sizes["BATCH"]
            assert after.cpu_sizes == before.cpu_sizes
        else:  # the built-in tasks are small already
            assert after == before
    relu = next(t for t in builtin_tasks() if t.name == "relu")
    (tmp_path / "relu.py").write_text(relu.source + 'SMALL_SIZES = {"BATCH": 512}\n')
    (tmp_path / "tanh_like.py").write_text(relu.source.replace("relu", "tanh"))
    mine, _ = task_sets(TrainConfig(tasks=str(tmp_path), train_sizes="small"))
    assert [t.sizes["BATCH"] for t in mine] == [512, 4096]
    with pytest.raises(ValueError, match="--train-sizes must be one of full, small"):
        TrainConfig(train_sizes="tiny")  # type: ignore[arg-type]


def test_small_eval_sizes_shrink_the_heldout_compositions_and_keep_the_rest():
    """``eval_sizes = "small"``: each held-out composition at its manifest's ``small_sizes``
    (made by the training compositions' rule: every one of the 96 has them, and they are
    smaller), the built-in held-out tasks as they are; the training tasks untouched."""
    flags = {"tasks": "compact", "eval_tasks": "heldout-compositions+heldout-ops"}
    train, full = task_sets(TrainConfig(**flags))
    train_small, small = task_sets(TrainConfig(eval_sizes="small", **flags))
    assert train_small == train
    assert [t.name for t in small] == [t.name for t in full]
    manifest = {e.name: e.metadata for e in load_embedded("heldout_compositions").entries}
    assert len(manifest) == 96 and all(m["small_sizes"] for m in manifest.values())
    for before, after in zip(full, small, strict=True):
        if before.name in manifest:
            assert after.sizes == {**before.sizes, **manifest[before.name]["small_sizes"]}
            assert after.sizes["BATCH"] < before.sizes["BATCH"]
        else:
            assert after == before
    with pytest.raises(ValueError, match="--eval-sizes must be one of full, small"):
        TrainConfig(eval_sizes="tiny")  # type: ignore[arg-type]


def test_compact_plus_variants_teaches_each_reductions_two_layouts_as_two_examples():
    """``--warmstart-solutions compact+variants``: a training composition with a reduction is
    taught its block-per-row compact kernel and its warp-per-row variant, each as an example
    of the same prompt; every other task its compact kernel alone, as ``compact`` does."""
    from types import SimpleNamespace

    from cuda_agent.policy import testing
    from cuda_agent.runner.budget import warmstart_examples, warmstart_solutions
    from cuda_agent.runner.config import read_toml
    from cuda_agent.runner.task_sets import load_set

    config = TrainConfig(**{**read_toml("h200"), "warmstart_solutions": "compact+variants"})
    train, _ = task_sets(config)
    taught = {t.name: warmstart_solutions(t, "cuda", config.warmstart_solutions) for t in train}
    two = {n for n, s in taught.items() if len(s) == 2}
    assert len(two) == 47 and all(len(s) == 1 for n, s in taught.items() if n not in two)
    for t in train:
        variants = t.variant_solutions.get("cuda", {})
        assert taught[t.name] == [t.compact_solutions["cuda"], *variants.values()], t.name
        assert warmstart_solutions(t, "cuda", "compact") == [t.compact_solutions["cuda"]]
    policy = SimpleNamespace(tokenizer=testing.tiny_tokenizer())
    reducing = [t for t in train if t.name in two][:2] + [t for t in train if t.name not in two][:1]
    examples = warmstart_examples(policy, reducing, "cuda", "compact+variants")
    assert [e.task for e in examples] == [reducing[0].name] * 2 + [reducing[1].name] * 2 + [
        reducing[2].name
    ]
    assert examples[0].prompt_ids == examples[1].prompt_ids
    assert examples[0].response_ids != examples[1].response_ids
    # the named set of the tasks with a choice: RL from such a warm start trains on these
    assert [t.name for t in load_set("synth-variants")] == sorted(two)


def test_eval_set_samples_name_sets_of_eval_tasks_with_a_positive_count() -> None:
    config = TrainConfig(
        eval_tasks="heldout-compositions:32+kernelbench-l1-subset",
        eval_set_samples="kernelbench-l1-subset=1",
    )
    assert config.set_samples() == {"kernelbench-l1-subset": 1}
    assert TrainConfig(eval_tasks="heldout-ops").set_samples() == {}
    for wrong, said in (
        ("kernelbench-l1-subset", "takes SET=N"),
        ("kernelbench-l1-subset=0", "takes SET=N"),
        ("kernelbench-l1-subset=x", "takes SET=N"),
        ("heldout-ops=2", "not one of the '\\+'-joined sets"),
        ("kernelbench-l1-subset=1,kernelbench-l1-subset=2", "twice"),
    ):
        with pytest.raises(ValueError, match=said):
            TrainConfig(
                eval_tasks="heldout-compositions:32+kernelbench-l1-subset", eval_set_samples=wrong
            )
    # an evaluation of one set judges it as one unlabelled part: its own count would be unused
    with pytest.raises(ValueError, match="only set: give its samples as the evaluation's"):
        TrainConfig(eval_tasks="heldout-ops", eval_set_samples="heldout-ops=3")


def test_the_axis_sets_shrink_at_small_sizes_too():
    """``synth-axes`` and ``heldout-axes`` at their manifests' ``small_sizes`` (the same rule as
    the other compositions'): at full size their inputs fill gigabytes on the GPU."""
    flags = {"tasks": "synth-axes", "eval_tasks": "heldout-axes"}
    full = task_sets(TrainConfig(**flags))
    small = task_sets(TrainConfig(train_sizes="small", eval_sizes="small", **flags))
    for name, before_set, after_set in zip(
        ("axis_compositions", "heldout_axis_compositions"), full, small, strict=True
    ):
        manifest = {e.name: e.metadata["small_sizes"] for e in load_embedded(name).entries}
        assert [t.name for t in before_set] == [t.name for t in after_set] == list(manifest)
        shrunk = 0
        for before, after in zip(before_set, after_set, strict=True):
            assert after.sizes == {**before.sizes, **manifest[before.name]}, before.name
            shrunk += after.sizes["BATCH"] < before.sizes["BATCH"]
        assert shrunk >= 0.9 * len(manifest), name
