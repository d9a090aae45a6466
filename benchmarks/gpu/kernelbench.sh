#!/usr/bin/env bash
# Issue 13 on the lent H200: the sandbox's GPU tests (red-team cases, device exchange, memory,
# same-name extensions), the 19_ReLU large-output figure and the KernelBench sweep.
#   bash benchmarks/gpu/kernelbench.sh OUT_DIR [tests|large|sweep] [LEVELS] [SECONDS]
# KernelBench's problem folders are carried in .kernelbench/KernelBench/level{1,2,3} (fetched
# from the public repository here, never committed). The sweep resumes from OUT_DIR/../carry
# (.carry/kernelbench_sweep.json, carried back in) when a previous call was cut.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:?usage: kernelbench.sh OUT_DIR [tests|large|sweep] [LEVELS] [SECONDS]}"
PART="${2:-tests}"
LEVELS="${3:-1,2,3}"
SECONDS_LEFT="${4:-500}"
KB=.kernelbench/KernelBench
mkdir -p "$OUT"
export PYTHONPATH="packages/kernel_sandbox/src:packages/reward/src:packages/rl_core/src:packages/policy/src:packages/agent/src:src${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_AGENT_CACHE="${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv > "$OUT/gpu.txt" 2>&1
python -c "import torch, cupy, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cupy', cupy.__version__, 'triton', triton.__version__)" >> "$OUT/gpu.txt" 2>&1
if [[ $PART == tests ]]; then  # ~6 min, three at once
  T=packages/kernel_sandbox/tests
  P="python -m pytest -m gpu -q -rA -p no:cacheprovider"
  timeout 400 $P $T/test_sandbox_cuda.py $T/test_sandbox_memory.py > "$OUT/gpu_tests_sandbox.txt" 2>&1 &
  timeout 400 $P $T/test_redteam.py > "$OUT/gpu_tests_redteam.txt" 2>&1 &
  timeout 400 $P $T/test_builtin_solutions.py > "$OUT/gpu_tests_builtin.txt" 2>&1 &
  wait
  for f in sandbox redteam builtin; do echo "gpu tests $f: $(tail -1 "$OUT/gpu_tests_$f.txt")"; done
  grep -E "^(FAILED|ERROR)" "$OUT"/gpu_tests_*.txt | head -20
fi
if [[ $PART == large || $PART == tests ]]; then  # ~1.5 min
  timeout 170 python benchmarks/gpu/large_outputs.py $KB "$OUT/large_outputs.json" > "$OUT/large_outputs.log" 2>&1
  cut -c1-400 "$OUT/large_outputs.log" | tail -6
fi
if [[ $PART == sweep ]]; then
  [[ -f .carry/kernelbench_sweep.json ]] && cp .carry/kernelbench_sweep.json "$OUT/kernelbench_sweep.json"
  timeout $((SECONDS_LEFT + 60)) python benchmarks/gpu/kernelbench_sweep.py $KB "$OUT/kernelbench_sweep.json" \
    --levels "$LEVELS" --time-left "$SECONDS_LEFT" > "$OUT/kernelbench_sweep.log" 2>&1
  grep -v " ok " "$OUT/kernelbench_sweep.log" | tail -40
fi
