#!/usr/bin/env bash
# The sandbox's GPU tests and benchmarks (issues "kernel_sandbox" and "reward hacking"), for the
# lent H200. Each part has its own time limit and writes as it goes, so a part that runs long
# leaves the others' results.
#   bash benchmarks/gpu/sandbox.sh OUT_DIR [breakdown|tests|costs|targets|rl_core|all]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:?usage: sandbox.sh OUT_DIR [breakdown|tests|costs|targets|rl_core|all]}"
PART="${2:-all}"
mkdir -p "$OUT"
export PYTHONPATH="$(ls -d packages/*/src | tr '\n' ':')src${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_AGENT_CACHE="${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv > "$OUT/gpu.txt" 2>&1
python -c "import torch, cupy, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cupy', cupy.__version__, 'triton', triton.__version__)" >> "$OUT/gpu.txt" 2>&1
want() { [[ $PART == all || $PART == "$1" ]]; }
if want breakdown; then  # ~1 min: where a job's time goes
  timeout 120 python benchmarks/gpu/job_breakdown.py "$OUT/job_breakdown.json" > "$OUT/job_breakdown.log" 2>&1
  tail -15 "$OUT/job_breakdown.log"
fi
if want tests; then  # ~6 min: GPU tests of the sandbox and the GPU red-team cases, three at once
  T=packages/kernel_sandbox/tests
  P="python -m pytest -m gpu -q -rA -p no:cacheprovider"
  timeout 420 $P $T/test_sandbox_cuda.py -k documented > "$OUT/gpu_tests_formats.txt" 2>&1 &
  timeout 420 $P $T/test_sandbox_cuda.py -k "not documented" > "$OUT/gpu_tests_sandbox.txt" 2>&1 &
  timeout 420 $P $T/test_redteam.py $T/test_builtin_solutions.py > "$OUT/gpu_tests_redteam.txt" 2>&1 &
  wait
  for f in formats sandbox redteam; do echo "gpu tests $f: $(tail -1 "$OUT/gpu_tests_$f.txt")"; done
fi
if want costs; then  # ~2 min: load_inline builds, plain vs the sandbox
  timeout 200 python benchmarks/gpu/load_inline_cost.py "$OUT/load_inline_cost.json" > "$OUT/load_inline_cost.log" 2>&1
  tail -4 "$OUT/load_inline_cost.log"
fi
if want targets; then  # ~5 min: latency, throughput, A/A over 200 comparisons, baseline cache
  timeout 120 python benchmarks/gpu/aa_variants.py "$OUT/aa_variants.json" > "$OUT/aa_variants.log" 2>&1; tail -30 "$OUT/aa_variants.log"
  timeout 480 python benchmarks/gpu/sandbox_targets.py "$OUT/sandbox_targets.json" > "$OUT/sandbox_targets.log" 2>&1
  grep -v "^{" "$OUT/sandbox_targets.log" | tail -12
fi
if want rl_core; then  # ~1 min: rl_core benchmarks under the gpu marker
  timeout 200 python -m pytest benchmarks/rl_core -p no:cacheprovider --benchmark-enable \
    --benchmark-json="$OUT/rl_core_gpu.json" -o addopts="" -m gpu -q > "$OUT/rl_core_gpu.log" 2>&1
  tail -3 "$OUT/rl_core_gpu.log"
fi
