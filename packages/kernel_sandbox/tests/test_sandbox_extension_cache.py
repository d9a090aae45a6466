"""Work directories (``load(sources=[...])``) in the extension cache: the key is the files'
relative names and contents, not the job's folder, so the same files evaluated again, in
another job, worker or sandbox, or built first by a compile worker, are loaded and not built;
a changed header is a new build with the new behaviour; verdicts are those of a fresh build."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.kernel_sandbox import Deadlines, Sandbox, SandboxConfig, Task, builtin_tasks
from cuda_agent.kernel_sandbox._candidate import extension_hooks, extension_sources
from cuda_agent.kernel_sandbox.candidates import read_candidate


@pytest.fixture(scope="module")
def relu() -> Task:
    return next(t for t in builtin_tasks() if t.name == "relu")


# The documented CPU work directory (``examples/workdir_cpu``, built by test_sandbox_extensions'
# test_documented_cpu_examples_pass) with the headers it uses in place of ``torch/types.h`` and
# ``torch/extension.h``: the same kernel and binding, a build about a third as long. What these
# tests check (keys, caching, rebuilds, errors) does not depend on the headers.
WORKDIR = Path(__file__).parent / "workdir_light"


def _files() -> dict[str, str]:
    files = read_candidate(WORKDIR)
    assert isinstance(files, dict)
    return files


def _with_header_constant(keep: str) -> dict[str, str]:
    """The example with the kept fraction of a positive input in its header: ``1.0f`` is ReLU
    (correct), ``0.0f`` writes zeros (incorrect). Only the header differs between the two."""
    files = _files()
    files["kernels/relu.h"] += f"\nconstexpr float kKeep = {keep};\n"
    old = "in[i] > 0.f ? in[i] : 0.f"
    assert old in files["kernels/relu.cpp"]
    files["kernels/relu.cpp"] = files["kernels/relu.cpp"].replace(
        old, "in[i] > 0.f ? in[i] * kKeep : 0.f"
    )
    return files


# ------------------------------------------------------------------- the key, without building
def _key_in(folder: Path, files: dict[str, str], name: str = "cuda_extension") -> str:
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    sources = [str(folder / s) for s in sorted(files) if s.endswith(".cpp")]
    tree = extension_sources.plan(sources, [str(folder / "kernels")], folder)
    arguments = {"name": name, "sources": sources, "extra_cflags": ["-O3"]}
    return extension_hooks._build_key("load", arguments, tree)


def test_the_key_is_the_files_not_the_jobs_folder(tmp_path):
    files = _files()
    first = _key_in(tmp_path / "job-a", files)
    assert _key_in(tmp_path / "job-b", files) == first  # another job's folder: the same key
    changed = dict(files, **{"kernels/relu.h": files["kernels/relu.h"] + "// changed\n"})
    assert _key_in(tmp_path / "job-c", changed) != first  # a header is part of the key
    nested = dict(files, **{"kernels/detail/util.h": "#pragma once\n"})
    nested_key = _key_in(tmp_path / "job-d", nested)
    assert nested_key != first  # so is one in a subfolder (an #include "detail/util.h")
    nested["kernels/detail/util.h"] += "// changed\n"
    assert _key_in(tmp_path / "job-e", nested) != nested_key
    assert _key_in(tmp_path / "job-f", files, name="other") != first


def test_the_tree_copies_the_bytes_it_hashed_and_keeps_relative_names(tmp_path):
    job = tmp_path / "job-a"
    files = {"kernels/a.cpp": "PYBIND11_MODULE(given, m) {}\n", "kernels/a.h": "int x;\n"}
    for relative, text in files.items():
        (job / relative).parent.mkdir(parents=True, exist_ok=True)
        (job / relative).write_text(text)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "b.cuh").write_text("int y;\n")
    tree = extension_sources.plan(
        [str(job / "kernels/a.cpp")], [str(job / "kernels"), str(outside)], job
    )
    assert tree.sources == ["job/kernels/a.cpp"]
    assert tree.include_paths == ["job/kernels", "outside-0"]
    assert set(tree.files) == {"job/kernels/a.cpp", "job/kernels/a.h", "outside-0/b.cuh"}
    root = tmp_path / "build" / "tree"
    sources, includes = tree.write(root, lambda t: t.replace("given", "TORCH_EXTENSION_NAME"))
    assert sources == [str(root / "job/kernels/a.cpp")]
    assert includes == [str(root / "job/kernels"), str(root / "outside-0")]
    assert (
        root / "job/kernels/a.cpp"
    ).read_text() == "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n"
    # Written again with the same bytes: untouched (ninja would rebuild a newer file).
    stamp = (root / "job/kernels/a.h").stat().st_mtime_ns
    tree.write(root, lambda t: t)
    assert (root / "job/kernels/a.h").stat().st_mtime_ns == stamp


# ------------------------------------------------------------------------ through the sandbox
def _config(workers: int = 1) -> SandboxConfig:
    return SandboxConfig(
        backend="cpu",
        workers=workers,
        repeats=3,
        timing_budget_s=0.3,
        deadlines=Deadlines(load=600.0),
    )


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Iterator[Path]:
    """One extension cache for the module, empty at first, as ``$CUDA_AGENT_CACHE``."""
    root = tmp_path_factory.mktemp("extension-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUDA_AGENT_CACHE", str(root))
        yield root


def _entries(cache: Path) -> list[Path]:
    folder = cache / "extensions"
    return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.mark.slow
def test_a_work_directory_is_built_once_across_jobs_workers_and_sandboxes(relu, cache):
    from cuda_agent.kernel_sandbox._parent.compilers import prepare_extensions
    from cuda_agent.kernel_sandbox._parent.pool import Worker

    files = _files()
    # Built by a compile worker, in its own job folder (how the CUDA backend builds ahead of
    # the GPU job) ...
    compiler = Worker(_config().resolved(), 0, "compile")
    try:
        assert prepare_extensions(compiler, files, relu.name, "cpu") == (True, None)
    finally:
        compiler.kill()
    (entry,) = _entries(cache)
    assert entry.name.startswith("cuda_extension-")
    (library,) = entry.glob("*.so")
    built_at = library.stat().st_mtime_ns

    # ... then only loaded by the candidate workers' jobs: the path, the same files as a
    # mapping, and in a second sandbox (new processes) again and with the kernel bypassed.
    decoy = dict(files)
    decoy["model_new.py"] = files["model_new.py"].replace(
        "cuda_extension.relu_forward(x.contiguous())", "torch.relu(x)"
    )
    with Sandbox(_config()) as sandbox:
        results = [sandbox.evaluate(relu, c) for c in (WORKDIR, files)]
    with Sandbox(_config()) as sandbox:
        results.append(sandbox.evaluate(relu, files))
        bypassed = sandbox.evaluate(relu, decoy)
    assert [r.status for r in results] == ["ok"] * 3, [r.message for r in results]
    for result in results:
        assert (result.extra["extensions_built"], result.extra["extensions_cached"]) == (0, 1)
    assert bypassed.status == "rejected" and "torch_compute" in bypassed.flags
    assert _entries(cache) == [entry]
    assert library.stat().st_mtime_ns == built_at  # loaded, never rebuilt


@pytest.mark.slow
def test_a_changed_header_is_a_new_build_with_the_new_behaviour(relu, cache):
    zero, honest = _with_header_constant("0.0f"), _with_header_constant("1.0f")
    assert {k for k in zero if zero[k] != honest[k]} == {"kernels/relu.h"}
    before = set(_entries(cache))
    # Two workers on the same files at once: one builds, the other waits on the build
    # directory's lock and loads what it built.
    with Sandbox(_config(workers=2)) as sandbox:
        results = sandbox.evaluate_many([(relu, c) for c in (zero, zero, honest, honest)])
    statuses = [r.status for r in results]
    assert statuses == ["incorrect", "incorrect", "ok", "ok"], [r.message for r in results]
    built = [r.extra["extensions_built"] for r in results]
    assert sorted(built[:2]) == [0, 1] and sorted(built[2:]) == [0, 1], built
    assert len(set(_entries(cache)) - before) == 2


@pytest.mark.slow
def test_a_work_directorys_compiler_errors_name_its_own_files(relu, cache):
    files = _files()
    for source in ("kernels/relu.cpp", "kernels/relu_binding.cpp"):  # both fail at once
        files[source] = '#include "missing_header.h"\n' + files[source]
    with Sandbox(_config()) as sandbox:
        result = sandbox.evaluate(relu, files)
    assert result.status == "compile_error", result.message
    assert "kernels/relu.cpp:1" in result.message and "missing_header.h" in result.message
    assert str(cache) not in result.message and "job-" not in result.message
    assert "tree" + os.sep not in result.message
