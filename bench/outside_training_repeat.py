#!/usr/bin/env python3
"""One fused pack of 512 members x 4 epochs, run N times through bench/pack_throughput.py's run()
with checkpoints on and the state directory on the disk, as users run (ENSEMBLED_BENCH_TMPFS=1:
on tmpfs, /dev/shm): per run, the round's wall and training seconds
and the time outside training in ms a member (total, worker set-up, worker outputs, rest);
then the medians. Single runs of this round vary by +-10 % on a shared 2-core machine; the
median of several is what BENCHMARKS.md compares.

Usage: bench/outside_training_repeat.py [BUILD_DIR] [N]   (defaults: build, 5)
"""
import os, statistics, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pack_throughput as p  # noqa: E402

build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(p.ROOT, "build")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
rs = []
print("wall_s train_s outside_ms = set-up + outputs + rest (ms a member)")
for _ in range(n):
    on_tmpfs = os.environ.get("ENSEMBLED_BENCH_TMPFS") == "1"
    with tempfile.TemporaryDirectory(dir="/dev/shm" if on_tmpfs else p.default_work_root()) as w:
        r = p.run(build, 512, 4, 512, w)
    rs.append(r)
    print(r["round_wall_s"], r["train_s"], r["outside_ms_per_member"], "=", r["prepare_ms_per_member"], "+",
          r["outputs_ms_per_member"], "+", r["rest_ms_per_member"], flush=True)
print("median outside", statistics.median(x["outside_ms_per_member"] for x in rs), "ms a member; median wall",
      statistics.median(x["round_wall_s"] for x in rs), "s")
