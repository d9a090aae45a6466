"""``torch.utils.cpp_extension`` as candidates see it: cached builds, counted calls.

KernelBench-style candidates build their kernels with ``load_inline`` (or ``load``). The worker
installs these hooks before importing a candidate:

- **Content-addressed build cache.** Each extension is built in a directory named by a hash of
  everything that decides the binary (name, sources, flags, torch / CUDA / Python versions, GPU
  architecture) under the shared cache (``$CUDA_AGENT_CACHE/extensions``). The same extension
  asked for again, by any worker, in any run, is only loaded: no compiler runs. A file lock per
  directory makes concurrent builds of one extension build it once; a build killed at its
  deadline leaves no lock that would stall the next one. ``load``'s files (a work directory's
  ``kernels/``) are keyed by relative name and content, not by the job's folder, and built from
  a copy in the build directory (``_candidate.extension_sources``), so the next job with the
  same files loads the library instead of building it again.
- **Each content its own module.** An extension is built and imported under its name plus its
  content hash (``fast_matmul_<hash>``): Python keeps an extension module loaded under a name for
  the life of the process, so a second candidate's ``load_inline(name="fast_matmul", ...)``
  with other sources would otherwise run the first one's code (seen on the H200 with
  KernelBench's own adversarial kernels; reproduced on the CPU). A binding that spells the name
  (``PYBIND11_MODULE(fast_matmul, m)``) is rewritten to ``TORCH_EXTENSION_NAME``.
- **Compiler errors as compile errors.** A failed build becomes a ``CompileError`` whose text
  is trimmed to ``file:line: error: message`` lines, not the harness's traceback.
- **Counted, timed calls.** Every call of a function of such an extension counts as a
  custom-kernel launch, exactly like a ``cpu_kernel`` / ``cuda_kernel`` call: a candidate that
  builds an extension but computes with PyTorch is still caught by the no-custom-kernel check.
  The CPU time inside those calls is summed (``launch.kernel_seconds``), and the identifiers of
  the sources are kept as the names the candidate's own kernels may have
  (``launch.kernel_names``): the decoy checks (``_candidate.decoys``) compare both with what ran.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import platform
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import launch
from .._shared.compile import cache_dir, exclusive, trim_compiler_log
from ..errors import CompileError
from . import extension_sources
from .extension_sources import SourceTree


class _CountingExtension:
    """Proxy of an extension module whose callables count a launch per call."""

    def __init__(self, module: Any) -> None:
        object.__setattr__(self, "_module", module)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if callable(value) and not isinstance(value, type):

            @functools.wraps(value)
            def counted(*args: Any, **kwargs: Any) -> Any:
                return launch._timed(value, *args, **kwargs)

            # Cached on the proxy: later look-ups (every forward call) skip __getattr__.
            self.__dict__[name] = counted
            return counted
        return value

    def __dir__(self) -> list[str]:
        return dir(self._module)

    def __repr__(self) -> str:
        return f"<counted extension {self._module!r}>"


def _build_key(kind: str, arguments: dict[str, Any], tree: SourceTree | None = None) -> str:
    import torch

    payload = dict(arguments)
    if tree is not None:  # load: the files' relative names and contents stand for the paths
        payload.pop("extra_include_paths", None)
        payload["sources"] = tree.identity()
    arch = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    if not arch and torch.cuda.is_available():
        arch = ".".join(map(str, torch.cuda.get_device_capability()))
    identity = [
        kind,
        payload,
        torch.__version__,
        torch.version.cuda,
        arch,
        sys.version_info[:2],
        platform.machine(),
    ]
    text = json.dumps(identity, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _paths(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(p) for p in value or []]


def _library_mtimes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in directory.glob("*.so")}


# This job's extensions: how many were compiled, how many only loaded from the cache.
_outcomes = {"built": 0, "cached": 0}


def reset_outcomes() -> None:
    _outcomes.update(built=0, cached=0)


def outcomes() -> dict[str, int]:
    """``{"extensions_built": n, "extensions_cached": m}`` since ``reset_outcomes`` (empty if
    the job loaded no extension)."""
    if not any(_outcomes.values()):
        return {}
    return {f"extensions_{k}": v for k, v in _outcomes.items()}


@contextlib.contextmanager
def _exclusive(directory: Path) -> Iterator[None]:
    """Hold the directory's build lock (``compile.exclusive``). ``fcntl`` locks vanish with
    their process, so unlike torch's own lock file, a build killed at a deadline cannot leave
    the directory locked; any torch lock file found while we hold ours is such a leftover, and
    is removed."""
    with exclusive(directory / ".cuda-agent.lock"):
        (directory / "lock").unlink(missing_ok=True)
        yield


def _cached_loader(kind: str, original: Any) -> Any:
    import torch.utils.cpp_extension as cpp_extension

    signature = inspect.signature(original)

    def loader(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        arguments = dict(bound.arguments)
        arguments.pop("build_directory", None)
        arguments.pop("verbose", None)
        tree = None
        try:
            if kind == "load":  # read once: what is keyed is what is built
                tree = extension_sources.plan(
                    _paths(arguments.get("sources")),
                    _paths(arguments.get("extra_include_paths")),
                    Path.cwd(),
                )
            key = _build_key(kind, arguments, tree)
        except OSError as exc:
            raise CompileError(f"{kind}: cannot read a source file: {exc}") from None
        given = str(arguments.get("name", "ext"))
        name = re.sub(r"[^A-Za-z0-9_]", "_", given)[:40]
        directory = cache_dir("extensions") / f"{name}-{key}"
        unique = f"{name}_{key}"
        launch._register_sources(*(tree.texts() if tree else _source_texts(arguments)))
        with _exclusive(directory):
            _own_module_name(kind, arguments, given, unique)
            copies = directory / "tree"
            if tree is not None:
                binding = _spelled_binding(given)
                sources, includes = tree.write(copies, lambda t: binding.sub(_BINDING, t))
                arguments["sources"] = sources
                arguments["extra_include_paths"] = includes or None
            # torch renames an extension rebuilt under a known name (name_v1, ...) and would
            # rebuild a cached one; each directory holds one content, so start from version 0.
            cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(unique, None)
            before = _library_mtimes(directory)
            try:
                module = original(**arguments, build_directory=str(directory))
            except RuntimeError as exc:
                text = str(exc)
                if "Error building extension" not in text:
                    raise
                text = text.replace(str(copies / "job") + os.sep, "")
                log = trim_compiler_log(text, str(directory))
                raise CompileError(f"{kind} failed to build the extension:\n{log}", log) from None
            built = before != _library_mtimes(directory)
            _outcomes["built" if built else "cached"] += 1
        # is_python_module=False returns None or a path: nothing to wrap.
        return _CountingExtension(module) if hasattr(module, "__dict__") else module

    loader._cuda_agent_hooked = True  # type: ignore[attr-defined]
    functools.update_wrapper(loader, original)
    return loader


def _source_texts(arguments: dict[str, Any]) -> list[str]:
    """The C++ / CUDA text a ``load_inline`` extension is built from (its kernels' names are
    in it)."""
    texts = []
    for field in ("cpp_sources", "cuda_sources"):
        value = arguments.get(field)
        items = [value] if isinstance(value, str) else list(value or [])
        texts += [v for v in items if isinstance(v, str)]
    return texts


_BINDING = "PYBIND11_MODULE(TORCH_EXTENSION_NAME,"


def _spelled_binding(name: str) -> re.Pattern[str]:
    return re.compile(r"PYBIND11_MODULE\s*\(\s*" + re.escape(name) + r"\s*,")


def _own_module_name(kind: str, arguments: dict[str, Any], given: str, unique: str) -> None:
    """Build under ``unique``; a binding that spells ``given`` is pointed at the new name
    (``load``'s files are rewritten as they are copied into the build directory)."""
    arguments["name"] = unique
    if kind != "load_inline":
        return
    binding = _spelled_binding(given)
    for field in ("cpp_sources", "cuda_sources"):
        value = arguments.get(field)
        if isinstance(value, str):
            arguments[field] = binding.sub(_BINDING, value)
        elif isinstance(value, list | tuple):
            arguments[field] = [binding.sub(_BINDING, v) if isinstance(v, str) else v
                                for v in value]  # fmt: skip


def count_triton_launches() -> None:
    """Count launches of ``@triton.jit`` kernels as custom-kernel launches, if the candidate
    imported Triton. (Kernels that ``torch.compile`` generates are launched another way and are
    not counted: they are PyTorch's compute, not the candidate's.)"""
    triton_jit = sys.modules.get("triton.runtime.jit")
    jit_function = getattr(triton_jit, "JITFunction", None)
    if jit_function is None or getattr(jit_function.run, "_cuda_agent_hooked", False):
        return
    original = jit_function.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("warmup"):
            return original(self, *args, **kwargs)
        name = getattr(self, "__name__", None) or getattr(getattr(self, "fn", None), "__name__", "")
        launch._kernel_names.add(str(name))
        return launch._timed(original, self, *args, **kwargs)

    run._cuda_agent_hooked = True  # type: ignore[attr-defined]
    functools.update_wrapper(run, original)
    jit_function.run = run


def build_work_directory(root: Path, sources: list[str], with_cuda: bool) -> Any:
    """Build a work directory's ``kernels/`` into the extension ``cuda_extension`` (cached)
    and make ``import cuda_extension`` return it."""
    import torch.utils.cpp_extension as cpp_extension

    module = cpp_extension.load(
        name="cuda_extension",
        sources=[str(root / s) for s in sources],
        extra_cflags=["-O3"],
        extra_cuda_cflags=["-O3", "--use_fast_math"],
        extra_include_paths=[str(root / "kernels")],
        with_cuda=with_cuda,
    )
    sys.modules["cuda_extension"] = module
    return module


def install() -> None:
    """Wrap ``load_inline`` and ``load`` (cached, counted). Importing cpp_extension is cheap;
    compilation happens only if the candidate calls them."""
    import torch.utils.cpp_extension as cpp_extension

    for kind in ("load_inline", "load"):
        original = getattr(cpp_extension, kind)
        if getattr(original, "_cuda_agent_hooked", False):
            continue
        setattr(cpp_extension, kind, _cached_loader(kind, original))
