"""Normalised-AST similarity: laws (identity, renaming, symmetry) and decontamination."""

from __future__ import annotations

import builtins
import keyword
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda_agent.data.similarity import (
    SimilarityIndex,
    decontaminate,
    deduplicate,
    nearest,
    normalized_ast,
    normalized_source,
    operator_names,
    similarity,
)
from cuda_agent.kernel_sandbox import Task, task_from_source

SLOW_OK = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=50)

# Each template lists the identifiers it binds itself: those a renaming may change.
RELU = (
    '''import torch
import torch.nn as nn

class Model(nn.Module):
    """Simple model that performs a ReLU activation."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
''',
    ("self", "x", "batch_size", "dim"),
)

CONV_BIAS = (
    """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        x = x + self.bias
        return x

batch_size = 128
in_channels = 64
out_channels = 128
height = width = 128
kernel_size = 3
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
""",
    (
        "self",
        "in_channels",
        "out_channels",
        "kernel_size",
        "bias_shape",
        "conv",
        "bias",
        "x",
        "batch_size",
        "height",
        "width",
    ),
)

GEMM_HELPER = (
    """import torch
import torch.nn as nn
import torch.nn.functional as F

def scaled(t, factor):
    return t * factor

class Model(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.scale = scale

    def activate(self, h):
        return F.gelu(h)

    def forward(self, inp):
        h = self.linear(inp)
        h = scaled(h, factor=self.scale)
        return self.activate(h).sum(dim=1, keepdim=True)

features = 256
scale = 0.5

def get_inputs():
    return [torch.rand(32, features)]

def get_init_inputs():
    return [features, scale]
""",
    ("scaled", "t", "factor", "self", "features", "scale", "linear", "activate", "h", "inp"),
)

TEMPLATES = [RELU, CONV_BIAS, GEMM_HELPER]

_RESERVED = (
    set(keyword.kwlist)
    | set(dir(builtins))
    | {
        "torch",
        "nn",
        "F",
        "Model",
        "forward",
        "get_inputs",
        "get_init_inputs",
        "relu",
        "sum",
        "dim",
        "keepdim",
        "super",
    }
)
identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda s: s not in _RESERVED and not s.startswith("__")
)


def rename(source: str, mapping: dict[str, str]) -> str:
    """Replace whole-word identifiers (in strings too, which normalisation abstracts anyway)."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, mapping)) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], source)


@st.composite
def renamed_template(draw: st.DrawFn) -> tuple[str, str]:
    """(template source, the same module with a random injective renaming of its names)."""
    source, names = draw(st.sampled_from(TEMPLATES))
    taken = set(re.findall(r"\b\w+\b", source))
    new_names = draw(
        st.lists(
            identifiers.filter(lambda s: s not in taken),
            min_size=len(names),
            max_size=len(names),
            unique=True,
        )
    )
    chosen = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    mapping = {old: new for old, new, keep in zip(names, new_names, chosen, strict=True) if keep}
    return source, rename(source, mapping) if mapping else source


def task(source: str, name: str) -> Task:
    return task_from_source(source, name=name)


# ------------------------------------------------------------------------------ laws


@pytest.mark.parametrize("template", TEMPLATES, ids=["relu", "conv_bias", "gemm_helper"])
def test_identical_is_one(template: tuple[str, tuple[str, ...]]) -> None:
    source = template[0]
    assert similarity(source, source) == 1.0
    assert similarity(task(source, "a"), source) == 1.0


@SLOW_OK
@given(pair=renamed_template())
def test_renaming_identifiers_changes_nothing(pair: tuple[str, str]) -> None:
    original, renamed = pair
    compile(renamed, "<renamed>", "exec")  # still a valid module
    assert normalized_ast(renamed) == normalized_ast(original)
    assert similarity(original, renamed) == 1.0
    for other, _ in TEMPLATES:
        assert similarity(renamed, other) == similarity(original, other)


@SLOW_OK
@given(a=renamed_template(), b=renamed_template())
def test_symmetric_and_in_unit_interval(a: tuple[str, str], b: tuple[str, str]) -> None:
    score = similarity(a[1], b[1])
    assert score == similarity(b[1], a[1])
    assert 0.0 <= score <= 1.0


def test_spelling_that_does_not_change_the_operator_is_ignored() -> None:
    source = RELU[0]
    aliased = source.replace("import torch.nn as nn", "from torch import nn").replace(
        "torch.relu(x)", "torch.nn.functional.relu(x)"
    )
    via_f = aliased.replace(
        "from torch import nn", "from torch import nn\nimport torch.nn.functional as F"
    ).replace("torch.nn.functional.relu(x)", "F.relu(x)")
    assert normalized_ast(aliased) == normalized_ast(via_f)
    no_doc = source.replace('    """Simple model that performs a ReLU activation."""\n', "")
    resized = (
        no_doc.replace("4096", "16").replace(": torch.Tensor", "").replace(" -> torch.Tensor", "")
    )
    assert normalized_ast(resized) == normalized_ast(source)
    assert "torch.relu" in normalized_source(source) and "batch_size" not in normalized_source(
        source
    )


@pytest.mark.parametrize("op", ["sigmoid", "tanh", "nn.functional.gelu", "abs"])
def test_a_different_operator_lowers_it(op: str) -> None:
    source = RELU[0]
    other = source.replace("torch.relu(x)", f"torch.{op}(x)")
    score = similarity(source, other)
    assert score < 0.6  # no operator in common: at most a half
    assert operator_names(other) != operator_names(source)


def test_one_operator_swapped_in_a_combination() -> None:
    source = CONV_BIAS[0]
    other = source.replace("torch.relu(x)", "torch.tanh(x)")
    assert 0.4 < similarity(source, other) < 0.75


def test_invalid_source_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not valid Python"):
        similarity("def f(:\n", RELU[0])


# ------------------------------------------------------------------------------ queries


def corpus() -> list[Task]:
    return [
        task(RELU[0], "L1_19_ReLU"),
        task(CONV_BIAS[0], "L2_1_Conv2D_ReLU_BiasAdd"),
        task(RELU[0].replace("torch.relu(x)", "torch.sigmoid(x)"), "L1_21_Sigmoid"),
    ]


def test_nearest_finds_the_renamed_original() -> None:
    copy = rename(CONV_BIAS[0], {"conv": "c1", "x": "inp", "bias": "b0"}).replace("128", "7")
    assert nearest(copy, corpus()) == ("L2_1_Conv2D_ReLU_BiasAdd", 1.0)
    name, score = nearest(GEMM_HELPER[0], corpus())
    assert name is not None and score < 0.6
    assert nearest(RELU[0], []) == (None, 0.0)
    assert nearest(RELU[0], {"a": RELU[0]}) == ("a", 1.0)


@SLOW_OK
@given(
    query=st.sampled_from([t[0] for t in TEMPLATES]),
    members=st.lists(st.integers(0, 5), min_size=1, max_size=6, unique=True),
)
def test_index_pruning_matches_brute_force(query: str, members: list[int]) -> None:
    pool = [t.source for t in corpus()] + [
        GEMM_HELPER[0],
        CONV_BIAS[0].replace("torch.relu", "torch.tanh"),
        GEMM_HELPER[0].replace("F.gelu", "F.silu"),
    ]
    chosen = {f"m{i}": pool[i] for i in members}
    best = max(similarity(query, src) for src in chosen.values())
    name, score = SimilarityIndex.build(chosen).nearest(query)
    assert score == best and similarity(query, chosen[name or ""]) == best


def test_decontaminate_drops_a_renamed_copy_and_keeps_a_different_task() -> None:
    copy = task(rename(RELU[0], {"x": "tensor_in", "self": "me", "dim": "width"}), "copy")
    other_op = task(RELU[0].replace("torch.relu(x)", "torch.nn.functional.gelu(x)"), "gelu")
    different = task(GEMM_HELPER[0], "gemm")
    kept, dropped = decontaminate([copy, other_op, different], corpus(), threshold=0.9)
    assert [t.name for t in kept] == ["gelu", "gemm"]
    assert [(d.task.name, d.match) for d in dropped] == [("copy", "L1_19_ReLU")]
    assert "L1_19_ReLU" in dropped[0].reason and dropped[0].score == 1.0
    with pytest.raises(ValueError, match="threshold"):
        decontaminate([copy], corpus(), threshold=0.0)


def test_deduplicate_keeps_the_first_of_near_duplicates() -> None:
    a = task(RELU[0], "a")
    a_copy = task(rename(RELU[0], {"x": "y"}), "a_copy")
    b = task(CONV_BIAS[0], "b")
    b_copy = task(CONV_BIAS[0].replace("128", "32"), "b_copy")
    kept, dropped = deduplicate([a, b, a_copy, b_copy])
    assert [t.name for t in kept] == ["a", "b"]
    assert [(d.task.name, d.match) for d in dropped] == [("a_copy", "a"), ("b_copy", "b")]


@pytest.mark.skipif(
    not os.environ.get("CUDA_AGENT_KERNELBENCH"), reason="CUDA_AGENT_KERNELBENCH not set"
)
def test_renamed_kernelbench_level1_is_all_contaminated() -> None:
    from cuda_agent.data.loaders import load_kernelbench

    bench = load_kernelbench(os.environ["CUDA_AGENT_KERNELBENCH"], levels=[1])
    index = SimilarityIndex.build(bench)
    copies = [
        task(rename(t.source, {"x": "q_in", "self": "this"}), f"copy_{t.name}") for t in bench
    ]
    kept, dropped = decontaminate(copies, index)
    assert not kept and len(dropped) == len(bench)
