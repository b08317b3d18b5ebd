#!/usr/bin/env python3
"""In-loop member-steps/s of a fused pack, two builds side by side (issue 34 item 3).

    python3 bench/loop_throughput.py --baseline /path/to/old/build [--build build] [--cases 512x4,512x20,64x20] [--reps 3]

Runs bench/pack_throughput.py's configuration (seed-000 members: 9 -> 6 sigmoid -> 1, batch
32, 1,000 rows, one CPU worker, one thread, one pack of K) with each build in turn, `--reps`
times alternating, and prints per case the median of the training loop's member-steps/s
(round 1: member-steps / the pack's training seconds) and of the round wall, and the ratio of
this build to the baseline. The baseline is any earlier build of ensembled (for the issue,
d336c64 built in a worktree). As users run (issue 52): checkpoints on, state directories on the
disk (~/.cache/ensembled/bench-work); --tmpfs puts them in /dev/shm (less noise in the wall
times), --no-checkpoints turns checkpoints off.
"""
import argparse, json, os, statistics, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pack_throughput  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="build folder of the build to compare against")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cases", default="512x4,512x20,64x20", help="KxE,... (members x epochs), one fused pack each")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "loop_throughput.json"))
    ap.add_argument("--tmpfs", action="store_true", help="state directories in /dev/shm instead of on the disk")
    ap.add_argument("--no-checkpoints", action="store_true", help="save_checkpoints false")
    a = ap.parse_args()
    builds = {"baseline": a.baseline, "this build": a.build}
    for name, path in builds.items():
        for binary in ("ensembled", "ensemble-worker"):
            if not os.access(os.path.join(path, binary), os.X_OK):
                sys.exit(f"{name}: no {binary} in {path}")
    pack_throughput.CHECKPOINTS = not a.no_checkpoints
    work_root = "/dev/shm" if a.tmpfs and os.path.isdir("/dev/shm") else pack_throughput.default_work_root()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ens-loop-", dir=work_root) as work:
        for case in a.cases.split(","):
            k, e = (int(x) for x in case.split("x"))
            got = {name: [] for name in builds}
            for rep in range(a.reps):
                for name, path in builds.items():
                    d = os.path.join(work, f"{name.replace(' ', '_')}-{case}-{rep}")
                    os.makedirs(d)
                    got[name].append(pack_throughput.run(path, k, e, k, d))
            med = {name: {"train_member_steps_per_s": statistics.median(r["train_member_steps_per_s"] for r in runs),
                          "round_wall_s": statistics.median(r["round_wall_s"] for r in runs),
                          "train_s": statistics.median(r["train_s"] for r in runs),
                          "all_train_member_steps_per_s": [r["train_member_steps_per_s"] for r in runs]}
                   for name, runs in got.items()}
            rows.append({"members": k, "epochs": e, "results": med,
                         "loop_ratio": med["this build"]["train_member_steps_per_s"] /
                                       med["baseline"]["train_member_steps_per_s"],
                         "wall_ratio": med["baseline"]["round_wall_s"] / med["this build"]["round_wall_s"]})
    print(f"{'K x E':>9} {'build':11} {'loop member-steps/s (median)':>29} {'train s':>8} {'round wall s':>13}")
    for r in rows:
        for name, v in r["results"].items():
            print(f"{r['members']:>5} x{r['epochs']:<3} {name:11} {v['train_member_steps_per_s']:29.0f} "
                  f"{v['train_s']:8.3f} {v['round_wall_s']:13.3f}")
        print(f"{'':>9} loop: this build / baseline = {r['loop_ratio']:.2f}x; round wall: baseline / this build = "
              f"{r['wall_ratio']:.2f}x")
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": f"bench/loop_throughput.py --baseline {a.baseline} --cases {a.cases} --reps {a.reps}",
           "machine": "2-core Debian 12 CPU dev machine, 1 worker, 1 thread", "cases": rows}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(out, open(a.out, "w"), indent=2)


if __name__ == "__main__":
    main()
