#!/usr/bin/env bash
# Here (the CPU machine): Ray for the H200, which has no Ray and takes at most 64 MiB per call.
# Writes, in ignored folders of the repository root:
#   .ray-a/part-aa            the first half of the Ray 2.60.0 cp312 wheel
#   .ray-b/part-ab, wheel.txt the second half, the wheel's name and sha256
#   .whl-ray/*.whl            jsonschema and its needs (the image lacks them)
# Then two device calls back to back: carry .ray-a with `bash benchmarks/gpu/ray.sh stash`,
# then carry .ray-b and .whl-ray with `bash benchmarks/gpu/ray.sh run OUT` (ray.sh says more).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-.venv/bin/python}"
for d in /.ray-a/ /.ray-b/ /.whl-ray/; do
  grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude
done
rm -rf .ray-a .ray-b .whl-ray && mkdir -p .ray-a .ray-b .whl-ray /tmp/cuda-agent-ray-wheel
GET=("$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12
     --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64
     --platform manylinux_2_28_x86_64)
"${GET[@]}" -d /tmp/cuda-agent-ray-wheel "ray==2.60.0"
"${GET[@]}" -d .whl-ray jsonschema jsonschema-specifications referencing rpds-py
WHEEL=$(ls /tmp/cuda-agent-ray-wheel/ray-2.60.0-*.whl)
split -b 40000000 "$WHEEL" .ray-a/part-
mv .ray-a/part-ab .ray-b/part-ab
echo "$(basename "$WHEEL") $(sha256sum "$WHEEL" | awk '{print $1}')" > .ray-b/wheel.txt
ls -l .ray-a .ray-b .whl-ray
