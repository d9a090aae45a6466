"""The reference solutions written for synthesized chains: the embedded set's files are what
``cpu_solution`` and ``cuda_solution`` write for its compositions (regenerated from the seeds
that made them), the CUDA ones pass the sandbox's static checks, and on a GPU they are correct."""

from __future__ import annotations

import json
import random
from importlib import resources
from pathlib import Path

import pytest
import torch

from cuda_agent.data import compose, cpu_solution, load_embedded
from cuda_agent.data.catalogue import catalogue
from cuda_agent.data.loaders import EMBEDDED
from cuda_agent.data.sizing import MACHINES, SMALL_MS, estimate_ms
from cuda_agent.data.solutions import cuda_solution, has_reduction
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig
from cuda_agent.kernel_sandbox.static_checks import check_candidate_source

ROOT = Path(str(resources.files("cuda_agent.data") / "embedded" / "cpu_compositions"))


def _compositions():
    rows = [json.loads(line) for line in (ROOT / "manifest.jsonl").read_text().splitlines()]
    # `cuda-agent synth --seed 1 --max-ops 3 --teachable` drew candidate i under Random("1:i")
    return [compose(random.Random(f"1:{r['index']}"), r["index"], 3, teachable=True)
            for r in rows if r["kept"]]  # fmt: skip


def test_the_manifests_small_sizes_are_the_compositions_and_a_fraction_of_their_batch():
    """``small_sizes`` (the trainer's ``--train-sizes small``): the batch at which the time
    model says ``SMALL_MS`` on the GPU, below the module's, the other sizes unchanged."""
    rows = {
        r["name"]: r for r in map(json.loads, (ROOT / "manifest.jsonl").read_text().splitlines())
    }
    for c in _compositions():
        small = rows[c.name]["small_sizes"]
        assert small == c.small_sizes and set(small) == {"BATCH"}, c.name
        assert small["BATCH"] < c.sizes["BATCH"], c.name
        at_small = estimate_ms(MACHINES["cuda"], c.steps, c.inputs, {**c.sizes, **small})
        assert at_small == pytest.approx(SMALL_MS, rel=0.05), c.name
        assert c.to_task().resized(small).sizes == {**c.sizes, **small}


def test_the_shipped_solutions_are_what_the_writers_write_for_their_compositions():
    compositions = _compositions()
    assert len(compositions) == 200
    for c in compositions:
        assert cpu_solution(c) == (ROOT / c.name / "solution_cpu.py").read_text(), c.name
        cuda = (ROOT / c.name / "solution_cuda_compact.py").read_text()
        assert cuda_solution(c) == cuda, c.name
        assert check_candidate_source(cuda) == [], c.name


def test_the_heldout_compositions_are_the_generators_with_the_writers_solutions():
    """Seed 2 (``scripts/make_heldout_compositions.py``): the same generator as the training
    compositions; every file is what the writers write. Their CUDA solutions pass the static
    checks here; they have not been run on a GPU."""
    root = ROOT.parent / "heldout_compositions"
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    assert len(rows) >= 64 and all(r["kept"] and r["solution"] for r in rows)
    for r in rows:
        c = compose(random.Random(f"2:{r['index']}"), r["index"], 3, teachable=True)
        assert c.name == r["name"] and c.family == r["family"]
        assert c.source == (root / c.name / "task.py").read_text(), c.name
        # ``--eval-sizes small``: the training compositions' rule (``Composition.small_sizes``)
        assert r["small_sizes"] == c.small_sizes and c.small_sizes["BATCH"] < c.sizes["BATCH"]
        assert cpu_solution(c) == (root / c.name / "solution_cpu.py").read_text(), c.name
        cuda = (root / c.name / "solution_cuda_compact.py").read_text()
        assert cuda_solution(c) == cuda and check_candidate_source(cuda) == [], c.name


@pytest.mark.parametrize(
    ("name", "seed", "count"), [("axis_compositions", 3, 120), ("heldout_axis_compositions", 4, 48)]
)
def test_the_axis_compositions_are_the_generators_with_the_writers_solutions(name, seed, count):
    """Seeds 3 and 4 (``scripts/make_axis_compositions.py``, ``--heldout``):
    ``compose(axes=True)``'s draws, each composing its axis op with another operator; every
    file is what the writers write (a warp variant for a last-axis reduction only), the CUDA
    ones pass the static checks, and many reduce or normalise a middle axis, as KernelBench's
    level-1 reductions do."""
    root = ROOT.parent / name
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    assert len(rows) == count and all(r["kept"] and r["solution"] for r in rows)
    axis_ops = {n for n, op in catalogue().items() if op.axis}
    middle, ops = 0, set()
    for r in rows:
        c = compose(random.Random(f"{seed}:{r['index']}"), r["index"], 3, teachable=True, axes=True)
        assert c.name == r["name"] and c.source == (root / c.name / "task.py").read_text()
        assert len(c.ops) >= 2 and len(set(c.ops) & axis_ops) == 1, c.name
        assert cpu_solution(c) == (root / c.name / "solution_cpu.py").read_text(), c.name
        cuda = (root / c.name / "solution_cuda_compact.py").read_text()
        assert cuda_solution(c) == cuda and check_candidate_source(cuda) == [], c.name
        warp = root / c.name / "solution_cuda_warp.py"
        assert warp.exists() == has_reduction(c), c.name
        if has_reduction(c):
            assert warp.read_text() == cuda_solution(c, "warp"), c.name
        [axis] = [s.axis for s in c.steps if s.axis is not None]
        middle += axis < len(c.inputs[0][1]) - 1
        ops.update(set(c.ops) & axis_ops)
    assert middle >= count / 3  # a third on a middle axis at least
    # the training set has every axis op; the held-out one (48 draws) all but one or two
    assert ops == axis_ops if name == "axis_compositions" else len(ops) >= len(axis_ops) - 2


def test_a_reduction_is_a_block_per_row_and_mixes_no_float_into_double_calls():
    """NVRTC has no fmax(double, float): a max or min accumulates (double)v (the H200 rejected
    all 7 amax/amin kernels of the first run with 'more than one instance of overloaded
    function')."""
    reductions = {n for n, op in catalogue().items() if op.reduce is not None}
    seen = set()
    for c in _compositions():
        reduced = [s.op for s in c.steps if s.op in reductions]
        if not reduced:
            continue
        seen.add(reduced[0])
        source = cuda_solution(c)
        assert "__shared__ double part[256];" in source and "grid=(x.numel() // cols,)" in source
        for call in ("fmax(acc, v)", "fmin(acc, v)"):
            assert call not in source, c.name
    assert {"amax", "amin", "sum", "mean"} <= seen


def test_each_reduction_ships_its_warp_variant_and_the_loaded_task_carries_it():
    """``scripts/write_variant_solutions.py``: a chain with a reduction has a warp-per-row
    variant beside its block-per-row compact solution (a second known-good layout for the warm
    start to teach); a chain without one has none, and the writer refuses to make one."""
    tasks = {t.name: t for t in load_embedded("cpu_compositions").tasks()}
    with_variant = 0
    for c in _compositions():
        shipped = tasks[c.name].variant_solutions.get("cuda", {})
        if not has_reduction(c):
            assert shipped == {}, c.name
            with pytest.raises(ValueError, match="no reduction"):
                cuda_solution(c, "warp")
            continue
        with_variant += 1
        warp = cuda_solution(c, "warp")
        assert shipped == {"warp": warp} and warp != cuda_solution(c), c.name
        assert (ROOT / c.name / "solution_cuda_warp.py").read_text() == warp
        assert "__shfl_down_sync" in warp and "__shared__" not in warp, c.name
        assert "grid=((rows + 7) // 8,), block=(256,)" in warp, c.name
        assert check_candidate_source(warp) == [], c.name
    assert with_variant == 47


@pytest.mark.gpu
@pytest.mark.parametrize("name", EMBEDDED)
def test_the_warp_variants_pass_the_sandbox_on_a_gpu(name):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    tasks = [t for t in load_embedded(name).tasks() if "cuda" in t.variant_solutions]
    with Sandbox(SandboxConfig(backend="cuda", time_compile=False)) as box:
        results = box.evaluate_many([(t, t.variant_solutions["cuda"]["warp"]) for t in tasks])
    failed = {t.name: r.message[:200] for t, r in zip(tasks, results, strict=True) if not r.correct}
    assert not failed


@pytest.mark.gpu
@pytest.mark.parametrize("name", EMBEDDED)
def test_the_embedded_cuda_solutions_pass_the_sandbox_on_a_gpu(name):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    tasks = load_embedded(name).tasks()
    with Sandbox(SandboxConfig(backend="cuda", time_compile=False)) as box:
        results = box.evaluate_many([(t, t.compact_solutions["cuda"]) for t in tasks])
    failed = {t.name: r.message[:200] for t, r in zip(tasks, results, strict=True) if not r.correct}
    assert not failed
