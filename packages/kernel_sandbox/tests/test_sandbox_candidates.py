"""Reading candidates: module source, files, work directories; bad work directories get clear
errors in the caller, before any worker is involved."""

from __future__ import annotations

import pytest

from cuda_agent.kernel_sandbox.candidates import (
    EXAMPLES,
    CandidateFormatError,
    kernel_sources,
    read_candidate,
)


def test_source_text_and_module_files_are_module_sources(tmp_path):
    assert read_candidate("class ModelNew: ...") == "class ModelNew: ..."
    path = tmp_path / "model_new.py"
    path.write_text("x = 1")
    assert read_candidate(path) == "x = 1"


def test_a_work_directory_is_read_with_its_kernels(tmp_path):
    files = read_candidate(EXAMPLES / "workdir_cuda")
    assert isinstance(files, dict)
    assert set(files) == {
        "model_new.py",
        "kernels/relu.cu",
        "kernels/relu.h",
        "kernels/relu_binding.cpp",
    }
    assert kernel_sources(files) == ["kernels/relu.cu", "kernels/relu_binding.cpp"]


@pytest.mark.parametrize(
    ("files", "complaint"),
    [
        ({"kernels/a.cu": ""}, "must contain model_new.py"),
        ({"model_new.py": "", "../escape.py": ""}, "not a relative path"),
        ({"model_new.py": "", "/etc/passwd": ""}, "not a relative path"),
        ({"model_new.py": "x" * (5 << 20)}, "at most"),
        ({"model_new.py": "", **{f"k{i}.h": "" for i in range(70)}}, "at most 64 files"),
    ],
)
def test_bad_work_directories_are_refused_with_a_reason(files, complaint):
    with pytest.raises(CandidateFormatError, match=complaint):
        read_candidate(files)


def test_other_types_are_a_type_error():
    with pytest.raises(TypeError, match="candidate must be"):
        read_candidate(42)  # type: ignore[arg-type]
