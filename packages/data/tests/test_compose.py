"""Composition: every drawn task is a valid KernelBench module whose shapes torch agrees with,
drawn deterministically, with the operator-count distribution asked for."""

from __future__ import annotations

import ast
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda_agent.data import OP_COUNTS, WINDOWS, catalogue, compose, cpu_solution
from cuda_agent.data.catalogue import describe
from cuda_agent.data.compose import CompositionError
from cuda_agent.data.sizing import MACHINES, largest

RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60)


@RELAXED
@given(seed=st.integers(0, 10**9), max_ops=st.integers(1, 5), teachable=st.booleans())
def test_every_composition_is_a_kernelbench_module(seed, max_ops, teachable):
    comp = compose(random.Random(seed), index=seed % 1000, max_ops=max_ops, teachable=teachable)
    task = comp.to_task()  # checks Model, get_inputs, get_init_inputs statically
    assert 1 <= len(comp.ops) <= max_ops
    assert set(comp.sizes) == set(comp.cpu_sizes) and comp.sizes["BATCH"] >= 1
    assert task.cpu_sizes == dict(comp.cpu_sizes)  # CPU_SIZES reads back as written
    assert task.sizes == dict(comp.sizes)
    tree = ast.parse(comp.source)
    forward = next(
        f
        for c in tree.body
        if isinstance(c, ast.ClassDef)
        for f in c.body
        if isinstance(f, ast.FunctionDef) and f.name == "forward"
    )
    # one statement per op, the last one returned; one forward argument per input
    assert len(forward.body) == len(comp.ops) and isinstance(forward.body[-1], ast.Return)
    assert [a.arg for a in forward.args.args[1:]] == [name for name, _ in comp.inputs]
    if teachable:
        assert comp.teachable
        ast.parse(cpu_solution(comp))


@RELAXED
@given(seed=st.integers(0, 10**9))
def test_the_same_seed_gives_the_same_task(seed):
    a = compose(random.Random(seed), index=3)
    b = compose(random.Random(seed), index=3)
    assert a == b and a.source == b.source


def test_operator_counts_follow_the_distribution():
    counts = Counter(len(compose(random.Random(f"c:{i}"), i).ops) for i in range(600))
    share = {k: counts[k] / 600 for k in OP_COUNTS}
    assert abs(share[2] - OP_COUNTS[2]) < 0.05  # 84% two-operator compositions
    assert all(counts[k] > 0 for k in OP_COUNTS)
    capped = Counter(len(compose(random.Random(i), i, max_ops=2).ops) for i in range(100))
    assert set(capped) <= {1, 2}


def test_sizes_aim_inside_each_backends_window():
    """The time model's estimate for the chosen sizes lies inside the window (the filter then
    measures the real time); the largest tensor stays under the machine's cap."""
    for i in range(200):
        comp = compose(random.Random(f"w:{i}"), i)
        for backend in ("cuda", "cpu"):
            low, high = WINDOWS[backend]
            estimate = comp.estimate_ms[backend]
            sizes = comp.sizes if backend == "cuda" else comp.cpu_sizes
            if sizes["BATCH"] > 1:  # at batch 1 the chain may be too small to reach the window
                assert low <= estimate <= high, (comp.name, backend, estimate, dict(sizes))
            assert largest(comp.steps, comp.inputs, sizes) <= MACHINES[backend].max_elements


def test_catalogue_ops_name_real_torch_callables_and_shapes_come_from_torch():
    ops = catalogue()
    assert {"relu", "elu", "linear", "conv2d", "amax", "softmax", "add"} <= set(ops)
    linear = describe(ops["linear"])
    assert linear["shapes"] == {"2": [[8, 64], [8, 8]]}  # nn.Linear(64, new=8) on meta
    assert describe(ops["max_pool2d"])["shapes"]["4"] == [[2, 8, 16, 16], [2, 8, 8, 8]]
    assert describe(ops["amax"])["shapes"]["2"] == [[8, 64], [8]]
    with pytest.raises(RuntimeError):
        ops["conv2d"].output_shape((8, 64))  # a 2-D input: torch refuses it


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="max_ops"):
        compose(random.Random(0), max_ops=6)
    with pytest.raises(ValueError, match="operator count"):
        compose(random.Random(0), counts={5: 1.0}, max_ops=2)
    every = list(catalogue())
    with pytest.raises(CompositionError):
        compose(random.Random(0), exclude=every)
