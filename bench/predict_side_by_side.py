#!/usr/bin/env python3
"""`ensemblectl predict` by two builds, side by side: each build trains the same run (K members,
bench/pack_throughput.py's config: checkpoints on, state on the disk, two rounds), then each
build's ensemblectl predicts the same CSV of --rows rows with its own run's latest round,
interleaved A B B A ... N times each. Prints each call's wall seconds and peak RSS (the
worker that computes, from /usr/bin/time), the medians, and B's time over A's.

Why two builds (issue 61 item 2): since 2026-12-08 a lane member's predictions are the lane
kernel's forward, computed from its weights file without a TorchScript module; before, each
member's module ran its GEMMs and libtorch's activations through the interpreter. The
members' predictions differ in their last bits (another forward), not in what they are.

--member JSON gives the members' defaults (default: seed 000's), e.g. configs/example.json's
3 x 32 tanh to see wider layers.

Usage: bench/predict_side_by_side.py BUILD_A BUILD_B [--k 512] [--rows 2000] [--n 3] [--member JSON]
                                     [--work-dir DIR] [--out FILE]
"""
import argparse, json, os, random, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pack_throughput as p  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("a")
ap.add_argument("b")
ap.add_argument("--k", type=int, default=512)
ap.add_argument("--rows", type=int, default=2000)
ap.add_argument("--n", type=int, default=3)
ap.add_argument("--member", default=None, help="the members' defaults as JSON (default: seed 000's)")
ap.add_argument("--work-dir", default=None, help="default: ~/.cache/ensembled/bench-work (the disk)")
ap.add_argument("--out", default=None)
a = ap.parse_args()
member = json.loads(a.member) if a.member else None
keep = tempfile.TemporaryDirectory(dir=a.work_dir or p.default_work_root())

states = {}
for build in (a.a, a.b):
    state = os.path.join(keep.name, "run-" + str(len(states)))
    path = state + ".json"
    json.dump(p.config(state, a.k, 4, "auto", member=member), open(path, "w"))
    r = subprocess.run([os.path.join(build, "ensembled"), "run", "--config", path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr[-2000:])
    states[build] = state

names = json.load(open(os.path.join(states[a.a], "run.json")))["feature_names"]
rng = random.Random(1)
csv = os.path.join(keep.name, "rows.csv")
with open(csv, "w") as f:
    f.write(",".join(names) + "\n")
    for _ in range(a.rows):
        f.write(",".join("%.5f" % rng.gauss(0, 1) for _ in names) + "\n")

order = []
for i in range(a.n):
    order += [a.a, a.b] if i % 2 == 0 else [a.b, a.a]
runs = {a.a: [], a.b: []}
print("build wall_s peak_rss_mb")
for build in order:
    out = os.path.join(keep.name, "out.csv")
    cmd = ["/usr/bin/time", "-f", "%e %M", os.path.join(build, "ensemblectl"), "predict", "--state-dir", states[build],
           "-i", csv, "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr[-2000:])
    wall, rss = r.stderr.strip().splitlines()[-1].split()
    runs[build].append({"wall_s": float(wall), "peak_rss_mb": round(int(rss) / 1024, 1)})
    print(build, wall, round(int(rss) / 1024, 1), flush=True)
med = {b: statistics.median(x["wall_s"] for x in rs) for b, rs in runs.items()}
for b, rs in runs.items():
    print(f"median {b}: {med[b]} s, peak RSS {statistics.median(x['peak_rss_mb'] for x in rs)} MB "
          f"({a.k} members x {a.rows} rows)")
print(f"B / A: {round(med[a.b] / med[a.a], 3)}")
if a.out:
    json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "k": a.k, "rows": a.rows,
               "member": member, "loadavg": open("/proc/loadavg").read().split()[:3], "runs": runs,
               "b_over_a": round(med[a.b] / med[a.a], 3)}, open(a.out, "w"), indent=1)
