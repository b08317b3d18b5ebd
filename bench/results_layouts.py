#!/usr/bin/env python3
"""One fused pack of K members x E epochs (bench/pack_throughput.py's run(): checkpoints on,
round 1 of 2, the state on the disk unless --work-dir says otherwise) with config
results_layout "members" (a directory of six files a member) and "packs" (one pack directory:
common/state/pack_results.h), the same build, interleaved M P P M ... N times each, so both see the same
load and the same recently deleted files. Prints each run, the medians and packs' ratio to
members; the raw runs go to --out.

Usage: bench/results_layouts.py [--build build] [--cases 512x4,4096x4] [--n 4] [--work-dir DIR] [--out FILE]
"""
import argparse, json, os, statistics, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pack_throughput as p  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(p.ROOT, "build"))
ap.add_argument("--cases", default="512x4,4096x4", help="KxE,... (members x epochs)")
ap.add_argument("--n", type=int, default=4)
ap.add_argument("--work-dir", default=None, help="default: ~/.cache/ensembled/bench-work (the disk); /dev/shm: tmpfs")
ap.add_argument("--out", default=None)
a = ap.parse_args()
root = a.work_dir or p.default_work_root()
layouts = ["members", "packs"]
results = {}
# Every run's state stays until the end (bench/builds_side_by_side.py says why: on ext4 without
# a journal, deleting thousands of files makes the next run's new files dearer).
keep = tempfile.TemporaryDirectory(dir=root)
print("case layout wall_s train_s wall/train outside_ms = set-up + outputs + rest (ms a member)")
for case in a.cases.split(","):
    k, e = (int(x) for x in case.split("x"))
    runs = {l: [] for l in layouts}
    for i in range(a.n):
        for layout in (layouts if i % 2 == 0 else layouts[::-1]):
            w = os.path.join(keep.name, f"{case}-{layout}-{i}")
            os.makedirs(w)
            r = p.run(a.build, k, e, k, w, layout=layout)
            runs[layout].append(r)
            print(case, layout, r["round_wall_s"], r["train_s"], r["wall_over_train"], r["outside_ms_per_member"], "=",
                  r["prepare_ms_per_member"], "+", r["outputs_ms_per_member"], "+", r["rest_ms_per_member"], flush=True)
    med = {l: {key: statistics.median(x[key] for x in rs) for key in rs[0]} for l, rs in runs.items()}
    for l in layouts:
        print(f"median {case} {l}: wall {med[l]['round_wall_s']:.3f} s, train {med[l]['train_s']:.3f} s, "
              f"wall/train {med[l]['wall_over_train']:.2f}, outside {med[l]['outside_ms_per_member']:.3f} ms a member "
              f"(outputs {med[l]['outputs_ms_per_member']:.3f}, rest {med[l]['rest_ms_per_member']:.3f})")
    print(f"ratio {case}: round wall members / packs = {med['members']['round_wall_s'] / med['packs']['round_wall_s']:.2f}x, "
          f"outside a member {med['members']['outside_ms_per_member'] / med['packs']['outside_ms_per_member']:.2f}x")
    results[case] = {"runs": runs, "medians": med}
if a.out:
    json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "build": a.build, "state_on": root,
               "loadavg": open("/proc/loadavg").read().split()[:3], "cases": results}, open(a.out, "w"), indent=1)
