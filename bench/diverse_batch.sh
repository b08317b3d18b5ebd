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
  "$REPO/orchestrator/diverse_batch.cpp" "$REPO/common/seed.cpp"
taskset -c 0 "$BIN" "$@" | tee "$OUT/out.txt"
mkdir -p "$REPO/bench/results"
python3 - "$OUT/out.txt" "$REPO/bench/results/diverse_batch.json" <<'PY'
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
print("results appended to bench/results/diverse_batch.json")
PY
