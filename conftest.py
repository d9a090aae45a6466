"""Repository-wide pytest setup: GPU tests are skipped where torch sees no CUDA device, and the
session has one cache of its own.

The cache (``$CUDA_AGENT_CACHE``: built extensions, converted models, measured baselines) is a
fresh directory per test process unless ``CUDA_AGENT_CACHE`` is set already: what one test
builds (the documented example extensions, the embedded model's float32 copy) the others load,
and no test reads what an earlier run or a user's own runs left in ``~/.cache/cuda-agent``.
Tests that need an empty cache point ``CUDA_AGENT_CACHE`` at their own directory.

The sandbox's zygote (the process its CPU workers are forked from) is kept for the session
rather than closed a few seconds after each test's pool: one start of it serves every test.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

import pytest

_OWN_CACHE: list[str] = []
_SESSION = contextlib.ExitStack()


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("CUDA_AGENT_CACHE"):
        _OWN_CACHE.append(tempfile.mkdtemp(prefix="cuda-agent-test-cache-"))
        os.environ["CUDA_AGENT_CACHE"] = _OWN_CACHE[0]
    from cuda_agent.kernel_sandbox._parent import spawn

    _SESSION.enter_context(spawn.hold())


@pytest.fixture(scope="session")
def session_cache() -> str:
    """The session's ``$CUDA_AGENT_CACHE`` (for a test inside a module that set its own)."""
    return _OWN_CACHE[0] if _OWN_CACHE else os.environ["CUDA_AGENT_CACHE"]


def pytest_unconfigure(config: pytest.Config) -> None:
    _SESSION.close()
    for path in _OWN_CACHE:
        shutil.rmtree(path, ignore_errors=True)
        if os.environ.get("CUDA_AGENT_CACHE") == path:
            del os.environ["CUDA_AGENT_CACHE"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
