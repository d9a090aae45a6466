#!/usr/bin/env bash
# There (the H200), in the call that carries .carry/model-b right after the one that carried
# .carry/model-a: join the halves into DEST and check the sha256; exits 1 when they do not match.
#   bash benchmarks/gpu/join_model.sh [DEST]    (default /tmp/smol.gguf)
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST="${1:-/tmp/smol.gguf}"
for part in .carry/model-a/part-aa .carry/model-b/part-ab .carry/model-b/model.sha256; do
  [ -f "$part" ] || { echo "join_model: $part is missing (was the first call's machine given back?)" >&2; exit 1; }
done
cat .carry/model-a/part-aa .carry/model-b/part-ab > "$DEST"
want=$(cat .carry/model-b/model.sha256)
got=$(sha256sum "$DEST" | awk '{print $1}')
if [ "$want" != "$got" ]; then
  echo "join_model: sha256 mismatch: $got, expected $want" >&2
  rm -f "$DEST"
  exit 1
fi
echo "join_model: $DEST ($(stat -c %s "$DEST") bytes, sha256 ok)"
