#!/usr/bin/env bash
# The whole test suite: install (dev), lint, format check, type check, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
