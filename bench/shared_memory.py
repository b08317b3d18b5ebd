#!/usr/bin/env python3
"""Shared memory: 8 CPU workers (1 thread each) on a ~1 GiB training set.

Makes x.npy (rows x 10 float32) and y.npy (rows float32) in a temp dir (default 24M rows:
(10 + 1) x 4 B x 24M = 1.056 GB = 0.98 GiB in train.bin), starts `ensembled run` on them
(source npy, holdout_fraction 1e-4, no pool, 8 members of a trivial model, 1 epoch, batch 65536,
validation_split 0.01), and samples every ~0.5 s while it runs:
  - each worker's /proc/PID/smaps_rollup (Pss, Pss_Anon, Pss_File) and, from /proc/PID/smaps,
    the Pss/Rss of its data/train.bin mapping;
  - the supervisor's smaps_rollup Pss.
Reported moments: the first sample where all 8 workers have (almost) all of the table resident
in their train.bin mapping (each worker checksums the whole table when it maps it, so every page
is touched); the sample with the largest summed worker Pss; the last sample. Sampling goes on
for --window seconds after the first of these, or until a member finishes.
  worker base   = worker Pss - its Pss of the train.bin mapping
  goal          = sum of worker Pss <= 1.1 GiB + 8 x base (mean base)
Then SIGTERM twice (stop at once).

A second, small run (--small-rows rows, same config but 100000 epochs so that it is still
training when sampled; it is stopped the same way) gives the base of a worker on a
tiny table, to show how much of the base grows with the row count.

Usage: bench/shared_memory.py [--rows 24000000] [--workers 8] [--small-rows 20000]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

C.ensure_numpy()
GiB = 1024 ** 3


def make_npy(directory, rows, features=10, chunk=2_000_000):
    import numpy as np
    xp, yp = os.path.join(directory, "x.npy"), os.path.join(directory, "y.npy")
    x = np.lib.format.open_memmap(xp, mode="w+", dtype=np.float32, shape=(rows, features))
    y = np.lib.format.open_memmap(yp, mode="w+", dtype=np.float32, shape=(rows,))
    rng = np.random.default_rng(3)
    w = rng.standard_normal(features).astype(np.float32)
    for b in range(0, rows, chunk):
        e = min(rows, b + chunk)
        xb = rng.random((e - b, features), dtype=np.float32)
        x[b:e] = xb
        y[b:e] = xb @ w + 0.1 * rng.standard_normal(e - b).astype(np.float32)
    x.flush()
    y.flush()
    del x, y
    return xp, yp


def rollup(pid):
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return out


def mapping(pid, suffix):
    """Summed Pss/Rss/Size (bytes) of pid's mappings of files whose path ends with suffix."""
    tot = {"Pss": 0, "Rss": 0, "Size": 0}
    cur = False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                cur = line.rstrip().endswith(suffix)
                continue
            if cur:
                k = first.rstrip(":")
                if k in tot:
                    tot[k] += int(line.split()[1]) * 1024
    return tot


def has_mapping(pid, suffix):
    try:
        with open("/proc/%d/maps" % pid) as f:
            return any(line.rstrip().endswith(suffix) for line in f)
    except OSError:
        return False


def sample(sup, workers):
    s = {"t": time.monotonic(), "supervisor": rollup(sup)["Pss"], "workers": {}}
    for pid in workers:
        try:
            r = rollup(pid)
            m = mapping(pid, "/data/train.bin")
            s["workers"][pid] = {"Pss": r["Pss"], "Pss_Anon": r.get("Pss_Anon", 0),
                                 "Pss_File": r.get("Pss_File", 0), "Rss": r["Rss"],
                                 "train_Pss": m["Pss"], "train_Rss": m["Rss"], "train_Size": m["Size"],
                                 "mapped": m["Size"] > 0}
        except (OSError, KeyError):
            pass
    return s


def run_one(args, rows, work, label, epochs, poll_s=0.5):
    print("[%s] generating %d x 10 float32 + target ..." % (label, rows), flush=True)
    t = time.monotonic()
    xp, yp = make_npy(work, rows)
    print("[%s] npy files: %.2f GiB in %.1fs" % (label, (os.path.getsize(xp) + os.path.getsize(yp)) / GiB,
                                                time.monotonic() - t), flush=True)
    state = os.path.join(work, "state")
    cfg = {
        "run_name": "bench-shm-" + label, "state_dir": state, "run_seed": 5,
        "resources": {"gpus": "none", "cpu_workers": args.workers, "threads_per_worker": 1},
        "data": {"source": "npy", "x_path": xp, "y_path": yp, "holdout_fraction": 1e-4},
        "members": {"defaults": {"layers": [{"units": 4, "activation": "relu"}], "epochs": epochs,
                                 "batch_size": args.batch_size, "validation_split": 0.01},
                    "count": args.workers},
        "mutation": {"policy": "none"},
        "rounds": {"count": 1},
        "heartbeat_timeout_s": args.heartbeat_timeout,
    }
    if args.packs:
        cfg["pack_size"] = 1  # one member per task, so each of the 8 workers trains (and maps) one
    d = C.Daemon(C.write_config(work, cfg), os.path.join(work, "ensembled.log"))
    samples, sup_peak = [], 0
    deadline = time.monotonic() + args.timeout
    data_bytes = None
    first_full = None
    try:
        while time.monotonic() < deadline and d.proc.poll() is None:
            try:
                sup_peak = max(sup_peak, rollup(d.pid)["Pss"])
            except OSError:
                break
            kids = C.children_of(d.pid)
            mapped = [k for k in kids if has_mapping(k, "/data/train.bin")]
            if data_bytes is None and os.path.exists(os.path.join(state, "data", "train.bin")) and mapped:
                import numpy as np
                hdr = np.fromfile(os.path.join(state, "data", "train.bin"), dtype=np.uint8, count=64)
                rows_ = int(hdr[24:32].view(np.uint64)[0])
                feats = int(hdr[40:44].view(np.uint32)[0])
                data_bytes = rows_ * (feats + 1) * 4
            if len(mapped) == args.workers:
                s = sample(d.pid, mapped)
                s["members_done"] = sum(1 for _, line in d.lines if " done " in line)
                samples.append(s)
                full = all(w["train_Rss"] >= 0.95 * data_bytes for w in s["workers"].values())
                if full and first_full is None:
                    first_full = s
                    print("[%s] all %d workers have the table resident (t=%.1fs after launch)"
                          % (label, args.workers, s["t"] - d.t_start), flush=True)
                if first_full is not None and (s["t"] - first_full["t"] >= args.window or s["members_done"] > 0):
                    break
            time.sleep(poll_s)
    finally:
        rc = d.stop(twice=True)
    if not samples:
        sys.exit("[%s] never saw all %d workers map train.bin (exit %s); see %s"
                 % (label, args.workers, rc, os.path.join(work, "ensembled.log")))
    best = max(samples, key=lambda s: sum(w["Pss"] for w in s["workers"].values()))
    return {"rows": rows, "data_bytes": data_bytes, "supervisor_peak_pss": sup_peak,
            "first_full": first_full, "max_sum": best, "last": samples[-1], "n_samples": len(samples),
            "exit_code": rc, "sampled_seconds": samples[-1]["t"] - samples[0]["t"],
            "worker_pids_seen": sorted({p for s in samples for p in s["workers"]}),
            "launch_to_full_s": (first_full["t"] - d.t_start) if first_full else None}


def describe(label, res, workers):
    out = {}
    for name in ("first_full", "max_sum", "last"):
        s = res[name]
        if s is None:
            continue
        ws = list(s["workers"].values())
        total = sum(w["Pss"] for w in ws)
        train = sum(w["train_Pss"] for w in ws)
        bases = [w["Pss"] - w["train_Pss"] for w in ws]
        base = sum(bases) / len(bases)
        out[name] = {"sum_worker_pss": total, "sum_train_bin_pss": train, "mean_base": base,
                     "min_base": min(bases), "max_base": max(bases),
                     "mean_anon": sum(w["Pss_Anon"] for w in ws) / len(ws),
                     "supervisor_pss": s["supervisor"], "members_done": s.get("members_done"),
                     "goal_bytes": 1.1 * GiB + workers * base, "goal_met": total <= 1.1 * GiB + workers * base}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=24_000_000)
    ap.add_argument("--small-rows", type=int, default=20_000, help="0 skips the small run")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=65536)
    ap.add_argument("--window", type=float, default=60,
                    help="seconds to keep sampling once all are resident (ends early when a member finishes)")
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--heartbeat-timeout", type=float, default=600,
                    help="config heartbeat_timeout_s; ensembled's default of 60 s kills workers whose "
                         "first epoch on the big table takes longer (heartbeats are sent per epoch)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    C.wait_for_binaries()
    args.packs = C.supports_pack_size()
    info = C.machine_info()
    try:
        info["mem_available_at_start"] = [l for l in open("/proc/meminfo") if l.startswith("MemAvailable")][0].split()[1] + " kB"
    except (OSError, IndexError):
        pass
    runs = {}
    for label, rows, epochs in (("big", args.rows, 1), ("small", args.small_rows, 100000)):
        if rows <= 0:
            continue
        work = C.tempdir("bench-shm-%s-" % label)
        try:
            runs[label] = run_one(args, rows, work, label, epochs)
        finally:
            if not args.keep:
                C.rmtree(work)
    summ = {k: describe(k, v, args.workers) for k, v in runs.items()}
    g = lambda b: "%.3f" % (b / GiB)
    print("\nshared memory: %d workers, 1 thread each (GiB)" % args.workers)
    rows = []
    for label, s in summ.items():
        r = runs[label]
        for moment, v in s.items():
            rows.append(["%s %s" % (label, moment), "%d" % r["rows"], g(r["data_bytes"]), g(v["sum_worker_pss"]),
                          g(v["sum_train_bin_pss"]), g(v["mean_base"]), g(v["mean_anon"]), g(v["supervisor_pss"]),
                          g(r["supervisor_peak_pss"]), g(v["goal_bytes"]), "yes" if v["goal_met"] else "NO"])
    C.print_table(["run / moment", "rows", "train.bin data", "sum worker Pss", "sum train.bin Pss",
                   "base/worker", "anon Pss/worker", "supervisor Pss", "supervisor peak", "goal bound",
                   "goal met"], rows)
    if "big" in summ and "first_full" in summ["big"]:
        v, r = summ["big"]["first_full"], runs["big"]
        print("\nbig, all resident: sum worker Pss / data = %.2f; sum / (8 x base) = %.2f; "
              "sum train.bin Pss / data = %.3f" % (v["sum_worker_pss"] / r["data_bytes"],
                                                   v["sum_worker_pss"] / (args.workers * v["mean_base"]),
                                                   v["sum_train_bin_pss"] / r["data_bytes"]))
        if "small" in summ and "first_full" in summ["small"]:
            sb = summ["small"]["first_full"]["mean_base"]
            for moment in ("first_full", "max_sum"):
                tot = summ["big"][moment]["sum_worker_pss"]
                bound = 1.1 * GiB + args.workers * sb
                summ["big"][moment]["strict_goal_bytes"] = bound
                summ["big"][moment]["strict_goal_met"] = tot <= bound
                print("strict goal (base = a worker's base on the small table), %s: sum %.3f GiB vs "
                      "1.1 GiB + %d x %.3f GiB = %.3f GiB: %s" % (moment, tot / GiB, args.workers, sb / GiB,
                                                                 bound / GiB, "met" if tot <= bound else "NOT met"))
            print("base per worker: %.3f GiB with %d rows vs %.3f GiB with %d rows (+%.0f B per row per worker)"
                  % (v["mean_base"] / GiB, r["rows"], sb / GiB, runs["small"]["rows"],
                     (v["mean_base"] - sb) / max(1, r["rows"] - runs["small"]["rows"])))
    C.write_result("shared_memory", {"machine": info, "args": vars(args), "summary": summ, "raw": runs})


if __name__ == "__main__":
    main()
