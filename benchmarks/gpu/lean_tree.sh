#!/usr/bin/env bash
# Here (the CPU machine): lighten the working tree that every device call carries.
#   bash benchmarks/gpu/lean_tree.sh off   take benchmarks/results/ out of the working tree
#   bash benchmarks/gpu/lean_tree.sh on    put it back (git checkout: it is all committed)
# The committed figures are 23 of the 35 MB every call carries (28.5 MB of tracked files, 6.8 MB
# of .git, 2026-12-07), and nothing run on the device reads them. Without them, split_model.sh
# fits the model in three parts beside a 9 MB adapter each, or two with MODEL_SPARE_MIB=5. `off` refuses while benchmarks/results/
# holds anything uncommitted (new figures not yet added, or changes): commit them first.
# While it is off, `git status` lists the figures as deleted: stage files by name (not
# `git commit -a`) until `on`.
set -euo pipefail
cd "$(dirname "$0")/../.."
RESULTS=benchmarks/results
case "${1:-}" in
  off)
    if [ -n "$(git status --porcelain --untracked-files=all -- "$RESULTS" | grep -v '^ D ' || true)" ]; then
      echo "lean_tree: $RESULTS holds uncommitted files; commit them first:" >&2
      git status --short --untracked-files=all -- "$RESULTS" | grep -v '^ D ' >&2
      exit 1
    fi
    rm -rf "$RESULTS"
    echo "lean_tree: $RESULTS is out of the working tree ('lean_tree.sh on' puts it back)"
    ;;
  on)
    git checkout -- "$RESULTS"
    echo "lean_tree: $RESULTS is back"
    ;;
  *)
    echo "usage: lean_tree.sh off|on" >&2
    exit 2
    ;;
esac
