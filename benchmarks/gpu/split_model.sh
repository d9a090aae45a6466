#!/usr/bin/env bash
# Here (the CPU machine): prepare the embedded model for the H200, which reaches no registry and
# takes at most 64 MiB per call (the tracked tree and its .git count too). Writes, in ignored
# folders of the repository root, SmolLM2-135M-Instruct.Q4_1.gguf (98,362,432 bytes) in
# MODEL_PARTS parts (default: as few as fit a call beside what travels anyway, the tracked tree,
# the untracked files git does not ignore and .git, with MODEL_SPARE_MIB, default 6, left
# over for what a call carries beside a part: an adapter's part, say; 4 parts today after
# `git gc`, which packs .git's loose objects: 12 MB of .git became 6.6 MB on 2026-12-07; 3
# after `lean_tree.sh off`, which leaves the committed figures behind; MODEL_FILE splits
# another file):
#   .model-a/part-aa, .model-b/part-ab, ...   the parts, one folder each
#   the last folder also: model.sha256 (the whole file's checksum), model.parts (how many)
#   .whl/gguf-*.whl                           the gguf package (transformers reads GGUF through it)
# Then carry each folder but the last in a device call of its own (join_model.sh --stash) and
# the last with .whl in the next (join_model.sh), each call right after the one before (the
# machine keeps /tmp for about 30 s): see benchmarks/gpu/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-.venv/bin/python}"
GGUF="${MODEL_FILE:-$("$PY" -c "from cuda_agent.policy._loading import resolve_model_source as r
s = r('smollm2-135m-gguf'); print(s.name_or_path + '/' + s.gguf_file)")}"
mkdir -p .git/info
grep -qx '/.model-*/' .git/info/exclude 2>/dev/null || echo '/.model-*/' >> .git/info/exclude
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
if [ -z "${MODEL_PARTS:-}" ]; then
  travels=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } \
    | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1 || true)  # du: 1 where a tracked file is gone (lean_tree.sh off)
  travels=$(( travels + $(du -sb .git | cut -f1) ))
  room=$(( (64 - ${MODEL_SPARE_MIB:-6}) * 1048576 - travels ))
  [ "$room" -gt 4194304 ] || { echo "split_model: the tree and .git already take $travels bytes of a call's 64 MiB" >&2; exit 1; }
  MODEL_PARTS=$(( ($(stat -c %s "$GGUF") + room - 1) / room ))
  echo "split_model: $travels bytes travel with every call; $MODEL_PARTS parts of the model"
  loose=$(git count-objects | cut -d' ' -f3)  # KiB of loose objects: git gc packs them
  [ "$loose" -lt 1024 ] || echo "split_model: .git holds $loose KiB of loose objects; git gc may save a part"
fi
PARTS="$MODEL_PARTS"
rm -rf .model-? .model-tmp && mkdir -p .model-tmp .whl
split -n "$PARTS" "$GGUF" .model-tmp/part-
for part in .model-tmp/part-*; do  # part-aa -> .model-a, part-ab -> .model-b, ...
  folder=".model-${part: -1}"
  mkdir -p "$folder" && mv "$part" "$folder/"
done
rmdir .model-tmp
last=$(ls -d .model-? | tail -1)
(cd "$(dirname "$GGUF")" && sha256sum "$(basename "$GGUF")") | awk '{print $1}' > "$last/model.sha256"
echo "$PARTS" > "$last/model.parts"
ls .whl/gguf-*.whl >/dev/null 2>&1 || "$PY" -m pip download --quiet --no-deps \
    --only-binary=:all: --python-version 3.12 --implementation cp -d .whl "gguf==0.19.0"
ls -l .model-? .whl
