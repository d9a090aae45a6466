#!/usr/bin/env bash
# There (the H200): issue 18's figures, the sandbox through Ray against the local pool.
#   call 1 (carry .ray-a):             bash benchmarks/gpu/ray.sh stash
#   call 2 (carry .ray-b, .whl-ray):   CUDA_AGENT_COMMIT=<commit> bash benchmarks/gpu/ray.sh run OUT [bench]
# ("bench": skip the Ray tests, so the benchmark has the whole call; the recorded run of
# 2026-12-01 left the Ray half of the benchmark about 66 s, and its warm-up did not finish)
# (split_ray.sh makes the halves here). Call 2 joins the wheel and checks its sha256, installs
# Ray, runs the Ray tests (a local cluster, the CPU backend) and benchmarks/ray_overhead.py on
# the CUDA backend, one slot: OUT/ray_overhead.json, OUT/ray_tests.txt, OUT/gpu.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
STASH="${CUDA_AGENT_RAY_STASH:-/tmp/cuda-agent-ray}"
if [ "${1:-}" = "stash" ]; then
  mkdir -p "$STASH" && cp .ray-a/part-aa "$STASH/part-aa" && echo "ray.sh: first half stashed"
  exit 0
fi
OUT="${2:?usage: ray.sh stash | ray.sh run OUT}"
mkdir -p "$OUT"
read -r NAME SUM < .ray-b/wheel.txt
[ -f "$STASH/part-aa" ] || { echo "ray.sh: the first half is missing (machine given back?)" >&2; exit 1; }
cat "$STASH/part-aa" .ray-b/part-ab > "/tmp/$NAME"
[ "$(sha256sum "/tmp/$NAME" | awk '{print $1}')" = "$SUM" ] || { echo "ray.sh: sha256 mismatch" >&2; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site-ray "/tmp/$NAME" .whl-ray/*.whl || exit 1
export PYTHONPATH="/tmp/site-ray:$(ls -d packages/*/src | tr '\n' ':')src"
export PATH="/tmp/site-ray/bin:$PATH"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, ray; print('torch', torch.__version__, 'ray', ray.__version__)"; } > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
if [ "${3:-}" != "bench" ]; then
  python3 -m pytest -q -m ray -p no:cacheprovider packages/kernel_sandbox/tests/test_ray_sandbox.py \
      > "$OUT/ray_tests.txt" 2>&1; tail -3 "$OUT/ray_tests.txt"
fi
python3 benchmarks/ray_overhead.py "$OUT/ray_overhead.json" --backend cuda --workers 1 --rounds 2
