#!/usr/bin/env bash
# Everything GPU in one go, for the lent H200 (no package registry there: sources on PYTHONPATH).
#   bash benchmarks/gpu/run.sh OUT_DIR
# Writes under OUT_DIR: gpu_tests.txt (pytest -m gpu), sandbox_builtin_cuda.json (figures),
# train_gpu/ (a short `cuda-agent train` with a tiny random model: same command, CUDA backend).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:?usage: run.sh OUT_DIR}"
mkdir -p "$OUT"
export PYTHONPATH="$(ls -d packages/*/src | tr '\n' ':')src${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_AGENT_CACHE="${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
python -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cupy', cupy.__version__)" >> "$OUT/gpu.txt" 2>&1

python -m pytest -m gpu -q -rA -p no:cacheprovider 2>&1 | tail -60 > "$OUT/gpu_tests.txt"
echo "gpu tests: $(tail -1 "$OUT/gpu_tests.txt")"

python benchmarks/sandbox_builtin.py --backend cuda --rounds 2 --out "$OUT/sandbox_builtin_cuda.json" \
    > "$OUT/sandbox_builtin_cuda.log" 2>&1
tail -1 "$OUT/sandbox_builtin_cuda.log"

python benchmarks/gpu/launch_overhead.py "$OUT/launch_overhead.json" > "$OUT/launch_overhead.log" 2>&1
tail -8 "$OUT/launch_overhead.log"

python -c "from cuda_agent.policy.testing import save_tiny_model; save_tiny_model('/tmp/tiny-model')"
python -m cuda_agent.runner train --model /tmp/tiny-model --out "$OUT/train_gpu" --steps 2 \
    --warmstart-steps 2 --tasks-per-step 2 --group-size 2 --max-new-tokens 32 --quiet \
    > "$OUT/train_gpu.log" 2>&1
echo "train on GPU exit code: $?"
rm -rf "$OUT/train_gpu/checkpoints" "$OUT/train_gpu/adapter"
tail -20 "$OUT/train_gpu.log"
