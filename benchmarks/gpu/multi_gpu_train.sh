#!/usr/bin/env bash
# Issue 32 on a host of 2 GPUs: `cuda-agent train` as one job over 2 processes (torchrun, NCCL,
# a replicated LoRA policy on cuda:LOCAL_RANK, each process's sandbox on its own GPU), against
# 1 process on the same global batch and seed. Ready for a multi-GPU kind; not run yet.
#   bash benchmarks/gpu/multi_gpu_train.sh OUT_DIR [extra train flags...]
# Three runs, each with its own time limit (~10 min in all with the embedded model):
#   one:     python -m cuda_agent.runner train ...                       (GPU 0)
#   two:     torchrun --standalone --nproc-per-node 2 -m cuda_agent.runner train ...
#   resumed: the two-process run killed (SIGKILL, the launcher's process group) after its
#            first committed rl_warmup step, then --resume under 2 processes
# then OUT_DIR/multi_gpu_train.json: each run's exit code and wall seconds, and per stage the
# largest relative difference of the figures tests/test_data_parallel.py compares (one vs two,
# two vs resumed). On the CPU those agree within 1e-4 (the test); on CUDA sampling kernels and
# reductions may differ between devices, so the figures are reported, not asserted. Set
# CUDA_AGENT_COMMIT to the commit measured; OUT_DIR/gpu.txt records the host.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:?usage: multi_gpu_train.sh OUT_DIR [extra train flags...]}"
shift
mkdir -p "$OUT"
export PYTHONPATH="$(ls -d packages/*/src | tr '\n' ':')src${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_AGENT_CACHE="${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}"
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
(( GPUS >= 2 )) || { echo "needs 2 GPUs, sees $GPUS"; exit 1; }
export CUDA_VISIBLE_DEVICES=0,1
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  python -c "import torch, accelerate; print('torch', torch.__version__, 'accelerate', accelerate.__version__)"
  echo "commit ${CUDA_AGENT_COMMIT:-unknown}"; } > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
# Every stage, small: 2 tasks a step (one per process), 4 held-out tasks (two per process).
FLAGS=(--backend cuda --eval-tasks heldout-ops:4 --warmstart-steps 2 --eval-after-warmstart yes
       --rl-warmup-steps 2 --rft-tasks 2 --rft-samples 2 --rft-turns 2 --rft-steps 2
       --value-steps 1 --steps 2 --turns 2 --tasks-per-step 2 --group-size 4 --quiet "$@")
TRAIN=(-m cuda_agent.runner train)
TORCHRUN=(python -m torch.distributed.run --standalone --nproc-per-node 2)
declare -A RC WALL
run() {  # name limit command...
  local name=$1 limit=$2; shift 2
  local start; start=$(date +%s.%N)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  RC[$name]=$?
  WALL[$name]=$(python -c "print(round($(date +%s.%N) - $start, 1))")
  echo "$name: exit ${RC[$name]}, ${WALL[$name]} s"
}
rm -rf /tmp/mgt-one /tmp/mgt-two /tmp/mgt-resumed
CUDA_VISIBLE_DEVICES=0 run one 240 python "${TRAIN[@]}" --out /tmp/mgt-one "${FLAGS[@]}"
run two 240 "${TORCHRUN[@]}" "${TRAIN[@]}" --out /tmp/mgt-two "${FLAGS[@]}"
# killed after the first committed rl_warmup step, then resumed under 2 processes
setsid "${TORCHRUN[@]}" "${TRAIN[@]}" --out /tmp/mgt-resumed "${FLAGS[@]}" \
  > "$OUT/resumed_first.log" 2>&1 &
pid=$!
for _ in $(seq 1 1800); do
  grep -q '"rl_warmup": 1' /tmp/mgt-resumed/state.json 2>/dev/null && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
kill -KILL -- -$pid 2>/dev/null; wait $pid 2>/dev/null
run resumed 240 "${TORCHRUN[@]}" "${TRAIN[@]}" --resume /tmp/mgt-resumed --quiet
python - "$OUT/multi_gpu_train.json" "${RC[one]}" "${RC[two]}" "${RC[resumed]}" \
  "${WALL[one]}" "${WALL[two]}" "${WALL[resumed]}" <<'PY'
import json, math, sys
from pathlib import Path
out, rc, wall = sys.argv[1], sys.argv[2:5], sys.argv[5:8]
KEYS = ("mean_reward", "pass_rate", "mean_response_tokens", "turns_per_episode", "nll", "tokens",
        "grad_norm", "trained_tokens", "kl", "entropy", "clip_fraction", "value_loss",
        "explained_variance")
def records(run):
    path = Path(run) / "metrics.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []
def diff(a, b):
    rows = []
    for x, y in zip(a, b):
        worst = {}
        for k in KEYS:
            u, v = x.get(k), y.get(k)
            if isinstance(u, (int, float)) and isinstance(v, (int, float)) and math.isfinite(u):
                worst[k] = abs(u - v) / max(abs(u), 1e-8)
        rows.append({"stage": x.get("stage"), "same_stage": x.get("stage") == y.get("stage"),
                     "largest_relative_difference": max(worst.values(), default=0.0),
                     "by_key": worst})
    return {"records": [len(a), len(b)], "stages": rows}
one, two, resumed = (records(f"/tmp/mgt-{n}") for n in ("one", "two", "resumed"))
result = {"exit": dict(zip(("one", "two", "resumed"), map(int, rc))),
          "wall_s": dict(zip(("one", "two", "resumed"), map(float, wall))),
          "one_vs_two": diff(one, two), "two_vs_resumed": diff(two, resumed),
          "resumed_sessions": len(json.loads(Path("/tmp/mgt-resumed/state.json").read_text())
                                  ["sessions"]) if Path("/tmp/mgt-resumed/state.json").exists() else 0}
Path(out).write_text(json.dumps(result, indent=2))
print(json.dumps({k: result[k] for k in ("exit", "wall_s", "resumed_sessions")}))
for name in ("one_vs_two", "two_vs_resumed"):
    print(name, [(r["stage"], f"{r['largest_relative_difference']:.2g}") for r in result[name]["stages"]])
PY
