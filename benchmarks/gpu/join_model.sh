#!/usr/bin/env bash
# There (the H200). The working tree is laid anew on every call (ignored folders that a call
# does not carry do not survive it), so each call but the last moves its part out of the tree
# at once (split_model.sh made the parts, .model-a, .model-b, ...):
#   calls 1..N-1 (carry .model-a, then .model-b, ...):  bash benchmarks/gpu/join_model.sh --stash
#   call N (carry the last, with model.sha256), right after:  bash benchmarks/gpu/join_model.sh [DEST]
# joins the parts into DEST (default /tmp/smol.gguf) and checks the sha256; exits 1 on a
# missing part or a mismatch.
set -euo pipefail
cd "$(dirname "$0")/../.."
STASH="${CUDA_AGENT_MODEL_STASH:-/tmp/cuda-agent-model}"
mkdir -p "$STASH"
for part in .model-?/part-??; do  # the parts this call carried
  [ -f "$part" ] && cp "$part" "$STASH/" && echo "join_model: $(basename "$part") stashed in $STASH"
done
[ "${1:-}" = "--stash" ] && exit 0
DEST="${1:-/tmp/smol.gguf}"
last=$(ls -d .model-? 2>/dev/null | tail -1)
[ -n "$last" ] && [ -f "$last/model.sha256" ] && [ -f "$last/model.parts" ] \
  || { echo "join_model: no .model-*/model.sha256 and model.parts here (carry the last part's folder)" >&2; exit 1; }
parts=()
for i in $(seq 0 $(( $(cat "$last/model.parts") - 1 ))); do
  part="$STASH/part-a$(printf "\\x$(printf %x $((97 + i)))")"
  [ -f "$part" ] || { echo "join_model: $part is missing (was an earlier call's machine given back?)" >&2; exit 1; }
  parts+=("$part")
done
cat "${parts[@]}" > "$DEST"
want=$(cat "$last/model.sha256")
got=$(sha256sum "$DEST" | awk '{print $1}')
if [ "$want" != "$got" ]; then
  echo "join_model: sha256 mismatch: $got, expected $want" >&2
  rm -f "$DEST"
  exit 1
fi
echo "join_model: $DEST ($(stat -c %s "$DEST") bytes, ${#parts[@]} parts, sha256 ok)"
