#!/usr/bin/env bash
# Builds and runs bench/diverse_batch.cpp (SelectDiverseBatch of 256 rows from 1M x 32 against
# the top-k of the same scores, one core); appends the result to bench/results/diverse_batch.json.
#   bench/diverse_batch.sh [rows=1000000] [features=32] [k=256] [reps=3]
# Built with the project's flags (-O2, no -march), as ensembled itself is.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(mktemp -d "${BENCH_TMP:-/tmp}/bench-diverse-XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
BIN="$OUT/diverse_batch"
g++ -O2 -DNDEBUG -std=c++20 -I"$REPO" -o "$BIN" "$REPO/bench/diverse_batch.cpp" \
  "$REPO/orchestrator/run/diverse_batch.cpp" "$REPO/common/base/seed.cpp"
taskset -c 0 "$BIN" "$@" | tee "$OUT/out.txt"
python3 "$REPO/bench/_append_result.py" "$OUT/out.txt" diverse_batch
