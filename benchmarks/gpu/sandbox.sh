#!/usr/bin/env bash
# The sandbox's GPU tests and benchmarks (issue "kernel_sandbox"), for the lent H200.
#   bash benchmarks/gpu/sandbox.sh OUT_DIR [tests|costs|targets|all]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:?usage: sandbox.sh OUT_DIR [tests|costs|targets|all]}"
PART="${2:-all}"
mkdir -p "$OUT"
export PYTHONPATH="packages/kernel_sandbox/src:packages/reward/src:packages/rl_core/src:packages/policy/src:packages/agent/src:src${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_AGENT_CACHE="${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv > "$OUT/gpu.txt" 2>&1
python -c "import torch, cupy, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cupy', cupy.__version__, 'triton', triton.__version__)" >> "$OUT/gpu.txt" 2>&1
if [[ $PART == tests || $PART == all ]]; then
  python -m pytest -m gpu -q -rA -p no:cacheprovider packages/kernel_sandbox 2>&1 | tail -80 > "$OUT/gpu_tests_sandbox.txt"
  echo "gpu tests: $(tail -1 "$OUT/gpu_tests_sandbox.txt")"
fi
if [[ $PART == costs || $PART == tests || $PART == all ]]; then
  python benchmarks/gpu/load_inline_cost.py "$OUT/load_inline_cost.json" > "$OUT/load_inline_cost.log" 2>&1
  tail -4 "$OUT/load_inline_cost.log"
fi
if [[ $PART == targets || $PART == all ]]; then
  python benchmarks/gpu/sandbox_targets.py "$OUT/sandbox_targets.json" > "$OUT/sandbox_targets.log" 2>&1
  grep -v "^{" "$OUT/sandbox_targets.log" | tail -12
fi
