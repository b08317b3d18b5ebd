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
  "$REPO/common/dataset_segment.cpp" "$REPO/common/status.cpp" "$REPO/common/seed.cpp" -lrt
"$BIN" "$OUT" "$@" | tee "$OUT/out.txt"
mkdir -p "$REPO/bench/results"
python3 - "$OUT/out.txt" "$REPO/bench/results/dataset_mutation.json" <<'PY'
import datetime, json, os, sys
line = [l for l in open(sys.argv[1]) if l.startswith("JSON ")][-1]
res = json.loads(line[5:])
res["utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
res["nproc"] = os.cpu_count()
res["loadavg"] = open("/proc/loadavg").read().split()[:3]
path = sys.argv[2]
runs = json.load(open(path)) if os.path.exists(path) else []
runs.append(res)
json.dump(runs, open(path + ".tmp", "w"), indent=2)
os.replace(path + ".tmp", path)
print("results appended to bench/results/dataset_mutation.json")
PY
