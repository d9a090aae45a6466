"""Counting calls into C++/CUDA extensions built by ``torch.utils.cpp_extension``.

KernelBench-style candidates build their kernels with ``load_inline`` (or ``load``) instead of
the sandbox's launcher. The worker installs these hooks before importing a candidate, so every
call of a function of such an extension counts as a custom-kernel launch, exactly like a
``cpu_kernel`` / ``cuda_kernel`` call: a candidate that builds an extension but computes with
PyTorch is still caught by the no-custom-kernel check.
"""

from __future__ import annotations

import functools
from typing import Any

from . import launch


class _CountingExtension:
    """Proxy of an extension module whose callables count a launch per call."""

    def __init__(self, module: Any) -> None:
        object.__setattr__(self, "_module", module)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if callable(value) and not isinstance(value, type):

            @functools.wraps(value)
            def counted(*args: Any, **kwargs: Any) -> Any:
                launch._count_launch()
                return value(*args, **kwargs)

            # Cached on the proxy: later look-ups (every forward call) skip __getattr__.
            self.__dict__[name] = counted
            return counted
        return value

    def __dir__(self) -> list[str]:
        return dir(self._module)

    def __repr__(self) -> str:
        return f"<counted extension {self._module!r}>"


def install() -> None:
    """Wrap ``load_inline`` and ``load`` so the modules they return count their calls.

    Importing cpp_extension is cheap; compilation happens only if the candidate calls them.
    """
    import torch.utils.cpp_extension as cpp_extension

    for name in ("load_inline", "load"):
        original = getattr(cpp_extension, name)
        if getattr(original, "_cuda_agent_counted", False):
            continue

        def counted_loader(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            module = _original(*args, **kwargs)
            # is_python_module=False returns None or a path: nothing to wrap.
            return _CountingExtension(module) if hasattr(module, "__dict__") else module

        counted_loader._cuda_agent_counted = True  # type: ignore[attr-defined]
        functools.update_wrapper(counted_loader, original)
        setattr(cpp_extension, name, counted_loader)
