#!/usr/bin/env bash
# Issue 19 on the GPUs of one host, N = 1 .. the GPUs present (at most MAX_GPUS, default 2):
#   bash benchmarks/gpu/multi_gpu.sh OUT_DIR [PARTS]   PARTS: a comma list of pool, rl, replica;
#                                                      all (the default) = pool,rl. ~7 min.
# pool:    pool_scaling.py, the sandbox pool with one slot per GPU over the built-in suite
#          (evaluations per minute per N, speedup, no two timings on one GPU at once), plus a
#          control of two slots on one GPU where that check must find overlaps. ~3 min.
# rl:      rl_step_sharded.py under torchrun, the Qwen2.5-7B shape with LoRA 32 (the multi-gpu
#          preset), the policy sharded (FSDP2) over N processes; a short untimed first step
#          (nothing compiles on the sharded path) and one timed step. ~2 min per N.
# replica: the same with a whole replica per process (--no-shard: the compiled static-cache
#          decoder samples; the first step, full length, compiles it), only when named.
# Set CUDA_AGENT_COMMIT to the commit measured. Writes OUT_DIR/{gpu.txt,pool_scaling.json,
# rl_step_sharded_N.json,rl_step_replica_N.json} and a .log beside each; every part has its own
# time limit, so a part that runs long leaves the others' figures.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:?usage: multi_gpu.sh OUT_DIR [PARTS: pool,rl,replica | all]}"
PART="${2:-all}"
[[ $PART == all ]] && PART=pool,rl
mkdir -p "$OUT"
export PYTHONPATH="$(ls -d packages/*/src | tr '\n' ':')src${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_AGENT_CACHE="${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}"
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
GPUS=$(( GPUS < ${MAX_GPUS:-2} ? GPUS : ${MAX_GPUS:-2} ))
(( GPUS >= 1 )) || { echo "no GPU visible"; exit 1; }
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m
  python -c "import torch, transformers, peft, accelerate; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'accelerate', accelerate.__version__)"
  echo "commit ${CUDA_AGENT_COMMIT:-unknown}, GPUs used: $GPUS"; } > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
want() { [[ ",$PART," == *",$1,"* ]]; }
WORKERS=$(seq -s, 1 "$GPUS")
if want pool; then
  timeout 330 python benchmarks/gpu/pool_scaling.py "$OUT/pool_scaling.json" --backend cuda \
    --workers "$WORKERS" --rounds 2 --control --timeout-s 200 > "$OUT/pool_scaling.log" 2>&1
  grep -v "^{" "$OUT/pool_scaling.log" | cut -c1-400 | tail -8
  python - "$OUT/pool_scaling.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print({k: r.get(k) for k in ("evals_per_min", "speedup", "meets_target", "all_ok", "no_overlap", "control_found_overlaps")})
PY
fi
RL=(benchmarks/gpu/rl_step_sharded.py --model qwen2.5-7b --prompts 8 --samples 8 --prompt-tokens 256
    --new-tokens 512 --micro-batch 8 --lora-rank 32 --lora-alpha 64 --steps 1)
for kind in rl replica; do
  want $kind || continue
  for n in $(seq 1 "$GPUS"); do
    name=$([[ $kind == rl ]] && echo rl_step_sharded_$n || echo rl_step_replica_$n)
    extra=$([[ $kind == replica ]] && echo --no-shard || echo --warm-new-tokens 16)
    limit=$([[ $kind == replica ]] && echo 300 || echo 200)
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1))) timeout "$limit" torchrun --standalone \
      --nproc-per-node "$n" "${RL[0]}" "$OUT/$name.json" "${RL[@]:1}" $extra > "$OUT/$name.log" 2>&1
    echo "$name: exit $? $(grep -h '^wrote' "$OUT/$name.log" | cut -c1-400)"
  done
done
