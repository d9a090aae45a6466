#!/usr/bin/env bash
# Issue 17's throughput figure on the H200: our RL step against TRL's GRPOTrainer.
#   bash benchmarks/gpu/rl_step.sh OUT_DIR [rl_step_throughput.py flags...]
# Carry .whl-trl (trl 1.16, datasets, dill, multiprocess, huggingface_hub) and .whl-pa
# (pyarrow 26): the image has pandas and pyarrow, but datasets 5.2 needs pyarrow >= 24 and
# huggingface_hub >= 1.31, so those two are installed only where the image's are older.
# Writes OUT_DIR/rl_step_throughput.json and OUT_DIR/gpu.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:?usage: rl_step.sh OUT_DIR [flags...]}"
shift
mkdir -p "$OUT"
SITE=/tmp/site-trl
OLD=$(python3 - <<'PY'
from importlib.metadata import PackageNotFoundError, version
from packaging.version import Version
for name, least in (("pyarrow", "24"), ("huggingface_hub", "1.31")):
    try:
        if Version(version(name)) < Version(least):
            print(name)
    except PackageNotFoundError:
        print(name)
PY
)
WHEELS=(.whl-trl/trl-*.whl .whl-trl/datasets-*.whl .whl-trl/dill-*.whl .whl-trl/multiprocess-*.whl)
for name in $OLD; do
  case $name in
    pyarrow) WHEELS+=(.whl-pa/pyarrow-*.whl) ;;
    huggingface_hub) WHEELS+=(.whl-trl/huggingface_hub-*.whl) ;;
  esac
done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "${WHEELS[@]}" || exit 1
export PYTHONPATH="$SITE:$(ls -d packages/*/src | tr '\n' ':')src"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, transformers, trl, datasets, pyarrow; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__, 'pyarrow', pyarrow.__version__)"
  echo "installed from wheels: ${WHEELS[*]}"; } > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
python3 benchmarks/gpu/rl_step_throughput.py "$OUT/rl_step_throughput.json" "$@"
