#!/usr/bin/env bash
# The whole test suite: install (dev), lint, format check, type check, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# Test files in parallel processes (pytest-xdist), a file per process at a time so that a
# module's shared fixtures are built once. Most tests keep two cores busy (torch's threads, a
# sandbox's workers, compilers): one process per two cores, at most 4. On a 2-core machine
# that is one process (there two took 39.4 min of pytest, one 28.9 min: the suite is
# CPU-bound). CUDA_AGENT_TEST_PROCESSES=N overrides it.
cores=$(nproc 2>/dev/null || echo 2)
half=$(( cores / 2 ))
processes=${CUDA_AGENT_TEST_PROCESSES:-$(( half < 1 ? 1 : (half < 4 ? half : 4) ))}
if [ "$processes" -gt 1 ]; then
    .venv/bin/python -m pytest -n "$processes" --dist loadfile "$@"
else
    .venv/bin/python -m pytest "$@"
fi
