#!/usr/bin/env bash
# The default `cuda-agent train` on the H200 with the real embedded weights (issue 12).
#   bash benchmarks/gpu/train.sh OUT_DIR [GGUF] [label [extra train flags...]]
# GGUF defaults to /tmp/smol.gguf (joined by benchmarks/gpu/join_model.sh). Writes
# OUT_DIR/train_<label>.json (figures), OUT_DIR/train_<label>.log and the run's metrics.jsonl;
# with the label "learning" (issue 17: `train.sh OUT GGUF learning --preset h200`) also
# OUT_DIR/learning.json, the held-out rates after the warm start and after RL, and the curves.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:?usage: train.sh OUT_DIR [GGUF] [label [flags...]]}"
GGUF="${2:-/tmp/smol.gguf}"
LABEL="${3:-default}"
shift $(( $# < 3 ? $# : 3 ))
mkdir -p "$OUT"
export PYTHONPATH="$(ls -d packages/*/src | tr '\n' ':')src${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_AGENT_CACHE="${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}"
RUN="/tmp/train-$LABEL"
rm -rf "$RUN"
CMD="python -m cuda_agent.runner train --model $GGUF --out $RUN --quiet $*"
start=$(date +%s.%N)
$CMD > "$OUT/train_$LABEL.log" 2>&1
rc=$?
wall=$(python -c "print(round($(date +%s.%N) - $start, 1))")
echo "train $LABEL: exit $rc, ${wall} s"
if [ $rc -ne 0 ]; then tail -30 "$OUT/train_$LABEL.log"; exit $rc; fi
cp "$RUN/metrics.jsonl" "$OUT/train_${LABEL}_metrics.jsonl"
EXTRA=()
if [ "$LABEL" = "learning" ]; then
  EXTRA=(--learning "$OUT/learning.json")
  cp -r "$RUN/curves" "$OUT/curves" 2>/dev/null
  for e in "$RUN"/eval/*/eval.json; do cp "$e" "$OUT/eval_$(basename "$(dirname "$e")").json"; done
fi
python benchmarks/train_report.py "$RUN" "$OUT/train_$LABEL.json" --wall-s "$wall" "${EXTRA[@]}" \
    --label "$LABEL" --command "$(echo "$CMD" | sed "s#$GGUF#smol.gguf#; s#$RUN#RUN_DIR#")"
