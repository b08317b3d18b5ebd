#!/usr/bin/env bash
# Builds and runs bench/dataset_mutation.cpp (DatasetWriter::Append of 1k rows to a 10M-row and a
# 1M-row segment); appends the result to bench/results/dataset_mutation.json.
#   bench/dataset_mutation.sh [append_rows=1000] [reps=20] [big_rows=10000000] [small_rows=1000000]
# The segments live in a temp dir under ${BENCH_TMP:-/tmp} (same disk as a run's state_dir here).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(mktemp -d "${BENCH_TMP:-/tmp}/bench-mutation-XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
BIN="$OUT/dataset_mutation"
g++ -O2 -std=c++20 -I"$REPO" -o "$BIN" "$REPO/bench/dataset_mutation.cpp" \
  "$REPO/common/state/dataset_segment.cpp" "$REPO/common/base/status.cpp" "$REPO/common/base/seed.cpp" -lrt
"$BIN" "$OUT" "$@" | tee "$OUT/out.txt"
python3 "$REPO/bench/_append_result.py" "$OUT/out.txt" dataset_mutation
