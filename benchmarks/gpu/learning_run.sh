#!/usr/bin/env bash
# Issue 29 part 3: one long learning run over N back-to-back device calls (a call lasts at most
# 10 minutes; the machine keeps /tmp while it is warm, about 30 s after a call). Each call runs
# `cuda-agent train ... --stop-after S` once: the trainer stops between two steps (or
# evaluations) before the call ends, exit 75, and the next call resumes the same run from
# /tmp/learning-run with no step lost or repeated. The figures are the whole run's.
#
# Needs in /tmp, from the model stash scripts (benchmarks/gpu/README.md): the real model,
# /tmp/smol.gguf (join_model.sh), and the gguf package in /tmp/site (put on PYTHONPATH here).
# Here first: bash benchmarks/gpu/split_model.sh. Then the calls, each right after the last:
#   calls 1 to N-1, carry [".model-a"], then [".model-b"], ...:  bash benchmarks/gpu/join_model.sh --stash
#   call N (the last part: four on 2026-12-07 after git gc), carry [".model-d", ".whl"]:
#       python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#       bash benchmarks/gpu/join_model.sh /tmp/smol.gguf
#       CUDA_AGENT_COMMIT=<commit> bash benchmarks/gpu/learning_run.sh start $OUT --seconds 540
#   later calls (no carry), until it exits 0:
#       CUDA_AGENT_COMMIT=<commit> bash benchmarks/gpu/learning_run.sh resume $OUT
#
#   learning_run.sh start|resume OUT_DIR [--seconds S] [--margin M] [--run RUN_DIR]
#       [--gguf GGUF] [--pack] [--from-pack PACK_DIR] [-- train flags...]
#   learning_run.sh unpack PACK_DIR --run RUN_DIR
#   learning_run.sh chain OUT_DIR PLAN.json [--seconds S] [--margin M] [--root DIR] [--bundle]
#       several runs in order (a warm start, RL from it, the control), the same command every
#       call: benchmarks/gpu/learning_chain.py. --bundle: OUT_DIR ends each call holding only
#       figures.tgz and each run's NAME_adapter16.txz (float16 adapter, benchmarks/gpu/adapter16.py)
# --pack: each call also leaves the whole run in OUT_DIR/pack (parts of 15 MiB), so that a
# machine lost between calls loses nothing finished: copy the parts into an ignored folder here,
# carry it in a later call (alone: a run with its checkpoint is about 60 MB) and
# `resume OUT_DIR --from-pack FOLDER` (as on 2026-12-05, when a machine was taken back mid-run).
# --seconds: what is left of this call for the script (default 570: a 600 s call less its
# start and the copy back; give less when the call did other work first, as call 2 above).
# --margin: seconds kept after the trainer stops, for its exit and the report (default 60).
# Train flags (start only; default: --preset h200 --steps 40 --tasks-per-step 3
# --eval-train false) follow `--`. Exit status: 0 finished, 75 call again with `resume`,
# 1 an error. A machine given back between calls loses /tmp: `resume` then says so, and the
# run begins again with `start`.
# Writes OUT_DIR/learning_run.json (each call: exit, wall seconds, steps reached; the whole
# run: invocations, wall and training seconds), metrics.jsonl, state.json, config.json,
# eval_<name>.json, train_call<N>.log, and at the end summary.json, train_learning.json and
# learning.json (benchmarks/train_report.py). The logic is benchmarks/gpu/learning_run.py.
set -uo pipefail
cd "$(dirname "$0")/../.."
SITE="${CUDA_AGENT_SITE:-/tmp/site}"
export PYTHONPATH="$(ls -d packages/*/src | tr '\n' ':')src${PYTHONPATH:+:$PYTHONPATH}"
if [ -d "$SITE" ]; then PYTHONPATH="$PYTHONPATH:$SITE"; fi
export CUDA_AGENT_CACHE="${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}"
if [ "${1:-}" = chain ]; then  # several runs in order: benchmarks/gpu/learning_chain.py
    shift
    exec "${PYTHON:-python3}" benchmarks/gpu/learning_chain.py "$@"
fi
exec "${PYTHON:-python3}" benchmarks/gpu/learning_run.py "$@"
