#!/usr/bin/env python3
"""Training throughput: the seed-000 model (9 -> 6 sigmoid -> 1, Huber delta 0.35, Adam,
batch 32), 64 members, one round, 2 CPU workers / 2 concurrent processes, 1 thread each.

Sides: ensembled (persistent libtorch workers), Keras baseline and PyTorch-Python baseline
(bench/_baselines.py: a fresh forked process per member, 2 at a time, framework imported once in
the parent before forking). Same rows, split fraction, epochs, batch size on all sides.

  member-steps      optimizer steps summed over members: epochs x ceil(train_rows / 32) each
  end-to-end /s     member-steps / wall time of the whole side (process launch to exit)
  in-training /s    member-steps / (sum of members' train_seconds / 2): the training loops'
                    own rate, with 2 running at once (fit + per-epoch validation + predict)
  packed            when the build under test knows the config key "pack_size" (a packed mode:
                    compatible members fused into one batched model per task), "ensembled" runs
                    with pack_size 1 and an extra "ensembled-packed" side with pack_size "auto";
                    otherwise packed is reported as n/a, not measured.

Usage: bench/training_throughput.py [--members 64] [--epochs 10] [--rows 2048] [--sides ...]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

C.ensure_numpy()


def run_ensembled(args, work, pack_size=None, label="ensembled"):
    work = os.path.join(work, label)
    os.makedirs(work, exist_ok=True)
    state = os.path.join(work, "state")
    cfg = {
        "run_name": "bench-throughput",
        "state_dir": state,
        "run_seed": 11,
        "resources": {"gpus": "none", "cpu_workers": args.parallel, "threads_per_worker": 1},
        "data": {"source": "synthetic",
                 "synthetic": {"features": 9, "noise": 1.0, "initial_rows": args.rows, "pool_rows": 0,
                               "holdout_rows": args.holdout_rows}},
        "members": {"defaults": C.member_defaults(args.epochs, 32, 0.2), "count": args.members},
        "mutation": {"policy": "none"},
        "rounds": {"count": 1},
    }
    if pack_size is not None:
        cfg["pack_size"] = pack_size
    d = C.Daemon(C.write_config(work, cfg), os.path.join(work, "ensembled.log"))
    rc = d.wait(timeout=900)
    if rc != 0:
        sys.exit("ensembled exited %d; see %s" % (rc, os.path.join(work, "ensembled.log")))
    recs = C.journal(state)
    members = [x["metrics"] for x in recs if x.get("event") == "member_done"]
    commit = next(x for x in recs if x.get("event") == "round_committed")
    return {"total_seconds": d.t_end - d.t_start, "round_seconds": commit["wall_seconds"],
            "members": [{"member": m["member"], "train_seconds": m["train_seconds"],
                         "steps": m["epochs_run"] * math.ceil(m["train_rows"] / 32),
                         "train_rows": m["train_rows"], "pack_size": m.get("pack_size")} for m in members],
            "pack_size_config": pack_size, "packs": len({m.get("pack_train_seconds") for m in members})
            if any(m.get("pack_size") for m in members) else None}, state


def run_baseline(args, work, side, state):
    import numpy as np
    data = os.path.join(state, "data")
    paths = {}
    for name in ("train", "pool", "holdout"):
        arr = C.read_segment(os.path.join(data, name + ".bin"))
        paths[name] = os.path.join(work, name + ".npy")
        np.save(paths[name], np.ascontiguousarray(arr))
    spec = {"framework": "keras" if side == "keras" else "torch", "workdir": os.path.join(work, side),
            "features": 9, "train_path": paths["train"], "pool_path": paths["pool"],
            "holdout_path": paths["holdout"], "rounds": 1, "members": args.members, "k": 0,
            "epochs": args.epochs, "batch_size": 32, "validation_split": 0.2, "lr": 0.001, "hidden": 6,
            "huber_delta": 0.35, "l1": 1e-5, "l2": 1e-4, "parallel": args.parallel, "threads": 1,
            "run_seed": 11, "import_in_parent": True, "calibrate_epochs": 0}
    res, wall = C.run_baseline(spec, work, side, 1800)
    r = res["rounds"][0]
    return {"total_seconds": wall, "round_seconds": r["dispatch_to_done_seconds"],
            "parent_import_seconds": res["parent_import_seconds"],
            "members": [{"member": m["member"], "train_seconds": m["train_seconds"], "steps": m["steps"],
                         "task_seconds": m["task_seconds"]} for m in r["members"]]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--rows", type=int, default=2048, help="training-set rows; 0.2 of them validate")
    ap.add_argument("--holdout-rows", type=int, default=1000)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--sides", default="ensembled,keras,torch-py")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    sides = args.sides.split(",")
    C.wait_for_binaries()
    info = C.machine_info()
    work = C.tempdir("bench-throughput-")
    print("work dir:", work)
    raw = {}
    packs = C.supports_pack_size()
    print("packed mode (config key pack_size) in this build:", "yes" if packs else "no")
    try:
        raw["ensembled"], state = run_ensembled(args, work, 1 if packs else None, "ensembled")
        if packs:
            raw["ensembled-packed"], _ = run_ensembled(args, work, "auto", "ensembled-packed")
        for side in ("keras", "torch-py"):
            if side in sides:
                if not os.path.exists(C.BENCH_PY):
                    print("skipping %s: %s missing (run bench/setup_baselines.sh)" % (side, C.BENCH_PY))
                    continue
                raw[side] = run_baseline(args, work, side, state)
        if "ensembled" not in sides:
            raw.pop("ensembled")
            raw.pop("ensembled-packed", None)
    finally:
        if not args.keep:
            C.rmtree(work)
    summ = {}
    for side, r in raw.items():
        steps = sum(m["steps"] for m in r["members"])
        train = sum(m["train_seconds"] for m in r["members"])
        summ[side] = {"members": len(r["members"]), "member_steps": steps, "total_seconds": r["total_seconds"],
                      "round_seconds": r["round_seconds"], "sum_train_seconds": train,
                      "end_to_end_steps_per_s": steps / r["total_seconds"],
                      "round_steps_per_s": steps / r["round_seconds"],
                      "in_training_steps_per_s": steps / (train / args.parallel),
                      "train_share_of_wall": (train / args.parallel) / r["total_seconds"]}
    print("\ntraining throughput: %d members x %d epochs x 32-row batches over %d training rows, "
          "%d workers, 1 thread each" % (args.members, args.epochs, round(args.rows * 0.8), args.parallel))
    C.print_table(["side", "member-steps", "wall s", "end-to-end steps/s", "round-only steps/s",
                   "in-training steps/s", "training share of wall", "packed"],
                  [[k, s["member_steps"], s["total_seconds"], s["end_to_end_steps_per_s"],
                    s["round_steps_per_s"], s["in_training_steps_per_s"], s["train_share_of_wall"],
                    ("yes: pack_size auto" if k == "ensembled-packed" else
                     "no (pack_size 1)" if k == "ensembled" and packs else "n/a")]
                   for k, s in summ.items()])
    if not packs:
        print("packed: n/a (this build has no packed mode)")
    print("(round-only: ensembled = journal wall_seconds of the round, dispatch to last member done;"
          " baselines = first process start to last member done, parent import excluded)")
    ratios = {}
    for e_name in ("ensembled", "ensembled-packed"):
        if e_name not in summ:
            continue
        e = summ[e_name]
        for k in ("keras", "torch-py"):
            if k in summ:
                ratios["%s / %s" % (e_name, k)] = {
                    "end_to_end": e["end_to_end_steps_per_s"] / summ[k]["end_to_end_steps_per_s"],
                    "in_training": e["in_training_steps_per_s"] / summ[k]["in_training_steps_per_s"]}
    if "ensembled" in summ and "ensembled-packed" in summ:
        ratios["ensembled-packed / ensembled"] = {
            "end_to_end": summ["ensembled-packed"]["end_to_end_steps_per_s"] / summ["ensembled"]["end_to_end_steps_per_s"],
            "in_training": summ["ensembled-packed"]["in_training_steps_per_s"] / summ["ensembled"]["in_training_steps_per_s"]}
    if ratios:
        print("\nratios (x faster)")
        C.print_table(["pair", "end-to-end", "in-training"],
                      [[k, v["end_to_end"], v["in_training"]] for k, v in ratios.items()])
    C.write_result("training_throughput", {"machine": info, "args": vars(args), "summary": summ,
                                           "ratios": ratios,
                                           "packed": "measured (pack_size auto)" if packs else "n/a (no packed mode in this build)",
                                           "raw": raw})


if __name__ == "__main__":
    main()
