#!/usr/bin/env bash
# Here (the CPU machine): prepare the embedded model for the H200, which reaches no registry and
# takes at most 64 MiB per call (the tracked tree and its .git count too). Writes, in ignored
# folders of the repository root, SmolLM2-135M-Instruct.Q4_1.gguf (98,362,432 bytes) in
# MODEL_PARTS parts (default 3, about 33 MB each):
#   .model-a/part-aa, .model-b/part-ab, ...   the parts, one folder each
#   the last folder also: model.sha256 (the whole file's checksum), model.parts (how many)
#   .whl/gguf-*.whl                           the gguf package (transformers reads GGUF through it)
# Then carry each folder but the last in a device call of its own (join_model.sh --stash) and
# the last with .whl in the next (join_model.sh), each call right after the one before (the
# machine keeps /tmp for about 30 s): see benchmarks/gpu/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-.venv/bin/python}"
PARTS="${MODEL_PARTS:-3}"
GGUF=$("$PY" -c "from cuda_agent.policy._loading import resolve_model_source as r
s = r('smollm2-135m-gguf'); print(s.name_or_path + '/' + s.gguf_file)")
grep -qx '/.model-*/' .git/info/exclude 2>/dev/null || echo '/.model-*/' >> .git/info/exclude
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
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
