#!/usr/bin/env bash
# The policy's GPU tests and benchmarks (issue "policy"), for the lent H200. Each part has its own
# time limit and writes as it goes.
#   bash benchmarks/gpu/policy.sh OUT_DIR [tests|small|nolora|large|all|train|fsdp]
# train and fsdp run only when named. small: the Qwen2.5-0.5B shape (sampling at batch 64 x 1024 new tokens with a profile of one call,
#        training 64 x 4096, LoRA and full); large: the Qwen2.5-7B shape. About 4 and 6 minutes.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:?usage: policy.sh OUT_DIR [tests|small|nolora|large|all|train|fsdp]}"
PART="${2:-all}"
mkdir -p "$OUT"
export PYTHONPATH="packages/policy/src${PYTHONPATH:+:$PYTHONPATH}"
want() { [[ $PART == all || $PART == "$1" ]]; }
B=benchmarks/policy/throughput.py
if want tests; then
  timeout 300 python -m pytest -m gpu -q -rA -p no:cacheprovider packages/policy \
    > "$OUT/gpu_tests_policy.txt" 2>&1
  echo "policy gpu tests: $(tail -1 "$OUT/gpu_tests_policy.txt")"
fi
if want small; then
  TORCH_LOGS=graph_breaks,recompiles,perf_hints timeout 300 python $B \
    "$OUT/policy_0.5b_generate.json" --model qwen2.5-0.5b --device cuda --parts generate --batch 64 --prompt-tokens 128 --new-tokens 1024 --plain-new-tokens 128 \
    --profile "$OUT/policy_0.5b_profile.txt" --profile-tokens 1024 > "$OUT/policy_0.5b_generate.log" 2>&1
  timeout 300 python $B "$OUT/policy_0.5b_train.json" --model qwen2.5-0.5b --device cuda \
    --parts train --train-batch 64 --train-tokens 4096 --micro-batch 8 \
    > "$OUT/policy_0.5b_train.log" 2>&1
  grep -h -E "^(plain|policy|train)" "$OUT"/policy_0.5b_*.log
fi
if want nolora; then  # is the adapter what slows sampling? The same run without LoRA.
  TORCH_LOGS=graph_breaks,recompiles,perf_hints timeout 240 python $B \
    "$OUT/policy_0.5b_generate_nolora.json" --model qwen2.5-0.5b --device cuda --parts generate \
    --lora-rank 0 --skip-plain --batch 64 --prompt-tokens 128 --new-tokens 1024 \
    --profile "$OUT/policy_0.5b_profile_nolora.txt" --profile-tokens 1024 > "$OUT/policy_0.5b_generate_nolora.log" 2>&1
  grep -h -E "^policy" "$OUT/policy_0.5b_generate_nolora.log"
fi
if [[ $PART == train ]]; then  # training figures only, both shapes; on GPUs 0 and 1 at once if two
  SECOND=$(( $(nvidia-smi -L | wc -l) > 1 ? 1 : 0 ))
  CUDA_VISIBLE_DEVICES=0 timeout 300 python $B "$OUT/policy_0.5b_train.json" --model qwen2.5-0.5b \
    --device cuda --parts train --train-batch 64 --train-tokens 4096 --micro-batch 8 \
    > "$OUT/policy_0.5b_train.log" 2>&1 &
  [[ $SECOND == 0 ]] && wait
  CUDA_VISIBLE_DEVICES=$SECOND timeout 300 python $B "$OUT/policy_7b_train.json" --model qwen2.5-7b \
    --device cuda --parts train --train-batch 64 --train-tokens 4096 --micro-batch 4 \
    --checkpointing > "$OUT/policy_7b_train.log" 2>&1
  wait
  grep -h -E "^train" "$OUT"/policy_*_train.log
fi
if [[ $PART == fsdp ]]; then  # sharded training over every GPU of the host (needs two or more)
  timeout 300 python -m torch.distributed.run --nproc-per-node "$(nvidia-smi -L | wc -l)" benchmarks/policy/fsdp_throughput.py \
    "$OUT/policy_7b_fsdp.json" --model qwen2.5-7b --train-batch 64 --train-tokens 4096 \
    --micro-batch 4 --checkpointing > "$OUT/policy_7b_fsdp.log" 2>&1
  grep -E "^train" "$OUT/policy_7b_fsdp.log"
fi
if want large; then
  timeout 420 python $B "$OUT/policy_7b.json" --model qwen2.5-7b --device cuda \
    --batch 64 --prompt-tokens 128 --new-tokens 1024 --plain-new-tokens 64 \
    --train-batch 64 --train-tokens 4096 --micro-batch 4 --checkpointing > "$OUT/policy_7b.log" 2>&1
  grep -E "^(plain|policy|train)" "$OUT/policy_7b.log"
fi
