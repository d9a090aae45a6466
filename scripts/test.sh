#!/usr/bin/env bash
# The whole test suite: install (dev), lint, format check, type check, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# Test files in parallel processes (pytest-xdist), a file per process at a time so that a
# module's shared fixtures are built once: most of the suite waits on compilers and sandbox
# workers, one process each. At most 4 (each process starts its own sandboxes and models);
# CUDA_AGENT_TEST_PROCESSES=1 runs them in this process, in order.
cores=$(nproc 2>/dev/null || echo 2)
processes=${CUDA_AGENT_TEST_PROCESSES:-$(( cores < 4 ? cores : 4 ))}
if [ "$processes" -gt 1 ]; then
    .venv/bin/python -m pytest -n "$processes" --dist loadfile "$@"
else
    .venv/bin/python -m pytest "$@"
fi
