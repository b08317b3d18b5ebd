#!/usr/bin/env python3
"""Round turnaround: 8 members, tiny work per round, 10 rounds.

Sides (same model, loss, optimizer, epochs, batch size, data sizes):
  ensembled    build/ensembled run (2 persistent CPU workers, 1 thread each)
  keras        bench/_baselines.py: per round a fresh forked process per member, 2 at a time,
               Keras on tensorflow-cpu, dataset in a NumPy memmap, parent appends rows
  torch-py     the same driver with PyTorch in Python instead of Keras

Definitions (per round r):
  round wall   time from the end of round r-1 (rows appended, round committed) to the end of
               round r. Round 0 starts when the side's process is launched, so it also holds
               start-up (ensembled: data generation + worker spawn + libtorch load; baselines:
               interpreter start + parent imports).
               ensembled: arrival times of the "round r committed" lines on its stdout.
  train time   sum over the round's members of "train_seconds" (epochs incl. per-epoch
               validation, plus holdout/pool prediction; the same region on every side)
               divided by the 2 workers/processes that run at once.
  overhead     round wall - train time: everything that is not the training arithmetic itself
               (process start, imports, model build, data mapping, splitting, writing results,
               dispatch, journaling, appending rows).
The headline figure is the mean overhead of the steady rounds 1..9; round 0 is shown apart.

Usage: bench/round_turnaround.py [--rounds 10] [--members 8] [--sides ensembled,keras,torch-py]
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

C.ensure_numpy()


def run_ensembled(args, work, pack_size=None, label="ensembled"):
    """pack_size None: the key is left out (a build without packing); 1: one member per task;
    "auto": the build's packed mode."""
    work = os.path.join(work, label)
    os.makedirs(work, exist_ok=True)
    state = os.path.join(work, "state")
    cfg = {
        "run_name": "bench-turnaround",
        "state_dir": state,
        "run_seed": 7,
        "resources": {"gpus": "none", "cpu_workers": args.parallel, "threads_per_worker": 1},
        "data": {"source": "synthetic",
                 "synthetic": {"features": args.features, "noise": 1.0, "initial_rows": args.initial_rows,
                               "pool_rows": args.pool_rows, "holdout_rows": args.holdout_rows}},
        "members": {"defaults": C.member_defaults(args.epochs, args.batch_size, args.validation_split),
                    "count": args.members},
        "mutation": {"policy": "append_from_pool", "k": args.k},
        "rounds": {"count": args.rounds},
    }
    if pack_size is not None:
        cfg["pack_size"] = pack_size
    path = C.write_config(work, cfg)
    d = C.Daemon(path, os.path.join(work, "ensembled.log"))
    rc = d.wait(timeout=600)
    if rc != 0:
        sys.exit("ensembled exited %d; see %s" % (rc, os.path.join(work, "ensembled.log")))
    commits = [t for t, line in d.lines if line.startswith("round ") and " committed:" in line]
    if len(commits) != args.rounds:
        sys.exit("expected %d committed rounds, saw %d" % (args.rounds, len(commits)))
    recs = C.journal(state)
    rounds = []
    prev = d.t_start
    for r in range(args.rounds):
        members = [x["metrics"] for x in recs if x.get("event") == "member_done" and x.get("round") == r]
        commit = next(x for x in recs if x.get("event") == "round_committed" and x.get("round") == r)
        rounds.append({"round": r, "wall_seconds": commits[r] - prev,
                       "journal_wall_seconds": commit["wall_seconds"], "trained_rows": commit["trained_rows"],
                       "members": [{"member": m["member"], "train_seconds": m["train_seconds"],
                                    # a packed member's history holds its whole pack's epoch time;
                                    # its train_seconds is already the pack's time / pack_size
                                    "pure_seconds": history_seconds(state, r, m["member"]) / (m.get("pack_size") or 1),
                                    "task_seconds": m["seconds"], "epochs_run": m["epochs_run"],
                                    "train_rows": m["train_rows"], "pack_size": m.get("pack_size"),
                                    "pid": m.get("pid")} for m in members]})
        prev = commits[r]
    return {"framework": label, "total_seconds": d.t_end - d.t_start, "rounds": rounds,
            "exit_code": rc, "pack_size_config": pack_size}, state


def history_seconds(state, r, member):
    """Sum of the per-epoch "seconds" of a member's history.jsonl: ensembled's epochs incl.
    validation, without holdout/pool prediction and checkpoint writing. (For a packed member
    this is its whole pack's epoch time.)"""
    total = 0.0
    with open(os.path.join(state, "rounds", "r%04d" % r, "members", member, "history.jsonl")) as f:
        for line in f:
            if line.strip():
                total += json.loads(line)["seconds"]
    return total


def export_data(state, work, initial_rows):
    import numpy as np
    data = os.path.join(state, "data")
    train = C.read_segment(os.path.join(data, "train.bin"))[:initial_rows]
    pool = C.read_segment(os.path.join(data, "pool.bin"))
    holdout = C.read_segment(os.path.join(data, "holdout.bin"))
    paths = {}
    for name, arr in (("train", train), ("pool", pool), ("holdout", holdout)):
        paths[name] = os.path.join(work, name + ".npy")
        np.save(paths[name], np.ascontiguousarray(arr))
    return paths


def run_baseline(args, work, framework, paths):
    spec = {"framework": "keras" if framework == "keras" else "torch",
            "workdir": os.path.join(work, framework), "features": args.features,
            "train_path": paths["train"], "pool_path": paths["pool"], "holdout_path": paths["holdout"],
            "rounds": args.rounds, "members": args.members, "k": args.k, "epochs": args.epochs,
            "batch_size": args.batch_size, "validation_split": args.validation_split, "lr": 0.001,
            "hidden": 6, "huber_delta": 0.35, "l1": 1e-5, "l2": 1e-4, "parallel": args.parallel,
            "threads": 1, "run_seed": 7, "import_in_parent": args.import_in_parent,
            "calibrate_epochs": args.calibrate_epochs}
    res, wall = C.run_baseline(spec, work, framework, 1200)
    # Round 0 of a baseline starts at its process launch, like ensembled's.
    res["rounds"][0]["wall_seconds"] += wall - res["total_seconds"]
    res["total_seconds"] = wall
    cal = res["calibration"]
    pure = args.epochs * cal["epoch_seconds"] + cal["predict_seconds"]
    for r in res["rounds"]:
        for m in r["members"]:
            m["pure_seconds"] = pure
    return res


def summarise(res, parallel):
    per_round = []
    for r in res["rounds"]:
        n = len(r["members"])
        own = sum(m["train_seconds"] for m in r["members"]) / parallel
        pure = sum(m["pure_seconds"] for m in r["members"]) / parallel
        per_round.append({"round": r["round"], "wall": r["wall_seconds"], "train_own": own, "train_pure": pure,
                          "overhead": r["wall_seconds"] - pure, "overhead_own": r["wall_seconds"] - own,
                          "overhead_per_member": (r["wall_seconds"] - pure) * parallel / n})
    steady = per_round[1:] if len(per_round) > 1 else per_round
    mean = lambda key: statistics.mean(x[key] for x in steady)
    return {
        "total_seconds": res["total_seconds"],
        "round0_wall": per_round[0]["wall"], "round0_overhead": per_round[0]["overhead"],
        "steady_wall_mean": mean("wall"),
        "steady_train_pure_mean": mean("train_pure"),
        "steady_train_own_mean": mean("train_own"),
        "steady_overhead_mean": mean("overhead"),
        "steady_overhead_median": statistics.median(x["overhead"] for x in steady),
        "steady_overhead_own_mean": mean("overhead_own"),
        "steady_overhead_per_member_mean": mean("overhead_per_member"),
        "mean_member_train_seconds": statistics.mean(
            m["train_seconds"] for r in res["rounds"] for m in r["members"]),
        "calibration": res.get("calibration"),
        "per_round": per_round,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--members", type=int, default=8)
    ap.add_argument("--parallel", type=int, default=2, help="CPU workers / concurrent processes")
    ap.add_argument("--features", type=int, default=9)
    ap.add_argument("--initial-rows", type=int, default=80, help="80 rows, validation 0.2 -> 64 training rows")
    ap.add_argument("--pool-rows", type=int, default=200)
    ap.add_argument("--holdout-rows", type=int, default=200)
    ap.add_argument("--k", type=int, default=8, help="rows appended per round (append_from_pool)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--validation-split", type=float, default=0.2)
    ap.add_argument("--sides", default="ensembled,keras,torch-py")
    ap.add_argument("--no-import-in-parent", dest="import_in_parent", action="store_false",
                    help="baselines import the framework in each child instead of once in the parent")
    ap.add_argument("--calibrate-epochs", type=int, default=30)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = ap.parse_args()
    sides = args.sides.split(",")
    C.wait_for_binaries()
    info = C.machine_info()
    work = C.tempdir("bench-turnaround-")
    print("work dir:", work)
    results = {}
    packs = C.supports_pack_size()
    print("packed mode (config key pack_size) in this build:", "yes" if packs else "no")
    try:
        res, state = run_ensembled(args, work, 1 if packs else None, "ensembled")
        results["ensembled"] = res
        if packs:
            results["ensembled-packed"], _ = run_ensembled(args, work, "auto", "ensembled-packed")
        paths = export_data(state, work, args.initial_rows)
        for side in ("keras", "torch-py"):
            if side in sides:
                if not os.path.exists(C.BENCH_PY):
                    print("skipping %s: %s missing (run bench/setup_baselines.sh)" % (side, C.BENCH_PY))
                    continue
                results[side] = run_baseline(args, work, side, paths)
    finally:
        if not args.keep:
            C.rmtree(work)
    summ = {k: summarise(v, args.parallel) for k, v in results.items()}

    print("\nround turnaround: %d members, %d rounds, %d epoch(s) over %d training rows (+%d/round), "
          "batch %d, %d at a time, 1 thread each" % (args.members, args.rounds, args.epochs,
                                                      round(args.initial_rows * (1 - args.validation_split)),
                                                      args.k, args.batch_size, args.parallel))
    headers = ["side", "total s", "round0 wall s", "steady wall s/round", "pure train s/round",
               "OVERHEAD s/round", "overhead s/member", "own train_seconds s/round", "wall - own"]
    rows = []
    for k, s in summ.items():
        rows.append([k, s["total_seconds"], s["round0_wall"], s["steady_wall_mean"], s["steady_train_pure_mean"],
                     s["steady_overhead_mean"], s["steady_overhead_per_member_mean"],
                     s["steady_train_own_mean"], s["steady_overhead_own_mean"]])
    C.print_table(headers, rows)
    print("(steady = mean of rounds 1..%d; 'pure train' = ensembled: its epochs' history seconds; baselines:"
          " epochs x steady epoch time + steady predict time, calibrated after the run;"
          " 'own train_seconds' = each side's timed fit+predict region incl. Keras tracing)" % (args.rounds - 1))
    print("\nper-round overhead (s), rounds 0..%d:" % (args.rounds - 1))
    for k, s in summ.items():
        print("  %-10s %s" % (k, " ".join("%.3f" % x["overhead"] for x in s["per_round"])))
    ratios = {}
    for e_name in ("ensembled", "ensembled-packed"):
        if e_name not in summ:
            continue
        e = summ[e_name]
        for k in ("keras", "torch-py"):
            if k in summ:
                ratios["%s : %s" % (e_name, k)] = {
                    "steady_overhead": e["steady_overhead_mean"] / summ[k]["steady_overhead_mean"],
                    "steady_overhead_own": e["steady_overhead_own_mean"] / summ[k]["steady_overhead_own_mean"],
                    "steady_wall": e["steady_wall_mean"] / summ[k]["steady_wall_mean"],
                    "total": e["total_seconds"] / summ[k]["total_seconds"],
                }
    if ratios:
        print("\nratios ensembled : baseline (lower is better for ensembled)")
        C.print_table(["pair", "OVERHEAD", "overhead (own train_seconds)", "steady round wall",
                       "total wall", "1/x overhead"],
                      [[k, v["steady_overhead"], v["steady_overhead_own"], v["steady_wall"], v["total"],
                        "1/%.0f" % (1 / v["steady_overhead"]) if v["steady_overhead"] > 0 else "n/a"]
                       for k, v in ratios.items()])
        for e_name in ("ensembled", "ensembled-packed"):
            k = "%s : keras" % e_name
            if k in ratios:
                x = ratios[k]["steady_overhead"]
                print("goal %s overhead <= 1/100 of Keras: %s (%.4f)" % (e_name, "MET" if x <= 0.01 else "NOT MET", x))
    C.write_result("round_turnaround", {"machine": info, "args": vars(args), "summary": summ, "ratios": ratios,
                                        "raw": results})


if __name__ == "__main__":
    main()
