#!/usr/bin/env bash
# The CUDA path's operators (kernels on a GPU) per training step, counted on this machine's CPU
# (bench/step_kernels.cpp), for K = 1, 64, 512, 4096 and 1-3 hidden layers: PackStep against the
# autograd loop CUDA ran before it. Appends the figures to bench/results/step_kernels.json.
#   bench/step_kernels.sh [K ...]          (after ./scripts/build; ENSEMBLED_BUILD_DIR as there)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ENSEMBLED_BUILD_DIR:-$REPO/build}"
[[ -x "$BUILD/step_kernels" ]] || { echo "no $BUILD/step_kernels: run ./scripts/build first" >&2; exit 1; }
OUT="$(mktemp -d "${BENCH_TMP:-/tmp}/bench-step-kernels-XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
"$BUILD/step_kernels" "$@" | tee "$OUT/out.txt"
python3 "$REPO/bench/_append_result.py" "$OUT/out.txt" step_kernels
