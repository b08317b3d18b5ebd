#!/usr/bin/env python3
"""NGBoost (Duan et al., ICML 2020) on the deep-ensembles benchmark's UCI regression sets: a
stronger recent baseline beside bench/uci_deep_ensembles.py, through the same splits and metrics.

Data and splits: the same as bench/uci_deep_ensembles.py (../shared/data/uci/, README there):
<set>.csv (header x0..,y) and <set>.splits (line s: split s's 0-based test row indices; every
other row trains). A split's test rows are seen only when the split is scored.

Model (the settings of the NGBoost paper's UCI experiments, as far as the package allows):
NGBRegressor, Normal distribution, LogScore (NLL), natural gradient, the package's default base
learner (a depth-3 regression tree), learning_rate 0.01, minibatch_frac 1.0, col_sample 1.0,
random_state = the split index. Inputs and target as raw values (trees need no standardisation).
Per split:
1. A validation part, --validation-fraction (0.2) of the split's TRAINING rows (a permutation
   seeded by the split index), is held out; NGBoost fits on the other training rows with up to
   --n-estimators (2000) stages and the package's early stopping on the validation part
   (fit(X_val=, Y_val=, early_stopping_rounds=--early-stopping-rounds, 100)): the best iteration
   is the stage of least validation NLL (the package's monitor, LogScore).
2. Refit (the paper's choice, taken here): a fresh NGBRegressor with n_estimators = the best
   iteration count and the same random_state is fitted on ALL the split's training rows (the
   validation part included); that model alone scores the test rows.
Metrics per split, in the target's raw units: RMSE of the predictive mean, Gaussian NLL of the
predictive Normal, coverage of the test rows by mean +- 1 sigma and +- 2 sigma. Per set: mean +-
standard error over the splits.

Differences from the paper's own experiment script (stanfordmlgroup/ngboost,
examples/experiments/regression_exp.py), kept on purpose: it fits all 2000 stages on the 80 %
and picks the stage of least validation MSE; here the package's early stopping picks the stage of
least validation NLL. Its validation part is an unseeded train_test_split; here it is seeded by
the split index. Its splits are regenerated with np.random.seed(1) (the Dropout-paper recipe);
here they are the published split files.

Published figures ("paper" columns): NGBoost column of Table 1 of Duan et al. 2020 (RMSE and
NLL over 20 splits). The paper's experiment script prints np.std over the
splits, so its +- is likely a standard deviation, where ours is the standard error.

Usage: bench/uci_ngboost.py [--sets yacht,energy,concrete,wine,kin8nm] [--splits 20]
       [--n-estimators 2000] [--learning-rate 0.01] [--minibatch-frac 1.0]
       [--early-stopping-rounds 100] [--validation-fraction 0.2]
Runs under a python that has ngboost (bench/setup_baselines.sh installs it in the bench venv);
re-executes itself under the bench venv (or ~/.cache/ensembled/ngboost-venv) when the current
python lacks it. ENSEMBLED_UCI_DIR=<folder> picks the data (default ../shared/data/uci).
Writes (appends to) bench/results/uci_ngboost.json.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

DATA = os.environ.get("ENSEMBLED_UCI_DIR", os.path.join(C.REPO, "..", "shared", "data", "uci"))
NGBOOST_VENV_PY = os.path.expanduser("~/.cache/ensembled/ngboost-venv/bin/python")
# NGBoost column of Duan et al. 2020, Table 1: (RMSE, +-, NLL, +-).
PAPER = {"concrete": (5.06, 0.61, 3.04, 0.17), "energy": (0.46, 0.06, 0.60, 0.45), "kin8nm": (0.16, 0.00, -0.49, 0.02),
         "wine": (0.63, 0.04, 0.91, 0.06), "yacht": (0.50, 0.20, 0.20, 0.26)}


def ensure_ngboost():
    """Re-executes this script under a python that has ngboost (the bench venv, else the small
    ngboost venv) when the current one lacks it; exits with a clear message when none has it."""
    try:
        import ngboost  # noqa: F401
        return
    except ImportError:
        pass
    for py in (C.BENCH_PY, NGBOOST_VENV_PY):
        venv = os.path.dirname(os.path.dirname(py))
        if (os.path.exists(py) and os.path.abspath(sys.prefix) != os.path.abspath(venv)
                and subprocess.run([py, "-c", "import ngboost"], capture_output=True).returncode == 0):
            print("[uci_ngboost] re-running under", py, file=sys.stderr)
            os.execv(py, [py] + sys.argv)
    sys.exit("uci_ngboost: the python package ngboost is missing (%s). Run bench/setup_baselines.sh "
             "(it installs ngboost in %s), or run this script with a python that has ngboost."
             % (sys.executable, C.BENCH_VENV))


def load(name):
    import numpy as np
    with open(os.path.join(DATA, name + ".csv")) as f:
        header = f.readline().strip().split(",")
    if header[-1] != "y":
        sys.exit(f"{name}.csv: the last column is {header[-1]!r}, not y")
    data = np.loadtxt(os.path.join(DATA, name + ".csv"), delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    with open(os.path.join(DATA, name + ".splits")) as f:
        splits = [[int(t) for t in line.split()] for line in f if line.strip()]
    return data[:, :-1], data[:, -1], splits


def mean_se(v):
    return [statistics.mean(v), statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else 0.0]


def run_split(X, y, test_ids, s, a):
    import numpy as np
    from ngboost import NGBRegressor
    from ngboost.distns import Normal
    from ngboost.scores import LogScore

    n = len(y)
    test = np.asarray(test_ids, dtype=np.int64)
    is_test = np.zeros(n, dtype=bool)
    is_test[test] = True
    train = np.flatnonzero(~is_test)
    # Validation part: drawn from the split's training rows only, by a permutation seeded by s.
    perm = np.random.RandomState(s).permutation(len(train))
    n_val = int(round(a.validation_fraction * len(train)))
    val, fit_rows = train[np.sort(perm[:n_val])], train[np.sort(perm[n_val:])]

    def model(n_estimators):
        return NGBRegressor(Dist=Normal, Score=LogScore, natural_gradient=True, n_estimators=n_estimators,
                            learning_rate=a.learning_rate, minibatch_frac=a.minibatch_frac, col_sample=1.0,
                            random_state=s, verbose=False)

    t0 = time.monotonic()
    # early_stopping_rounds goes to fit(), not the constructor: the constructor's copy makes the
    # package print a line per fit; the stopping rule is the same.
    m = model(a.n_estimators).fit(X[fit_rows], y[fit_rows], X_val=X[val], Y_val=y[val],
                                  early_stopping_rounds=a.early_stopping_rounds or None)
    if m.best_val_loss_itr is None:
        sys.exit(f"split {s}: no validation loss recorded")
    best = int(m.best_val_loss_itr) + 1  # best_val_loss_itr is the 0-based stage
    val_curve = m.evals_result["val"]["LOGSCORE"]
    stages_run = len(val_curve)
    best_val_nll = float(val_curve[best - 1])
    t_val = time.monotonic() - t0
    # Refit on all the split's training rows with the best iteration count.
    final = model(best).fit(X[train], y[train])
    t_fit = time.monotonic() - t0 - t_val
    dist = final.pred_dist(X[test])
    mu, sd = np.asarray(dist.loc, dtype=np.float64), np.asarray(dist.scale, dtype=np.float64)
    yt = y[test]
    err = yt - mu
    return {"rmse": float(np.sqrt(np.mean(err ** 2))),
            "nll": float(np.mean(0.5 * np.log(2 * math.pi * sd * sd) + 0.5 * err ** 2 / (sd * sd))),
            "cover1sd": float(np.mean(np.abs(err) <= sd)), "cover2sd": float(np.mean(np.abs(err) <= 2 * sd)),
            "best_iteration": best, "stages_run_on_validation": stages_run,
            "stopped_early": stages_run < a.n_estimators, "best_val_nll": best_val_nll,
            "refit_stages": len(final.base_models), "mean_sigma": float(np.mean(sd)),
            "rows": {"train": int(len(train)), "fit_before_refit": int(len(fit_rows)), "validation": int(len(val)),
                     "test": int(len(test))},
            "wall_s": {"validation_fit": round(t_val, 3), "refit": round(t_fit, 3)}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="yacht,energy,concrete,wine,kin8nm")
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--n-estimators", type=int, default=2000)
    ap.add_argument("--learning-rate", type=float, default=0.01)
    ap.add_argument("--minibatch-frac", type=float, default=1.0)
    ap.add_argument("--early-stopping-rounds", type=int, default=100,
                    help="patience on the validation NLL (0: none, the best of all --n-estimators stages)")
    ap.add_argument("--validation-fraction", type=float, default=0.2)
    a = ap.parse_args()
    ensure_ngboost()
    import importlib.metadata
    import numpy  # noqa: F401  (ngboost brings it)

    versions = {p: importlib.metadata.version(p) for p in ("ngboost", "scikit-learn", "numpy", "scipy")}
    result = {"machine": C.machine_info(), "command": " ".join(["bench/uci_ngboost.py"] + sys.argv[1:]),
              "python": sys.executable, "versions": versions,
              "settings": {"model": "NGBRegressor", "distribution": "Normal", "score": "LogScore",
                           "natural_gradient": True, "base_learner": "package default: DecisionTreeRegressor(max_depth=3)",
                           "n_estimators": a.n_estimators, "learning_rate": a.learning_rate,
                           "minibatch_frac": a.minibatch_frac, "col_sample": 1.0,
                           "early_stopping_rounds": a.early_stopping_rounds or None,
                           "early_stopping_monitor": "validation NLL (the package's LogScore)",
                           "validation_fraction_of_train_rows": a.validation_fraction,
                           "validation_rows": "permutation of the split's training rows seeded by the split index",
                           "after_validation": "refit on all the split's training rows with n_estimators = best iteration",
                           "random_state": "split index", "inputs": "raw (no standardisation)",
                           "target": "raw units"},
              "paper": {"source": "Duan et al. 2020 (ICML), Table 1, NGBoost column",
                        "sets": {k: {"rmse": [v[0], v[1]], "nll": [v[2], v[3]]} for k, v in PAPER.items()}},
              "sets": {}}
    print("settings:", json.dumps(result["settings"]))
    print("python:", sys.executable, "|", " ".join("%s %s" % kv for kv in versions.items()))
    rows = []
    t_all = time.monotonic()
    for name in a.sets.split(","):
        X, y, splits = load(name)
        per = []
        t_set = time.monotonic()
        for s, test_ids in enumerate(splits[: a.splits]):
            r = run_split(X, y, test_ids, s, a)
            per.append(r)
            print(f"[uci_ngboost] {name} split {s}: rmse {r['rmse']:.4f} nll {r['nll']:.4f} cover1sd {r['cover1sd']:.3f} "
                  f"cover2sd {r['cover2sd']:.3f} best_iter {r['best_iteration']}/{r['stages_run_on_validation']} "
                  f"({sum(r['wall_s'].values()):.1f} s)", file=sys.stderr, flush=True)
        wall = time.monotonic() - t_set
        summary = {k: mean_se([r[k] for r in per]) for k in ("rmse", "nll", "cover1sd", "cover2sd")}
        summary["best_iteration_mean"] = statistics.mean(r["best_iteration"] for r in per)
        summary["splits_stopped_early"] = sum(r["stopped_early"] for r in per)
        p = PAPER.get(name)
        if p:
            summary["at_or_below_paper"] = {"rmse": summary["rmse"][0] <= p[0], "nll": summary["nll"][0] <= p[2]}
        result["sets"][name] = {"summary": summary, "splits": per, "wall_s": round(wall, 2)}
        rows.append([name, len(per), "%.3f ± %.3f" % tuple(summary["rmse"]), "%.2f ± %.2f" % (p[0], p[1]) if p else "-",
                     "%.3f ± %.3f" % tuple(summary["nll"]), "%.2f ± %.2f" % (p[2], p[3]) if p else "-",
                     "%.3f ± %.3f" % tuple(summary["cover1sd"]), "%.3f ± %.3f" % tuple(summary["cover2sd"]),
                     "%.0f" % summary["best_iteration_mean"], "%.1f" % wall])
        C.print_table(["set", "splits", "RMSE", "RMSE paper", "NLL", "NLL paper", "cover 1sd", "cover 2sd",
                       "best iter", "wall s"], rows)
    result["wall_s_total"] = round(time.monotonic() - t_all, 2)
    print("wall s total: %.1f" % result["wall_s_total"])
    C.write_result("uci_ngboost", result)


if __name__ == "__main__":
    main()
