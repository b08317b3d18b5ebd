#!/usr/bin/env python3
"""Fused packs against one model per task, side by side in one run, through the real daemon
with one CPU worker and one thread: seed-000-shaped members (9 inputs -> 6 sigmoid -> 1
linear, Huber delta 0.35, Adam, batch 32; 1000 rows, 800 of them for training). Two rounds
(mutation none); the figures are round 1's, when the worker is already up.

For each case K x E (K members, E epochs) it runs a round with
  pack_size 1       one member per task (skipped above --baseline-max members)
  pack_size "auto"  the daemon's own plan
  pack_size K       one fused pack of all K
and reports member-steps/s over the whole round ("wall") and inside the training loop
("train"), the ratio of round wall time to the pack's training time (issue 19: <= 1.5), and
the fsync/fdatasync/syncfs calls of one fused round (two-round run less a one-round run, both
under strace -f -c, apart from the timed runs; "n/a" without strace).

Usage: bench/pack_throughput.py [--cases 64x20,512x20,4096x4] [--baseline-max 512] [--build build]
                                [--gpus none|auto] [--work-dir DIR] [--out bench/results/pack_throughput.json]
"""
import argparse, json, os, re, shutil, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


GPUS = "none"  # --gpus: "auto" on a GPU machine (scripts/gpu-check)
# What users keep (issue 52): checkpoints on (predict, export and verify need them), the state
# on a disk. --no-checkpoints and --work-dir /dev/shm measure the other ways.
CHECKPOINTS = True


def default_work_root():
    """A folder on the machine's disk for the runs' state (the system temp folder may be tmpfs)."""
    root = os.path.join(os.path.expanduser("~"), ".cache", "ensembled", "bench-work")
    os.makedirs(root, exist_ok=True)
    return root


SEED000 = {"layers": [{"units": 6, "activation": "sigmoid"}], "loss": "huber", "huber_delta": 0.35,
           "optimizer": "adam", "lr": 0.001, "batch_size": 32, "validation_split": 0.2}


def config(state, members, epochs, pack_size, rounds=2, layout=None, member=None):
    """member: the members' defaults (default SEED000), epochs added."""
    resources = {"gpus": GPUS, "cpu_workers": 1, "threads_per_worker": 1}
    if GPUS != "none":
        resources["workers_per_gpu"] = 1
    return {"run_name": "pack-bench", "state_dir": state, "run_seed": 0, "pack_size": pack_size,
            "resources": resources,
            "data": {"synthetic": {"features": 9, "initial_rows": 1000, "pool_rows": 0, "holdout_rows": 200}},
            "members": {"defaults": dict(member or SEED000, epochs=epochs), "count": members},
            "rounds": {"count": rounds}, "save_checkpoints": CHECKPOINTS,
            **({"results_layout": layout} if layout else {})}


def run(build, members, epochs, pack_size, work, strace=False, rounds=2, layout=None, member=None):
    """layout: config results_layout ("members", "packs"); None: the build's default. member:
    the members' defaults (config's)."""
    state = os.path.join(work, f"k{members}-e{epochs}-p{pack_size}-r{rounds}" + ("-strace" if strace else "") +
                         (f"-{layout}" if layout else ""))
    if os.path.exists(state):  # the daemon would resume the finished run: no training, its old figures again
        sys.exit(f"{state}: exists; each run needs a fresh work directory")
    path = state + ".json"
    json.dump(config(state, members, epochs, pack_size, rounds, layout, member), open(path, "w"))
    batch = (member or SEED000)["batch_size"]
    cmd = [os.path.join(build, "ensembled"), "run", "--config", path]
    os.sync()  # the last run's writes are not this run's to flush
    trace = state + ".strace"
    if strace:
        cmd = ["strace", "-f", "-c", "-o", trace, "-e", "trace=fsync,fdatasync,syncfs"] + cmd
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr[-2000:])
    if strace:
        calls = 0
        for line in open(trace):
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync|syncfs)\s*$", line)
            if m:
                calls += int(m.group(1))
        return calls
    # Round 1: the workers are up (round 0 also waits for them to load libtorch, ~1.5 s here),
    # as in a daemon that has been running; mutation "none", so both rounds train the same data.
    journal = [json.loads(l) for l in open(os.path.join(state, "journal.jsonl"))]
    wall = next(j["wall_seconds"] for j in journal if j["event"] == "round_committed" and j["round"] == 1)
    steps, train, members, prepare, outputs = 0, 0.0, 0, 0.0, 0.0
    for j in journal:
        if j["event"] == "member_done" and j["round"] == 1:
            m = j["metrics"]
            members += 1
            steps += m["epochs_run"] * -(-m["train_rows"] // batch)
            train += m["train_seconds"]  # packed: the pack's training time / K per member
            # A fused pack's phases outside its loop (each member carries its pack's): / K sums them once
            prepare += m.get("pack_prepare_seconds", 0.0) / m.get("pack_size", 1)
            outputs += m.get("pack_outputs_seconds", 0.0) / m.get("pack_size", 1)
    outside = wall - train
    return {"member_steps": steps, "round_wall_s": round(wall, 3), "member_steps_per_s": round(steps / wall, 1),
            "train_s": round(train, 3), "train_member_steps_per_s": round(steps / train, 1),
            "wall_over_train": round(wall / train, 2),
            # Per member outside the training loop, in ms: the worker's set-up and outputs (fused
            # packs only, from the members' metrics) and the rest (metrics.json, the flush and
            # renames, the supervisor's reading, journaling and commit, dispatch)
            "outside_ms_per_member": round(outside / members * 1e3, 3),
            "prepare_ms_per_member": round(prepare / members * 1e3, 3),
            "outputs_ms_per_member": round(outputs / members * 1e3, 3),
            "rest_ms_per_member": round((outside - prepare - outputs) / members * 1e3, 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="64x20,512x20,4096x4", help="KxE,... (members x epochs)")
    ap.add_argument("--baseline-max", type=int, default=512, help="largest K also run one member per task")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--sweep", default="", help="pack sizes P,... also run as pack_size P (the auto cap's measurements)")
    ap.add_argument("--gpus", default="none", help='"none" (CPU worker) or "auto" (one worker on the GPU)')
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "pack_throughput.json"))
    ap.add_argument("--work-dir", default=None,
                    help="where the runs' state directories go (default: ~/.cache/ensembled/bench-work, on "
                         "the disk, as users keep state). The member files' cost depends on the filesystem: "
                         "on ext4 without a journal, files deleted in the last minutes make new ones several "
                         "times dearer; /dev/shm (tmpfs) is the cheapest")
    ap.add_argument("--no-checkpoints", action="store_true",
                    help="save_checkpoints false (users keep the default, true: predict, export, verify need them)")
    a = ap.parse_args()
    global GPUS, CHECKPOINTS
    GPUS = a.gpus
    CHECKPOINTS = not a.no_checkpoints
    have_strace = shutil.which("strace") is not None
    cases = []
    with tempfile.TemporaryDirectory(prefix="ens-packs-", dir=a.work_dir or default_work_root()) as work:
        for case in a.cases.split(","):
            k, e = (int(x) for x in case.split("x"))
            rows = {}
            if k <= a.baseline_max:
                rows["one model per task"] = run(a.build, k, e, 1, work)
            rows["auto"] = run(a.build, k, e, "auto", work)
            rows[f"fused pack of {k}"] = run(a.build, k, e, k, work)
            for p in (int(x) for x in a.sweep.split(",") if x):
                if p < k:
                    rows[f"packs of {p}"] = run(a.build, k, e, p, work)
            # One round's calls: a two-round run's less a one-round run's (start-up cancels out).
            fsyncs = (run(a.build, k, e, k, work, strace=True, rounds=2) -
                      run(a.build, k, e, k, work, strace=True, rounds=1)) if have_strace else None
            cases.append({"members": k, "epochs": e, "fused_round_fsync_calls": fsyncs, "results": rows})
    print("wall = the whole round (dispatch, training, predictions, writing, journaling, commit);")
    print("train = the training loops alone (metrics train_seconds); ratios against one model per task")
    print(f"{'K x E':>9} {'mode':20} {'steps':>8} {'wall s':>8} {'steps/s wall':>13} {'ratio':>6} "
          f"{'train s':>8} {'steps/s train':>14} {'ratio':>6} {'wall/train':>10}")
    for c in cases:
        base = c["results"].get("one model per task")
        for mode, v in c["results"].items():
            rw = f"{v['member_steps_per_s'] / base['member_steps_per_s']:5.1f}x" if base else "    -"
            rt = f"{v['train_member_steps_per_s'] / base['train_member_steps_per_s']:5.1f}x" if base else "    -"
            print(f"{c['members']:>5} x{c['epochs']:<3} {mode:20} {v['member_steps']:8d} {v['round_wall_s']:8.2f} "
                  f"{v['member_steps_per_s']:13.1f} {rw} {v['train_s']:8.2f} {v['train_member_steps_per_s']:14.1f} "
                  f"{rt} {v['wall_over_train']:10.2f}")
            if "pack" in mode or mode == "auto":
                print(f"{'':>9}   outside training, ms a member: {v['outside_ms_per_member']:.3f} = worker set-up "
                      f"{v['prepare_ms_per_member']:.3f} + worker outputs {v['outputs_ms_per_member']:.3f} + "
                      f"rest {v['rest_ms_per_member']:.3f}")
        print(f"{'':>9} fsync+fdatasync+syncfs calls per round, fused: "
              f"{c['fused_round_fsync_calls'] if c['fused_round_fsync_calls'] is not None else 'n/a (no strace)'}")
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": f"bench/pack_throughput.py --cases {a.cases} --baseline-max {a.baseline_max}" +
                      (f" --sweep {a.sweep}" if a.sweep else "") + (f" --work-dir {a.work_dir}" if a.work_dir else "") +
                      (" --no-checkpoints" if a.no_checkpoints else ""),
           "checkpoints": CHECKPOINTS,
           "state_on": a.work_dir or default_work_root(),
           "machine": "2-core Debian 12 CPU dev machine, 1 worker, 1 thread" if a.gpus == "none" else "GPU: gpus " + a.gpus,
           "cases": cases}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(out, open(a.out, "w"), indent=2)


if __name__ == "__main__":
    main()
