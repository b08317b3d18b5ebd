#!/usr/bin/env python3
"""Fused packs vs one model per task: member-steps/s for 64 seed-000-shaped members
(9 inputs -> 6 sigmoid -> 1 linear, Huber delta 0.35, Adam, batch 32), side by side in one
run, both through the real daemon with one CPU worker and one thread.

Usage: bench/pack_throughput.py [--members 64] [--epochs 20] [--build build]
Writes bench/results/pack_throughput.json.
"""
import argparse, json, os, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def config(state, members, epochs, pack_size):
    return {"run_name": "pack-bench", "state_dir": state, "run_seed": 0, "pack_size": pack_size,
            "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
            "data": {"synthetic": {"features": 9, "initial_rows": 1000, "pool_rows": 0, "holdout_rows": 200}},
            "members": {"defaults": {"layers": [{"units": 6, "activation": "sigmoid"}], "loss": "huber",
                                     "huber_delta": 0.35, "optimizer": "adam", "lr": 0.001, "epochs": epochs,
                                     "batch_size": 32, "validation_split": 0.2},
                        "count": members},
            "rounds": {"count": 1}, "save_checkpoints": False}


def run(build, members, epochs, pack_size, work):
    state = os.path.join(work, f"pack{pack_size}")
    path = state + ".json"
    json.dump(config(state, members, epochs, pack_size), open(path, "w"))
    r = subprocess.run([os.path.join(build, "ensembled"), "run", "--config", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr[-2000:])
    journal = [json.loads(l) for l in open(os.path.join(state, "journal.jsonl"))]
    wall = next(j["wall_seconds"] for j in journal if j["event"] == "round_committed")
    steps, train = 0, 0.0
    for j in journal:
        if j["event"] == "member_done":
            m = j["metrics"]
            steps += m["epochs_run"] * -(-m["train_rows"] // 32)
            train += m["train_seconds"]  # packed: the pack's training time / K per member
    return steps, wall, train


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory(prefix="ens-packs-") as work:
        for label, ps in (("one model per task", 1), (f"fused pack of {a.members}", a.members)):
            steps, wall, train = run(a.build, a.members, a.epochs, ps, work)
            rows[label] = {"member_steps": steps, "round_wall_s": round(wall, 2), "member_steps_per_s": round(steps / wall, 1),
                           "train_s": round(train, 2), "train_member_steps_per_s": round(steps / train, 1)}
    base = rows["one model per task"]["member_steps_per_s"]
    tbase = rows["one model per task"]["train_member_steps_per_s"]
    print("round wall = everything (dispatch, training, predictions, writing and fsyncing member files);")
    print("training = the training loops alone (metrics train_seconds)")
    print(f"{'mode':24} {'member-steps':>12} {'round wall s':>12} {'steps/s (wall)':>15} {'ratio':>6} "
          f"{'train s':>8} {'steps/s (train)':>16} {'ratio':>6}")
    for k, v in rows.items():
        print(f"{k:24} {v['member_steps']:12d} {v['round_wall_s']:12.2f} {v['member_steps_per_s']:15.1f} "
              f"{v['member_steps_per_s'] / base:5.1f}x {v['train_s']:8.2f} {v['train_member_steps_per_s']:16.1f} "
              f"{v['train_member_steps_per_s'] / tbase:5.1f}x")
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": f"bench/pack_throughput.py --members {a.members} --epochs {a.epochs}",
           "machine": "2-core Debian 12 CPU dev machine, 1 worker, 1 thread", "results": rows}
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    json.dump(out, open(os.path.join(ROOT, "bench", "results", "pack_throughput.json"), "w"), indent=2)


if __name__ == "__main__":
    main()
