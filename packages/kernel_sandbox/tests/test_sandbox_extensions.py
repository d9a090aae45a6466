"""``load_inline`` candidates: built once into the shared content-addressed cache, reused by
fresh workers, and compiler errors reported as trimmed compile errors (CPU backend)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cuda_agent.kernel_sandbox import (
    Deadlines,
    EvalResult,
    Sandbox,
    SandboxConfig,
    Task,
    builtin_tasks,
)
from cuda_agent.kernel_sandbox.candidates import EXAMPLES, read_candidate

pytestmark = pytest.mark.slow

# The candidates here include the two headers they use, not ``torch/extension.h`` (which
# ``load_inline`` adds unless ``no_implicit_headers``): a build parses 2.5 times less C++ (about
# 10 s instead of 25 s on two cores), and what the tests check (the cache, the extension's
# name, the compiler's errors) does not depend on which headers a candidate includes.

CANDIDATE = r'''
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

source = """
#include <ATen/ops/empty_like.h>
#include <torch/csrc/utils/pybind.h>
at::Tensor relu_cpu(at::Tensor x) {
    auto out = at::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""
ext = load_inline(
    name="relu_ext", cpp_sources=source, functions=["relu_cpu"], extra_cflags=["-O3"],
    no_implicit_headers=True, with_pytorch_error_handling=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_cpu(x.contiguous())
'''


@pytest.fixture(scope="module")
def relu() -> Task:
    return next(t for t in builtin_tasks() if t.name == "relu")


def _config() -> SandboxConfig:
    return SandboxConfig(backend="cpu", workers=1, repeats=3, deadlines=Deadlines(load=400.0))


@dataclass(frozen=True)
class FirstBuild:
    """``CANDIDATE`` evaluated once into an empty cache: the verdict and what it left there."""

    cache: Path
    result: EvalResult
    entries: tuple[Path, ...]  # the cache's extension directories right after the build


@pytest.fixture(scope="module")
def first_build(relu, tmp_path_factory) -> Iterator[FirstBuild]:
    """One extension cache for the module (a C++ extension build takes about 10 s on a 2-core
    machine): ``CANDIDATE`` is built into it once, from empty, and every test here evaluates
    with it as ``$CUDA_AGENT_CACHE``, so a later ``CANDIDATE`` is only loaded."""
    cache = tmp_path_factory.mktemp("extension-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUDA_AGENT_CACHE", str(cache))
        with Sandbox(_config()) as sandbox:
            result = sandbox.evaluate(relu, CANDIDATE)
        entries = tuple(sorted((cache / "extensions").iterdir()))
        yield FirstBuild(cache, result, entries)


@pytest.fixture
def cache(first_build, monkeypatch) -> Path:
    """The module's extension cache, as this test's ``$CUDA_AGENT_CACHE``."""
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(first_build.cache))
    return first_build.cache


def test_an_extension_is_built_once_and_reused_by_fresh_workers(relu, first_build, cache):
    first = first_build.result
    assert first.status == "ok", first.message
    (build_dir,) = first_build.entries
    assert build_dir.name.startswith("relu_ext-")
    (library,) = build_dir.glob("*.so")
    built_at = library.stat().st_mtime_ns

    before = set((cache / "extensions").iterdir())  # other tests' entries too, if they ran
    with Sandbox(_config()) as sandbox:  # new worker processes, same cache
        again = sandbox.evaluate(relu, CANDIDATE)
        other = sandbox.evaluate(relu, CANDIDATE.replace("> 0.f", ">= 0.f"))
    assert again.status == "ok" and other.status == "ok", (again.message, other.message)
    assert library.stat().st_mtime_ns == built_at  # loaded, not rebuilt
    # A different source is a different entry; the first one is untouched.
    (added,) = set((cache / "extensions").iterdir()) - before
    assert added.name.startswith("relu_ext-") and build_dir.is_dir()


def test_compiler_errors_are_trimmed_to_file_line_and_message(relu, tmp_path, monkeypatch):
    # Its own empty cache: the fixed candidate is built after the failed build, not loaded.
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    broken = CANDIDATE.replace("return out;", "return undefined_name;")
    with Sandbox(_config()) as sandbox:
        result = sandbox.evaluate(relu, broken)
        assert result.status == "compile_error", result.message
        assert "main.cpp:" in result.message and "undefined_name" in result.message
        assert "Traceback" not in result.message and str(tmp_path) not in result.message
        # The failed build leaves nothing behind that blocks the fixed candidate.
        assert sandbox.evaluate(relu, CANDIDATE).status == "ok"


def test_documented_cpu_examples_pass(relu, session_cache, monkeypatch):
    # In the session's cache (conftest.py), not the module's: other modules evaluate the same
    # examples and load what this built, or build what this loads.
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(session_cache))
    with Sandbox(_config()) as sandbox:
        inline = sandbox.evaluate(relu, EXAMPLES / "load_inline_cpu.py")
        workdir = sandbox.evaluate(relu, EXAMPLES / "workdir_cpu")  # a work directory path
        assert inline.status == "ok", inline.message
        assert workdir.status == "ok", workdir.message
        # The same directory as a mapping of files; a kernel that is built but bypassed is
        # still caught by the no-custom-kernel check.
        files = read_candidate(EXAMPLES / "workdir_cpu")
        assert isinstance(files, dict)
        decoy = dict(files)
        decoy["model_new.py"] = files["model_new.py"].replace(
            "cuda_extension.relu_forward(x.contiguous())", "torch.relu(x)"
        )
        result = sandbox.evaluate(relu, decoy)
        assert result.status == "rejected" and "torch_compute" in result.flags
        # CUDA sources on the CPU backend: a compile error that says what to do.
        cuda_files = read_candidate(EXAMPLES / "workdir_cuda")
        result = sandbox.evaluate(relu, cuda_files)
        assert result.status == "compile_error" and "kernels/*.cpp" in result.message


def _zero_out(source: str) -> str:
    """The same candidate, same extension name, other code: it writes zeros (incorrect)."""
    return source.replace("in[i] > 0.f ? in[i] : 0.f", "0.f")


def test_candidates_sharing_an_extension_name_each_run_their_own(relu, cache):
    # KernelBench's adversarial pair (result_reuse / zero_out, both load_inline(name=
    # "fast_matmul")) once got each other's verdicts in one worker: an extension loaded under
    # a name was reused for any later candidate with that name. Both orders, one worker.
    honest = CANDIDATE  # the generated binding (functions=[...]) uses the given name
    spelled = CANDIDATE.replace('functions=["relu_cpu"], ', "").replace(
        "return out;\n}\n",
        'return out;\n}\nPYBIND11_MODULE(relu_ext, m) { m.def("relu_cpu", &relu_cpu); }\n',
    )  # a binding that spells the module name
    # the documented work directory with lighter headers (workdir_light: a quicker build)
    files = read_candidate(Path(__file__).parent / "workdir_light")
    assert isinstance(files, dict)
    zero_files = {k: _zero_out(v) for k, v in files.items()}
    assert zero_files != files
    with Sandbox(_config()) as sandbox:
        verdicts = [
            sandbox.evaluate(relu, c).status
            for c in (honest, _zero_out(honest), honest, spelled, _zero_out(spelled), spelled)
        ]
        assert verdicts == ["ok", "incorrect", "ok", "ok", "incorrect", "ok"], verdicts
        verdicts = [sandbox.evaluate(relu, c).status for c in (zero_files, files, zero_files)]
        assert verdicts == ["incorrect", "ok", "incorrect"], verdicts


LOAD_CANDIDATE = r'''
import os
import torch
from torch import nn
from torch.utils.cpp_extension import load

SOURCE = """
#include <ATen/ops/empty_like.h>
#include <torch/csrc/utils/pybind.h>
at::Tensor relu_cpu(at::Tensor x) {
    auto out = at::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu_cpu", &relu_cpu); }
"""
path = os.path.join(os.getcwd(), "relu_file.cpp")  # the job's own work directory
with open(path, "w") as handle:
    handle.write(SOURCE)
ext = load(name="relu_file_ext", sources=[path], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_cpu(x.contiguous())
'''


def test_candidates_sharing_a_load_name_each_run_their_own(relu, cache):
    # load(name=..., sources=[files]) with the same name and other file contents, both orders.
    # (Static checks off: the candidate writes its source file with open().)
    config = SandboxConfig(
        backend="cpu", workers=1, repeats=3, static_checks=False, deadlines=Deadlines(load=400.0)
    )
    with Sandbox(config) as sandbox:
        candidates = (_zero_out(LOAD_CANDIDATE), LOAD_CANDIDATE, _zero_out(LOAD_CANDIDATE))
        verdicts = [sandbox.evaluate(relu, c).status for c in candidates]
    assert verdicts == ["incorrect", "ok", "incorrect"], verdicts
