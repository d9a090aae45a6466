"""The compiled-kernel cache under concurrency: processes that ask for the same source at once
(lanes, compile workers, two runs sharing ``$CUDA_AGENT_CACHE``) build it once; the others wait
for that build and load it. A build that fails leaves the key free for the next one."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent.kernel_sandbox._shared.compile import compile_shared_library
from cuda_agent.kernel_sandbox.errors import CompileError

SOURCE = "int twice(int x) { return 2 * x; }\n"


def _counting_compiler(folder: Path) -> Path:
    """A ``cc`` that logs each compilation (not ``--version``) to ``calls.log`` and takes a
    second over it, so that builds started together overlap."""
    log = folder / "calls.log"
    wrapper = folder / "cc"
    wrapper.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" != "--version" ]; then echo "$$" >> {log}; sleep 1; fi
        exec cc "$@"
        """)
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def test_processes_compiling_one_source_at_once_build_it_once(tmp_path):
    wrapper = _counting_compiler(tmp_path)
    env = {**os.environ, "CC": str(wrapper), "CUDA_AGENT_CACHE": str(tmp_path / "cache")}
    script = (
        "from cuda_agent.kernel_sandbox._shared.compile import compile_shared_library\n"
        f"print(compile_shared_library({SOURCE!r}, flags=('-O0', '-fPIC', '-shared')))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    paths = {proc.communicate(timeout=300)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    assert len(paths) == 1 and Path(paths.pop()).is_file()
    assert len((tmp_path / "calls.log").read_text().splitlines()) == 1


def test_a_failed_build_leaves_the_key_to_the_next_one(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "cache"))
    broken = SOURCE.replace("2 * x", "2 * y")
    with pytest.raises(CompileError, match="compilation failed"):
        compile_shared_library(broken, flags=("-O0", "-fPIC", "-shared"))
    with pytest.raises(CompileError, match="compilation failed"):  # no lock left behind
        compile_shared_library(broken, flags=("-O0", "-fPIC", "-shared"))
    assert compile_shared_library(SOURCE, flags=("-O0", "-fPIC", "-shared")).is_file()
