#!/usr/bin/env python3
"""One fused pack of K members x E epochs (bench/pack_throughput.py's run(): checkpoints on,
round 1 of 2) by two builds, interleaved A B B A ... N times each, so both sides see the same
load and the same recently deleted files (on ext4 without a journal, files deleted in the last
minutes make new ones dearer: a run's own deletions slow the next). Prints each run and the
medians; the raw runs go to --out.

--member JSON gives the members' defaults (default: seed 000's, pack_throughput.SEED000), e.g. to
set the lane kernel's weight cap side by side with a build that trains the same members elsewhere.

Usage: bench/builds_side_by_side.py BUILD_A BUILD_B [--k 512] [--epochs 4] [--n 4] [--member JSON]
                                    [--work-dir DIR] [--out FILE]
"""
import argparse, json, os, statistics, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pack_throughput as p  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("a")
ap.add_argument("b")
ap.add_argument("--k", type=int, default=512)
ap.add_argument("--epochs", type=int, default=4)
ap.add_argument("--n", type=int, default=4)
ap.add_argument("--member", default=None, help="the members' defaults as JSON (default: seed 000's)")
ap.add_argument("--work-dir", default=None, help="default: ~/.cache/ensembled/bench-work (the disk); /dev/shm: tmpfs")
ap.add_argument("--out", default=None)
a = ap.parse_args()
member = json.loads(a.member) if a.member else None
root = a.work_dir or p.default_work_root()
runs = {a.a: [], a.b: []}
order = []
for i in range(a.n):
    order += [a.a, a.b] if i % 2 == 0 else [a.b, a.a]
print("build wall_s train_s wall/train outside_ms = set-up + outputs + rest (ms a member)")
# Every run's state stays until the end: on ext4 without a journal (this machine's disk) the
# kernel skips inodes freed in the last 60 s (360 s while their inode-table block is dirty)
# when it allocates new ones, so deleting a run's thousands of files makes the next run's
# files several times dearer (the first run of a series was then 3-4x faster than the rest). A daemon's rounds do not delete a round's worth
# of files before the next (retention removes a few files of rounds outside its window).
keep = tempfile.TemporaryDirectory(dir=root)
for i, build in enumerate(order):
    w = os.path.join(keep.name, f"run{i}")
    os.makedirs(w)
    r = p.run(build, a.k, a.epochs, a.k, w, member=member)
    runs[build].append(r)
    print(build, r["round_wall_s"], r["train_s"], r["wall_over_train"], r["outside_ms_per_member"], "=",
          r["prepare_ms_per_member"], "+", r["outputs_ms_per_member"], "+", r["rest_ms_per_member"],
          f"({r['train_member_steps_per_s']} member-steps/s in the loop)", flush=True)
for build, rs in runs.items():
    med = lambda key: round(statistics.median(x[key] for x in rs), 3)  # noqa: E731
    print(f"median {build}: wall {med('round_wall_s')} s, train {med('train_s')} s, wall/train {med('wall_over_train')}, "
          f"outside {med('outside_ms_per_member')} ms a member (outputs {med('outputs_ms_per_member')}), "
          f"{med('train_member_steps_per_s')} member-steps/s in the loop")
if a.out:
    json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "k": a.k, "epochs": a.epochs,
               "member": member,
               "state_on": root, "loadavg": open("/proc/loadavg").read().split()[:3], "runs": runs},
              open(a.out, "w"), indent=1)
