"""Loaders on small files written in the tests (never KernelBench's own files, which are not ours).

Set ``CUDA_AGENT_KERNELBENCH`` to a KernelBench checkout to also load the real problems.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest

from cuda_agent.data.loaders import load_kernelbench, load_ops6k
from cuda_agent.kernel_sandbox import Task, TaskError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ELEMENTWISE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """Applies {op}."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.{op}(x)

batch_size = 16
dim = 64

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''

CONV = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return torch.relu(self.conv(x))

batch_size = 2
in_channels = 3
out_channels = 4
kernel_size = 3

def get_inputs():
    return [torch.rand(batch_size, in_channels, 8, 8)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
"""


def write_kernelbench(root: Path) -> Path:
    """A checkout-shaped tree: root/KernelBench/level1 and level2 with a few problems."""
    level1 = root / "KernelBench" / "level1"
    level2 = root / "KernelBench" / "level2"
    level1.mkdir(parents=True)
    level2.mkdir(parents=True)
    (level1 / "19_ReLU.py").write_text(ELEMENTWISE.format(op="relu"))
    (level1 / "2_Tanh.py").write_text(ELEMENTWISE.format(op="tanh"))
    (level1 / "_helpers.py").write_text("x = 1\n")  # ignored: not a problem
    (level1 / "README.md").write_text("not python\n")
    (level2 / "1_Conv2D_ReLU.py").write_text(CONV)
    return root


# ------------------------------------------------------------------------------ KernelBench


def test_kernelbench_names_metadata_and_order(tmp_path: Path) -> None:
    tasks = load_kernelbench(write_kernelbench(tmp_path))
    # numeric problem order within a level: 2 before 19
    assert tasks.names == ("L1_2_Tanh", "L1_19_ReLU", "L2_1_Conv2D_ReLU")
    entry = tasks.entry("L1_19_ReLU")
    assert dict(entry.metadata) == {
        "source": "kernelbench",
        "level": 1,
        "problem": 19,
        "file": "19_ReLU.py",
    }
    assert entry.task.source == ELEMENTWISE.format(op="relu")  # as it is, unchanged
    assert entry.family == "relu"
    assert tasks.entry("L2_1_Conv2D_ReLU").family == "conv2d+relu"
    assert tasks.skipped == ()


def test_kernelbench_accepts_the_three_layouts_and_filters_levels(tmp_path: Path) -> None:
    write_kernelbench(tmp_path)
    inner = tmp_path / "KernelBench"
    assert len(load_kernelbench(inner)) == 3
    assert load_kernelbench(inner / "level2").names == ("L2_1_Conv2D_ReLU",)
    assert load_kernelbench(tmp_path, levels=[1]).names == ("L1_2_Tanh", "L1_19_ReLU")
    with pytest.raises(TaskError, match="no KernelBench level directories"):
        load_kernelbench(tmp_path, levels=[3])
    with pytest.raises(TaskError, match="not a directory"):
        load_kernelbench(tmp_path / "missing")


def test_kernelbench_broken_file_names_the_file_or_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = write_kernelbench(tmp_path)
    broken = root / "KernelBench" / "level1" / "7_Broken.py"
    broken.write_text("import torch\nclass Model(:\n")
    no_contract = root / "KernelBench" / "level1" / "8_NoInputs.py"
    no_contract.write_text("class Model:\n    pass\n")
    with pytest.raises(TaskError, match=r"7_Broken\.py"):
        load_kernelbench(root)
    with caplog.at_level(logging.WARNING, logger="cuda_agent.data.loaders"):
        tasks = load_kernelbench(root, skip_broken=True)
    assert len(tasks) == 3
    assert sorted(Path(s.source).name for s in tasks.skipped) == ["7_Broken.py", "8_NoInputs.py"]
    assert any("get_inputs" in s.reason for s in tasks.skipped)
    assert "skipped 2 broken" in caplog.text


def test_kernelbench_badly_named_file_is_an_error(tmp_path: Path) -> None:
    root = write_kernelbench(tmp_path)
    (root / "KernelBench" / "level1" / "relu_extra.py").write_text(ELEMENTWISE.format(op="relu"))
    with pytest.raises(TaskError, match=r"relu_extra\.py"):
        load_kernelbench(root)


@pytest.mark.skipif(
    not os.environ.get("CUDA_AGENT_KERNELBENCH"), reason="CUDA_AGENT_KERNELBENCH not set"
)
def test_real_kernelbench_checkout_loads() -> None:
    tasks = load_kernelbench(os.environ["CUDA_AGENT_KERNELBENCH"])
    assert len(tasks) >= 250 and not tasks.skipped
    relu = tasks.entry("L1_19_ReLU")
    assert relu.metadata["problem"] == 19 and relu.family == "relu"
    assert {e.metadata["level"] for e in tasks.entries} == {1, 2, 3, 4}


# ------------------------------------------------------------------------------ Ops-6K


def write_parquet(path: Path, columns: dict[str, list[object]]) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def test_ops6k_rows_become_tasks_with_metadata(tmp_path: Path) -> None:
    path = write_parquet(
        tmp_path / "ops.parquet",
        {
            "code": [ELEMENTWISE.format(op="relu"), CONV, ELEMENTWISE.format(op="sigmoid")],
            "ops": [json.dumps(["torch.relu"]), "nn.Conv2d, torch.relu", "['torch.sigmoid']"],
            "data_source": ["synth", "synth", "seed"],
            "difficulty": [1, 2, 3],  # unknown column: kept as metadata
        },
    )
    tasks = load_ops6k(path)
    assert tasks.names == ("ops6k_00000", "ops6k_00001", "ops6k_00002")
    assert all(isinstance(t, Task) for t in tasks)
    conv = tasks.entry("ops6k_00001")
    assert dict(conv.metadata) == {
        "ops": ("nn.Conv2d", "torch.relu"),
        "data_source": "synth",
        "difficulty": 2,
        "source": "ops6k",
        "row": 1,
    }
    assert conv.family == "conv2d+relu"
    assert tasks.entry("ops6k_00000").metadata["ops"] == ("torch.relu",)
    assert tasks.entry("ops6k_00002").family == "sigmoid"


def test_ops6k_list_column_and_name_column(tmp_path: Path) -> None:
    path = write_parquet(
        tmp_path / "ops.parquet",
        {
            "id": ["a7", "b9"],
            "code": [ELEMENTWISE.format(op="relu"), ELEMENTWISE.format(op="tanh")],
            "ops": [["torch.tanh", "torch.relu", "torch.relu"], ["torch.tanh"]],
        },
    )
    tasks = load_ops6k(path)
    assert tasks.names == ("a7", "b9")
    # family from the listed ops (sorted, de-duplicated), not from the code
    assert tasks.entry("a7").family == "relu+tanh"
    assert tasks.entry("a7").metadata["id"] == "a7"


def test_ops6k_malformed_row_is_an_error_or_skipped(tmp_path: Path) -> None:
    path = write_parquet(
        tmp_path / "ops.parquet",
        {
            "code": [ELEMENTWISE.format(op="relu"), "def broken(:\n", None],
            "ops": ["torch.relu", "torch.relu", "torch.relu"],
            "data_source": ["x", "x", "x"],
        },
    )
    with pytest.raises(TaskError, match="row 1"):
        load_ops6k(path)
    tasks = load_ops6k(path, skip_broken=True)
    assert tasks.names == ("ops6k_00000",)
    assert [s.source.rsplit("#", 1)[1] for s in tasks.skipped] == ["row1", "row2"]


def test_ops6k_bad_ops_and_missing_code_column(tmp_path: Path) -> None:
    bad_ops = write_parquet(
        tmp_path / "bad.parquet", {"code": [ELEMENTWISE.format(op="relu")], "ops": ["[relu"]}
    )
    with pytest.raises(TaskError, match="ops"):
        load_ops6k(bad_ops)
    no_code = write_parquet(tmp_path / "nocode.parquet", {"source_code": ["x"]})
    with pytest.raises(TaskError, match="no 'code' column"):
        load_ops6k(no_code)
    with pytest.raises(TaskError, match="does not exist"):
        load_ops6k(tmp_path / "absent.parquet")


def test_ops6k_without_pyarrow_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r"pip install cuda-agent-data\[parquet\]"):
        load_ops6k(tmp_path / "any.parquet")
