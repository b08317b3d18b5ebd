#!/usr/bin/env python3
"""Learning curves: random rows against query by committee "top" and "diverse" (issue 33).

The same ensemble, the same data and seeds, three ways of choosing each round's k pool rows:
  random   mutation.policy "append_from_pool" (k unused pool rows drawn at random)
  top      "query_by_committee", batch "top" (the k highest scores, mutation.score "std")
  diverse  "query_by_committee", batch "diverse" (orchestrator/diverse_batch.h)
on Friedman #1, the built-in synthetic data (10 features, 5 of them used, noise std 1):
--initial rows to start, a pool of --pool rows, a holdout of --holdout rows, --rounds rounds
adding --k rows each. Every run is `ensembled run` to its end; the figures are each round's
ensemble holdout RMSE from the journal (round_committed summary) against its training rows.

Prints, per mode, the mean final ensemble RMSE over the seeds (and each seed's), the ratio of
"diverse" to "top" and of each to random, and the training rows each mode needed to reach
random's mean final RMSE (linear interpolation between rounds; "-" when it never did); a table
of the mean curves; appends everything to bench/results/active_learning.json.

Usage: bench/active_learning.py [--seeds 1,2,3] [--rounds 8] [--k 40] [--initial 100]
                                [--pool 4000] [--holdout 1000] [--members 4] [--epochs 60]
                                [--keep]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

MODES = ("random", "top", "diverse")


def config(state_dir, mode, seed, a):
    if mode == "random":
        mutation = {"policy": "append_from_pool", "k": a.k}
    else:
        mutation = {"policy": "query_by_committee", "k": a.k, "batch": mode}
    return {"run_name": "al-%s-%d" % (mode, seed), "state_dir": state_dir, "run_seed": seed,
            "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
            "data": {"source": "synthetic",
                     "synthetic": {"initial_rows": a.initial, "pool_rows": a.pool, "holdout_rows": a.holdout}},
            "members": {"defaults": {"layers": [{"units": 32, "activation": "relu"},
                                                {"units": 32, "activation": "relu"}],
                                     "loss": "mse", "optimizer": "adam", "lr": 0.003, "epochs": a.epochs,
                                     "batch_size": 16, "early_stopping": {"enabled": False},
                                     "split": "bootstrap", "validation_split": 0.1},
                        "count": a.members},
            "mutation": mutation, "pack_size": 1, "rounds": {"count": a.rounds}}


def curve(records):
    """[(trained_rows, ensemble_rmse)] of each committed round."""
    out = []
    for r in records:
        if r.get("event") == "round_committed":
            out.append((r["trained_rows"], r["summary"]["ensemble_rmse"]))
    return out


def rows_to_reach(points, target):
    """Training rows at which the curve first gets to target or below (linear between rounds)."""
    for i, (rows, err) in enumerate(points):
        if err <= target:
            if i == 0:
                return float(rows)
            r0, e0 = points[i - 1]
            return r0 + (rows - r0) * (e0 - target) / (e0 - err) if e0 != err else float(rows)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--k", type=int, default=40)
    ap.add_argument("--initial", type=int, default=100)
    ap.add_argument("--pool", type=int, default=4000)
    ap.add_argument("--holdout", type=int, default=1000)
    ap.add_argument("--members", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    C.wait_for_binaries()
    info = C.machine_info()
    work = C.tempdir("bench-al-")
    curves = {m: {} for m in MODES}
    walls = {m: [] for m in MODES}
    for seed in seeds:
        for mode in MODES:
            name = "%s-%d" % (mode, seed)
            wall, recs = C.run_to_end(config(os.path.join(work, name), mode, seed, a), work, name)
            curves[mode][seed] = curve(recs)
            walls[mode].append(wall)
            print("%-8s seed %d: final RMSE %.4f at %d rows (%.1f s)" %
                  (mode, seed, curves[mode][seed][-1][1], curves[mode][seed][-1][0], wall), flush=True)
    finals = {m: [curves[m][s][-1][1] for s in seeds] for m in MODES}
    mean_final = {m: sum(v) / len(v) for m, v in finals.items()}
    rounds = min(len(curves[m][s]) for m in MODES for s in seeds)
    mean_curve = {m: [(curves[m][seeds[0]][i][0], sum(curves[m][s][i][1] for s in seeds) / len(seeds))
                      for i in range(rounds)] for m in MODES}
    reach = {m: rows_to_reach(mean_curve[m], mean_final["random"]) for m in MODES}
    print("\nFriedman #1, %d seeds (%s), %d members, %d rounds of +%d rows from %d; pool %d, holdout %d"
          % (len(seeds), a.seeds, a.members, a.rounds, a.k, a.initial, a.pool, a.holdout))
    C.print_table(["mode", "mean final ensemble RMSE", "per seed", "/ random", "rows to reach random's final"],
                  [[m, "%.4f" % mean_final[m], " ".join("%.4f" % v for v in finals[m]),
                    "%.3f" % (mean_final[m] / mean_final["random"]),
                    "-" if reach[m] is None else "%.0f" % reach[m]] for m in MODES])
    print("diverse / top final RMSE: %.3f (the issue's target: <= 0.95)" % (mean_final["diverse"] / mean_final["top"]))
    print("\nmean ensemble holdout RMSE by training rows")
    C.print_table(["rows"] + list(MODES),
                  [[str(mean_curve["random"][i][0])] + ["%.4f" % mean_curve[m][i][1] for m in MODES]
                   for i in range(rounds)])
    info["loadavg_at_end"] = open("/proc/loadavg").read().split()[:3]
    C.write_result("active_learning", {"machine": info, "args": vars(a), "curves": curves, "finals": finals,
                                       "mean_final": mean_final, "rows_to_reach_random_final": reach,
                                       "walls": walls})
    if a.keep:
        print("kept", work)
    else:
        C.rmtree(work)


if __name__ == "__main__":
    main()
