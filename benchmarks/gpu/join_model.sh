#!/usr/bin/env bash
# There (the H200). The working tree is laid anew on every call (ignored folders that a call
# does not carry do not survive it), so the first half is moved out of the tree at once:
#   call 1 (carry .model-a):  bash benchmarks/gpu/join_model.sh --stash
#   call 2 (carry .model-b), right after:  bash benchmarks/gpu/join_model.sh [DEST]
# joins the halves into DEST (default /tmp/smol.gguf) and checks the sha256; exits 1 on a
# missing half or a mismatch.
set -euo pipefail
cd "$(dirname "$0")/../.."
STASH="${CUDA_AGENT_MODEL_STASH:-/tmp/cuda-agent-model}"
if [ "${1:-}" = "--stash" ]; then
  mkdir -p "$STASH" && cp .model-a/part-aa "$STASH/part-aa"
  echo "join_model: first half stashed in $STASH"
  exit 0
fi
DEST="${1:-/tmp/smol.gguf}"
for part in "$STASH/part-aa" .model-b/part-ab .model-b/model.sha256; do
  [ -f "$part" ] || { echo "join_model: $part is missing (was the first call's machine given back?)" >&2; exit 1; }
done
cat "$STASH/part-aa" .model-b/part-ab > "$DEST"
want=$(cat .model-b/model.sha256)
got=$(sha256sum "$DEST" | awk '{print $1}')
if [ "$want" != "$got" ]; then
  echo "join_model: sha256 mismatch: $got, expected $want" >&2
  rm -f "$DEST"
  exit 1
fi
echo "join_model: $DEST ($(stat -c %s "$DEST") bytes, sha256 ok)"
