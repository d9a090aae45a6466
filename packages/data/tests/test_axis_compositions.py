"""Compositions that reduce (argmax too) or normalise along the axis a constructor argument
names (``compose(axes=True)``), as KernelBench's level-1 reductions and softmax do: every draw holds
one such op over an axis torch agrees with, the writers' C solutions are correct in the CPU
sandbox over middle and last axes, kept or dropped dimensions and every axis op, and the
draws without ``axes`` are those of the sets made before axis ops existed (the shipped sets'
own tests regenerate them)."""

from __future__ import annotations

import ast
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda_agent.data import catalogue, compose, cpu_solution
from cuda_agent.data.solutions import cuda_solution, has_reduction
from cuda_agent.data.taskset import TaskEntry
from cuda_agent.kernel_sandbox import Sandbox, SandboxConfig
from cuda_agent.kernel_sandbox.static_checks import check_candidate_source

RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=40)
AXIS_OPS = {name for name, op in catalogue().items() if op.axis}


def _axis_step(comp):
    [step] = [s for s in comp.steps if s.op in AXIS_OPS]
    return step


def _init_signature(source: str) -> list[tuple[str, str]]:
    tree = ast.parse(source)
    init = next(
        f
        for c in tree.body
        if isinstance(c, ast.ClassDef)
        for f in c.body
        if isinstance(f, ast.FunctionDef) and f.name == "__init__"
    )
    return [(a.arg, ast.unparse(a.annotation)) for a in init.args.args[1:] if a.annotation]


@RELAXED
@given(seed=st.integers(0, 10**9), max_ops=st.integers(1, 3))
def test_every_axis_draw_reduces_one_named_axis_as_its_constructor_says(seed, max_ops):
    comp = compose(random.Random(seed), seed % 1000, max_ops, teachable=True, axes=True)
    comp.to_task()  # (checks the module as a task)
    assert comp.teachable and len(comp.ops) <= max_ops
    step = _axis_step(comp)  # exactly one axis op; no other reduction or normalisation
    kind = catalogue()[step.op].kind
    axis_kinds = ("reduction", "normalize")
    assert [s for s in comp.steps if catalogue()[s.op].kind in axis_kinds] == [step]
    assert kind == "reduction" or len(comp.ops) <= 2  # (a normalisation's answers are long)
    rank = len(comp.inputs[0][1])
    assert rank in (2, 3) and 1 <= step.axis < rank  # never the batch's axis
    # its family names the operator, not the axis form: relu -> sum_dim is relu -> sum's
    # family, so a training set of one and a held-out set of the other are told to meet
    assert "_dim" not in comp.family and catalogue()[step.op].family_name in comp.family
    assert TaskEntry.of(comp.to_task(), comp.metadata()).family == comp.family  # as loaded
    module: dict = {}
    exec(compile(comp.source, comp.name, "exec"), module)  # our own generated module
    floats = [v for s in comp.steps for v in s.params.values()]
    if step.axis_default:  # as KernelBench's log-softmax: ``dim: int = 1``, last, not passed
        assert _init_signature(comp.source)[-1] == (step.axis_arg, "int") == ("dim", "int")
        assert f"dim: int = {step.axis}" in comp.source
        assert module["get_init_inputs"]() == floats
        assert module["Model"](*floats).dim == step.axis
    elif step.axis_arg:  # the constructor takes the axis first, as an int, from get_init_inputs
        assert _init_signature(comp.source)[0] == (step.axis_arg, "int") == ("dim", "int")
        assert module["get_init_inputs"]() == [step.axis, *floats]
    if step.axis_arg:
        assert f"dim=self.{step.axis_arg}" in comp.source
    else:  # the forward writes the number, as KernelBench's softmax does (``dim=1``)
        assert all(kind != "int" for _, kind in _init_signature(comp.source))
        assert f"dim={step.axis}" in comp.source and "self.dim" not in comp.source
    if kind == "reduction":
        assert ("keepdim=True" in comp.source) == step.keepdim
    else:  # a normalisation keeps the input's shape
        assert not step.keepdim and comp.output == comp.inputs[0][1]
    if step.op.startswith("arg"):  # an index, int64, ends the chain
        assert comp.ops[-1] == step.op and "long long* out" in cuda_solution(comp)
        # after ops that round as torch's only: exp's last bit would move near ties; one at
        # most (a multiply then an add may be contracted into one rounding, an FMA)
        assert all(catalogue()[op].exact for op in comp.ops[:-1]), comp.ops
        assert len(comp.ops) <= 2, comp.ops
    # the writers' modules parse; the CUDA one passes the sandbox's static checks
    ast.parse(cpu_solution(comp))
    assert check_candidate_source(cuda_solution(comp)) == []
    if step.axis < rank - 1:  # a middle axis: a thread per output, no warp-per-row form
        assert "(outer * inner + 255) // 256" in cuda_solution(comp)
        assert not has_reduction(comp)
        with pytest.raises(ValueError, match=r"middle axis|normalises|index"):
            cuda_solution(comp, "warp")
    elif step.op.startswith("arg"):  # an index on the last axis: a thread per output too
        assert "(outer * inner + 255) // 256" in cuda_solution(comp) and not has_reduction(comp)
        with pytest.raises(ValueError, match="index"):
            cuda_solution(comp, "warp")
    elif kind == "normalize":  # the last axis: a warp per row, no second form
        assert "__shfl_xor_sync" in cuda_solution(comp) and not has_reduction(comp)
        with pytest.raises(ValueError, match="normalises"):
            cuda_solution(comp, "warp")
    else:
        assert has_reduction(comp) and "__shfl_down_sync" in cuda_solution(comp, "warp")


def test_without_axes_no_axis_op_is_drawn_and_axes_needs_teachable():
    for i in range(300):
        for teachable in (False, True):
            assert not set(compose(random.Random(i), i, teachable=teachable).ops) & AXIS_OPS
    with pytest.raises(ValueError, match="teachable"):
        compose(random.Random(0), axes=True)


def _sample() -> list:
    """Draws covering a middle and the last axis, kept and dropped dimensions, 2-D and 3-D
    inputs, and every axis op: each draw kept that brings a kind or an op not seen yet."""
    sample, kinds, ops = [], set(), set()
    for i in range(400):  # (log and sqrt give NaN on negative inputs: synth drops such tasks)
        comp = compose(
            random.Random(f"axes:{i}"), i, 3, teachable=True, exclude=("log", "sqrt"), axes=True
        )
        step = _axis_step(comp)
        form = "default" if step.axis_default else "argument" if step.axis_arg else "literal"
        kind = (len(comp.inputs[0][1]), step.axis, step.keepdim, form)
        if kind not in kinds or step.op not in ops:
            sample.append(comp)
            kinds.add(kind)
            ops.add(step.op)
    return sample


@pytest.mark.slow
def test_the_c_solutions_are_correct_over_every_kind_of_axis():
    sample = _sample()
    kinds = {(len(c.inputs[0][1]), _axis_step(c).axis, _axis_step(c).keepdim) for c in sample}
    forms = {(bool(_axis_step(c).axis_arg), _axis_step(c).axis_default) for c in sample}
    assert forms == {(True, False), (False, False), (True, True)}  # argument, literal, default
    assert {(3, 1, True), (3, 1, False), (3, 2, True), (3, 2, False), (2, 1, False)} <= kinds
    assert {_axis_step(c).op for c in sample} == AXIS_OPS
    with Sandbox(SandboxConfig(backend="cpu", workers=1)) as box:
        verdicts = [box.evaluate(c.to_task(), cpu_solution(c), measure_time=False) for c in sample]
    wrong = {
        c.name: v.message[:300] for c, v in zip(sample, verdicts, strict=True) if not v.correct
    }
    assert not wrong
