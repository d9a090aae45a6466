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
export PYTHONPATH="$(ls -d packages/*/src | tr '\n' ':')src${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_AGENT_CACHE="${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv > "$OUT/gpu.txt" 2>&1
python -c "import torch, cupy, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cupy', cupy.__version__, 'triton', triton.__version__)" >> "$OUT/gpu.txt" 2>&1
if [[ $PART == tests ]]; then  # one file at a time: three at once shared the GPU and were all cut
  T=packages/kernel_sandbox/tests
  P="python -m pytest -m gpu -q -rA -p no:cacheprovider --durations=10"
  for f in ${TEST_FILES:-test_sandbox_cuda test_sandbox_memory test_redteam}; do
    timeout "${TEST_SECONDS:-200}" $P $T/$f.py > "$OUT/gpu_tests_$f.txt" 2>&1
    echo "gpu tests $f (rc $?): $(grep -E '(passed|failed)' "$OUT/gpu_tests_$f.txt" | tail -1)"
  done
  grep -E "^(FAILED|ERROR)" "$OUT"/gpu_tests_*.txt | head -20
fi
if [[ $PART == large ]]; then  # ~1.5 min
  timeout 170 python benchmarks/gpu/large_outputs.py $KB "$OUT/large_outputs.json" > "$OUT/large_outputs.log" 2>&1
  cut -c1-400 "$OUT/large_outputs.log" | tail -6
fi
if [[ $PART == sweep ]]; then
  [[ -f .carry/kernelbench_sweep.json ]] && cp .carry/kernelbench_sweep.json "$OUT/kernelbench_sweep.json"
  timeout $((SECONDS_LEFT + 60)) python benchmarks/gpu/kernelbench_sweep.py $KB "$OUT/kernelbench_sweep.json" \
    --levels "$LEVELS" --time-left "$SECONDS_LEFT" > "$OUT/kernelbench_sweep.log" 2>&1
  grep -v " ok " "$OUT/kernelbench_sweep.log" | tail -40
fi
