#!/usr/bin/env bash
# Here (the CPU machine): prepare the embedded model for the H200, which reaches no registry and
# takes at most 64 MiB per call. Writes, in ignored folders of the repository root:
#   .model-a/part-aa   first half of SmolLM2-135M-Instruct.Q4_1.gguf (49,181,216 bytes)
#   .model-b/part-ab   second half, and model.sha256 (the whole file's checksum)
#   .whl/gguf-*.whl          the gguf package (transformers reads GGUF through it)
# Then carry .model-a (and .whl) in one device call (join_model.sh --stash) and .model-b in the next, at
# once (the machine keeps ignored files for about 30 s): see benchmarks/gpu/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-.venv/bin/python}"
GGUF=$("$PY" -c "from cuda_agent.policy._loading import resolve_model_source as r
s = r('smollm2-135m-gguf'); print(s.name_or_path + '/' + s.gguf_file)")
for d in /.model-a/ /.model-b/; do grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude; done
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .model-a .model-b && mkdir -p .model-a .model-b .whl
split -b 49181216 "$GGUF" .model-a/part-
mv .model-a/part-ab .model-b/part-ab
(cd "$(dirname "$GGUF")" && sha256sum "$(basename "$GGUF")") | awk '{print $1}' > .model-b/model.sha256
ls .whl/gguf-*.whl >/dev/null 2>&1 || "$PY" -m pip download --quiet --no-deps \
    --only-binary=:all: --python-version 3.12 --implementation cp -d .whl "gguf==0.19.0"
ls -l .model-a .model-b .whl
