"""Static (AST) checks of candidate Python for reward hacks, run before any candidate code.

``check_candidate_source(source)`` returns ``Finding`` s, each with a code (the flag put in
``EvalResult.flags``), the line, and a short reason an LLM can act on. The sandbox runs it in the
caller's process (parsing is safe; nothing is executed) and rejects a candidate with findings
without using a worker. Runtime checks in the worker catch what static analysis cannot see
(operators reached through aliases, C++ extensions that call PyTorch, threads, caches).

What is checked, and why (each is a hack seen in the wild; see the package README's table):

- ``torch_compute``: PyTorch computing in the forward path (``torch.*``, ``F.*``, tensor compute
  methods, calling ``nn`` layers) instead of the candidate's kernels. Allocation, views,
  reshapes, casts and copies are allowed; library operators (``matmul``, ``conv2d``, ...) only
  when listed in ``allowed_torch_ops`` (as the reference system allows cuBLAS / cuDNN).
- ``fallback``: ``try`` / ``except`` in the forward path (a PyTorch fallback when the kernel
  fails).
- ``reference_model``: subclassing, calling or importing the reference ``Model``.
- ``concurrency``: threads, processes, asyncio (work the timer does not see).
- ``side_stream``: creating or switching CUDA streams (work the timer does not see).
- ``patching``: assigning to attributes of imported modules (timers, events, ``synchronize``,
  anything in torch), ``setattr`` / ``delattr``.
- ``introspection``: ``gc``, ``inspect``, frames, ``globals()``, ``sys.modules``, dunder access.
- ``file_access``: files, the environment, processes (``open``, ``os.*``, ``sys.exit``, ...).
- ``output_cache``: module-level containers filled in the forward path, memoising decorators,
  state stored on ``self`` during ``forward``.
- ``library_compute``: importing a compute library (numpy, cupy, scipy, numba, jax, ...): a
  trivial kernel launched for show while the library computes passes the launch counter.

Forward-path rules judge the code the candidate runs: methods, and module-level functions that
code reaches. Helpers nothing calls (``get_inputs`` / ``get_init_inputs`` copied from the task,
as KernelBench's own kernels carry them) are not judged by them; whole-module rules still are.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from ._parent.static_checker import Checker
from ._parent.static_rules import STREAM_SOURCE_MARKERS
from .result import EvalResult


@dataclass(frozen=True)
class Finding:
    """One reason to reject a candidate: ``code`` is the flag, ``reason`` tells the fix."""

    code: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


def check_candidate_source(
    source: str, *, allowed_torch_ops: Iterable[str] = (), filename: str = "model_new.py"
) -> list[Finding]:
    """Findings for one Python source (empty when it looks honest, or does not parse: the
    worker then reports the syntax error). ``allowed_torch_ops`` names PyTorch operators the
    forward path may call (``"matmul"``, ``"conv2d"``, ...)."""
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    checker = Checker(tree, frozenset(allowed_torch_ops))
    try:
        checker.run()
    except RecursionError:
        return [Finding("introspection", 1, "the module is too deeply nested to analyse")]
    unique: dict[tuple[str, int, str], Finding] = {}
    for code, line, reason in checker.findings:
        unique.setdefault((code, line, reason), Finding(code, line, reason))
    return sorted(unique.values(), key=lambda f: (f.line, f.code))


def check_candidate_files(
    files: dict[str, str], *, allowed_torch_ops: Iterable[str] = ()
) -> list[Finding]:
    """``check_candidate_source`` over every Python file of a work directory, plus a scan of
    its kernel sources for side streams."""
    findings: list[Finding] = []
    for name, text in sorted(files.items()):
        if name.endswith(".py"):
            for f in check_candidate_source(
                text, allowed_torch_ops=allowed_torch_ops, filename=name
            ):
                findings.append(Finding(f.code, f.line, f"{name}: {f.reason}"))
        else:
            for marker in STREAM_SOURCE_MARKERS:
                if marker in text:
                    line = text[: text.index(marker)].count("\n") + 1
                    findings.append(
                        Finding(
                            "side_stream",
                            line,
                            f"{name}: {marker} creates a stream other than the current one; "
                            "launch on the current stream (work elsewhere escapes the timer)",
                        )
                    )
    return findings


def static_findings(
    candidate: str | dict[str, str], *, allowed_torch_ops: Iterable[str] = ()
) -> list[Finding]:
    """Findings for a candidate as a job carries it (module source or work-directory files)."""
    if isinstance(candidate, dict):
        return check_candidate_files(candidate, allowed_torch_ops=allowed_torch_ops)
    return check_candidate_source(candidate, allowed_torch_ops=allowed_torch_ops)


def rejection(task: str, backend: str, findings: list[Finding]) -> EvalResult:
    """The verdict on a candidate the static checks refused: every finding, one per line."""
    lines = [str(f) for f in findings[:10]]
    if len(findings) > 10:
        lines.append(f"... and {len(findings) - 10} more")
    return EvalResult(
        status="rejected",
        message="refused before running:\n" + "\n".join(lines),
        task=task,
        backend=backend,
        flags=tuple(sorted({f.code for f in findings})),
        extra={
            "findings": [{"code": f.code, "line": f.line, "reason": f.reason} for f in findings]
        },
    )
