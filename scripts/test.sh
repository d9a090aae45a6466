#!/usr/bin/env bash
# The whole test suite: install (dev), lint, format check, type check, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# Test files in parallel processes (pytest-xdist), a file per process at a time so that a
# module's shared fixtures are built once, at least two processes and at most four, with
# torch's threads split between them (OMP_NUM_THREADS, unless set). On a 2-core machine that
# is two processes of one thread: measured on 2026-12-05 (AMD EPYC, 2 cores) pytest took
# 1,111 s against 1,244 s in one process of two threads (the suite keeps 2 cores only 65%
# busy in one process: compilers and GGUF conversion run on one core, the sandbox's tests
# wait on deadlines); two processes of two threads each took 39.4 min against 28.9 (threads
# fighting for the cores). CUDA_AGENT_TEST_PROCESSES=N overrides the count.
cores=$(nproc 2>/dev/null || echo 2)
half=$(( cores / 2 ))
processes=${CUDA_AGENT_TEST_PROCESSES:-$(( half < 2 ? 2 : (half < 4 ? half : 4) ))}
threads=$(( cores / processes ))
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( threads < 1 ? 1 : threads ))}
if [ "$processes" -gt 1 ]; then
    .venv/bin/python -m pytest -n "$processes" --dist loadfile "$@"
else
    .venv/bin/python -m pytest "$@"
fi
