#!/usr/bin/env python3
"""ensembled against scikit-learn on two small real data sets (issue 13).

Both sides see one seeded split of each data set (sklearn's train_test_split, random_state 0,
test_size 0.25; stratified for digits), written to train.csv / holdout.csv for ensembled:
  - digits (sklearn.datasets.load_digits: 1797 rows, 64 features, 10 classes): the holdout
    accuracy and NLL (mean -log of the true class's averaged probability, clipped at 1e-12)
    of 8 ensembled members (`"task": "classification"`, cross-entropy) against 8
    MLPClassifiers whose predict_proba are averaged;
  - diabetes (sklearn.datasets.load_diabetes: 442 rows, 10 features, a numeric target): the
    holdout RMSE of the averaged prediction of 8 ensembled members (mse) against 8
    MLPRegressors averaged; and a "gaussian_nll" line: 8 ensembled members with
    `"loss": "gaussian_nll"` (each predicts [mean, variance] per row; the run summary's
    "ensemble_nll" is the NLL of their equal-weight Gaussian mixture on the holdout) against
    the same 8 MLPRegressors read as Normal(mean of the 8, variance across the 8 + the
    residual variance of their average on its own training rows). Whether this build knows
    that loss is asked of `ensemblectl validate-config`; when it does not, the line says
    "not available in this build" and the rest runs.

The two sides use the same network and training settings, as far as the two libraries allow
(see SETTINGS below; differences are printed with the results): one hidden layer of 100
relu units (sklearn's default), glorot-uniform kernels, Adam lr 1e-3, batch 32, up to 200
epochs, 20% of each model's training rows held out for early stopping with patience 20 and
the best epoch's weights restored, the L2 penalty of sklearn's default alpha 1e-4 converted
to ensembled's `l2`. Features are standardised on each side (ensembled per member, sklearn
by a StandardScaler in a Pipeline fitted on the training rows); for regression the target is
standardised too (ensembled per member; sklearn through TransformedTargetRegressor). Model i
of sklearn has random_state i. ensembled runs one round, mutation none, 2 CPU workers; the
sklearn side runs its 8 models 2 at a time (joblib); the sides run one after the other.

Prints one table (dataset, metric, ensembled, sklearn, ratio or difference, whether
ensembled is at least as good) and the wall seconds of each side with the epochs each side
trained (early stopping ends the sides at different epochs, so wall ms per member-epoch is
printed too; ensembled's wall includes starting its daemon and workers); appends everything (the
machine, both sides' settings, the ensembled configs, every figure, per-member figures) to
bench/results/real_data.json.

Usage: bench/real_data.py [--members 8] [--epochs 200] [--patience 20] [--hidden 100]
                          [--batch 32] [--lr 1e-3] [--workers 2] [--sk-jobs 2]
                          [--datasets digits,diabetes] [--keep]
Needs scikit-learn: bench/setup_baselines.sh installs it in the bench venv, and this script
re-executes itself there when the current python lacks it.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import member_files as MF  # noqa: E402  (a member's files in either results_layout)


def ensure_sklearn():
    """Re-executes this script under the bench venv's python when the current one lacks numpy or
    scikit-learn; exits saying how to get them when no python here has them."""
    try:
        import numpy  # noqa: F401
        import sklearn  # noqa: F401
        return
    except ImportError:
        pass
    if os.path.exists(C.BENCH_PY) and os.path.abspath(sys.prefix) != os.path.abspath(C.BENCH_VENV):
        os.execv(C.BENCH_PY, [C.BENCH_PY] + sys.argv)
    sys.exit("real_data.py needs numpy and scikit-learn: run bench/setup_baselines.sh "
             "(installs them in %s)" % C.BENCH_VENV)


ensure_sklearn()

import numpy as np  # noqa: E402
import sklearn  # noqa: E402
from sklearn.compose import TransformedTargetRegressor  # noqa: E402
from sklearn.datasets import load_diabetes, load_digits  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.neural_network import MLPClassifier, MLPRegressor  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

SK_ALPHA = 1e-4  # sklearn's default L2 strength

DIFFERENCES = [
    "early stopping: ensembled watches val_loss (cross-entropy / standardised mse) with min_delta 0; "
    "sklearn watches its validation score (accuracy for the classifier, R^2 for the regressor) with its "
    "default tol 1e-4 (with tol 0 a tie with the best accuracy resets sklearn's patience, and some "
    "classifiers then ran all epochs)",
    "validation rows: ensembled draws each member's 20% with the member's seed (random split); sklearn "
    "draws them with random_state i (stratified for the classifier)",
    "L2: sklearn adds 0.5*alpha*|W|^2/batch to 0.5*mse (regression) or to the cross-entropy; ensembled "
    "adds l2*|W|^2 to the mean loss, so l2 = alpha/batch (mse) and 0.5*alpha/batch (cross-entropy) give "
    "the same penalty relative to the data loss",
    "biases: sklearn initialises them glorot-uniform like the kernels; ensembled starts them at zero",
    "sklearn's regressor fits 0.5*mse, ensembled's mse: the same minimiser; Adam is invariant to the scale",
]


# ----------------------------------------------------------------------------------- data

def load(name):
    """The one split both sides use: (x_train, y_train, x_holdout, y_holdout, is_classification)."""
    if name == "digits":
        x, y = load_digits(return_X_y=True)
        xt, xh, yt, yh = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
        return xt, yt.astype(int), xh, yh.astype(int), True
    x, y = load_diabetes(return_X_y=True)
    xt, xh, yt, yh = train_test_split(x, y, test_size=0.25, random_state=0)
    return xt, yt, xh, yh, False


def write_csv(path, x, y, classification):
    cols = ["x%d" % i for i in range(x.shape[1])] + ["y"]
    with open(path, "w") as f:
        f.write(",".join(cols) + "\n")
        for row, t in zip(x, y):
            f.write(",".join(repr(float(v)) for v in row))
            f.write(",%d\n" % t if classification else ",%r\n" % float(t))


# ----------------------------------------------------------------------------- ensembled

def member_defaults(a, classification, loss):
    per_elem = 0.5 if classification else 1.0
    return {
        "layers": [{"units": u, "activation": "relu"} for u in a.hidden],
        "initializer": "glorot_uniform",
        "l1": 0.0,
        "l2": per_elem * SK_ALPHA / a.batch,
        "loss": loss,
        "optimizer": "adam",
        "lr": a.lr,
        "epochs": a.epochs,
        "batch_size": a.batch,
        "early_stopping": {"enabled": True, "monitor": "val_loss", "patience": a.patience,
                           "min_delta": 0.0, "restore_best": True},
        "split": "random",
        "validation_split": 0.2,
    }


def ens_config(a, work, name, classification, loss):
    cfg = {
        "run_name": "real-" + name,
        "state_dir": os.path.join(work, "state-" + name),
        "run_seed": 0,
        "resources": {"gpus": "none", "cpu_workers": a.workers},
        "data": {"source": "csv", "train_path": os.path.join(work, "train.csv"),
                 "holdout_path": os.path.join(work, "holdout.csv"), "target_column": "y"},
        "members": {"count": a.members, "defaults": member_defaults(a, classification, loss)},
        "mutation": {"policy": "none"},
        "rounds": {"count": 1},
    }
    if classification:
        cfg["task"] = "classification"
    return cfg


def binary_mtimes():
    out = {}
    for p in (C.ENSEMBLED, C.WORKER):
        try:
            out[p] = os.path.getmtime(p)
        except OSError:
            out[p] = None
    return out


class RunFailed(Exception):
    pass


def run_ensembled(cfg, work, name):
    """C.run_to_end, once more (with a fresh state dir) when build/ was relinked under the run.
    Raises RunFailed (its message, the journal's failure records) when the run fails."""
    for attempt in (1, 2):
        C.wait_for_binaries()
        before = binary_mtimes()
        try:
            return C.run_to_end(cfg, work, name)
        except SystemExit as e:
            if attempt == 2 or binary_mtimes() == before:
                failures = []
                try:
                    failures = [r for r in C.journal(cfg["state_dir"]) if "fail" in str(r.get("event", ""))]
                except OSError:
                    pass
                raise RunFailed("%s; journal: %s" % (e, json.dumps(failures[-3:])))
            print("[real_data] build/ changed during the %s run: running it again" % name, file=sys.stderr)
            C.rmtree(cfg["state_dir"])


def ctl_validate(cfg, work, name):
    """(accepted, ensemblectl's output) for cfg."""
    C.wait_for_binaries((C.ENSEMBLED, C.WORKER, C.CTL))
    path = os.path.join(work, name + "-probe.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    p = subprocess.run([C.CTL, "validate-config", path], capture_output=True, text=True)
    return p.returncode == 0, (p.stdout + p.stderr).strip()


def ens_results(cfg):
    """The round's summary "ensemble" object and each member's holdout predictions and epochs."""
    state = cfg["state_dir"]
    rdir = os.path.join(state, "rounds", "r0000")
    with open(os.path.join(rdir, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(state, "run.json")) as f:
        run = json.load(f)
    members = {}
    for m in MF.round_members(rdir):
        pred = np.frombuffer(MF.member_bytes(rdir, m, "holdout_pred.f32"), dtype="<f4")
        epochs = best = None
        try:
            hist = [json.loads(line) for line in MF.member_bytes(rdir, m, "history.jsonl").decode().splitlines()
                    if line.strip()]
            epochs = len(hist)
            best = min(hist, key=lambda h: h["val_loss"])["epoch"] if hist else None
        except (OSError, ValueError, KeyError):
            pass
        metrics = {}
        try:
            metrics = MF.member_json(rdir, m, "metrics.json")
        except (OSError, ValueError):
            pass
        members[m] = {"pred": pred, "epochs_run": epochs, "best_val_loss_epoch": best, "metrics": metrics}
    return summary, run, members


def member_epochs(members):
    return sum(m["epochs_run"] or 0 for m in members.values())


# -------------------------------------------------------------------------------- metrics

def cls_metrics(probs, y):
    p = np.clip(probs[np.arange(len(y)), y], 1e-12, None)
    return {"accuracy": float(np.mean(probs.argmax(1) == y)), "nll": float(np.mean(-np.log(p)))}


def rmse(pred, y):
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def normal_nll(y, mean, var):
    return float(np.mean(0.5 * np.log(2 * math.pi * var) + (y - mean) ** 2 / (2 * var)))


def mixture_nll(y, means, variances):
    """NLL of the equal-weight mixture of Normal(means[k], variances[k]), means/variances [K, n]."""
    logp = -0.5 * np.log(2 * math.pi * variances) - (y[None, :] - means) ** 2 / (2 * variances)
    m = logp.max(0)
    return float(np.mean(-(m + np.log(np.mean(np.exp(logp - m), 0)))))


# -------------------------------------------------------------------------------- sklearn

def sk_model(a, i, classification):
    kw = dict(hidden_layer_sizes=tuple(a.hidden), activation="relu", solver="adam", alpha=SK_ALPHA,
              batch_size=a.batch, learning_rate_init=a.lr, max_iter=a.epochs, early_stopping=True,
              validation_fraction=0.2, n_iter_no_change=a.patience, tol=1e-4, random_state=i)
    if classification:
        return make_pipeline(StandardScaler(), MLPClassifier(**kw))
    return TransformedTargetRegressor(regressor=make_pipeline(StandardScaler(), MLPRegressor(**kw)),
                                      transformer=StandardScaler())


def sk_fit_one(a, i, classification, xt, yt, xh):
    import warnings
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    t0 = time.monotonic()
    m = sk_model(a, i, classification).fit(xt, yt)
    secs = time.monotonic() - t0
    mlp = m.steps[-1][1] if classification else m.regressor_.steps[-1][1]
    info = {"random_state": i, "n_iter": int(mlp.n_iter_), "fit_s": round(secs, 3),
            "best_validation_score": float(mlp.best_validation_score_)}
    if classification:
        return info, m.predict_proba(xh), None
    return info, m.predict(xh), m.predict(xt)


def run_sklearn(a, classification, xt, yt, xh):
    from joblib import Parallel, delayed
    t0 = time.monotonic()
    out = Parallel(n_jobs=a.sk_jobs)(delayed(sk_fit_one)(a, i, classification, xt, yt, xh)
                                     for i in range(a.members))
    wall = time.monotonic() - t0
    return wall, [o[0] for o in out], np.stack([o[1] for o in out]), (
        None if classification else np.stack([o[2] for o in out]))


# ----------------------------------------------------------------------------------- main

def line(dataset, metric, ens, sk, higher_better, note=""):
    if ens is None or sk is None:
        return {"dataset": dataset, "metric": metric, "ensembled": ens, "sklearn": sk, "compare": "n/a",
                "ensembled_at_least_as_good": None, "note": note}
    if higher_better:
        compare = "%+.4f (diff)" % (ens - sk)
        good = ens >= sk
    else:
        compare = "%.3fx (ratio)" % (ens / sk) if sk > 0 else "%+.4f (diff)" % (ens - sk)
        good = ens <= sk
    return {"dataset": dataset, "metric": metric, "ensembled": ens, "sklearn": sk, "compare": compare,
            "ensembled_at_least_as_good": good, "note": note}


def digits(a, work, result, lines, walls):
    xt, yt, xh, yh, _ = load("digits")
    d = os.path.join(work, "digits")
    os.makedirs(d)
    write_csv(os.path.join(d, "train.csv"), xt, yt, True)
    write_csv(os.path.join(d, "holdout.csv"), xh, yh, True)
    cfg = ens_config(a, d, "digits", True, "cross_entropy")
    print("[real_data] digits: %d train rows, %d holdout rows; ensembled ..." % (len(yt), len(yh)), flush=True)
    wall_e, _ = run_ensembled(cfg, d, "digits")
    summary, run, members = ens_results(cfg)
    classes = [int(c) for c in run["classes"]]
    k = len(classes)
    probs = np.stack([m["pred"].reshape(len(yh), k) for m in members.values()]).mean(0)
    # classes are 0..9 in order; map anyway
    probs_by_label = np.zeros((len(yh), 10))
    probs_by_label[:, classes] = probs
    mine = cls_metrics(probs_by_label, yh)
    ens = summary["ensemble"]
    print("[real_data] digits: sklearn ...", flush=True)
    wall_s, sk_info, sk_probs, _ = run_sklearn(a, True, xt, yt, xh)
    sk = cls_metrics(sk_probs.mean(0), yh)
    sk_members = [cls_metrics(p, yh)["accuracy"] for p in sk_probs]
    lines.append(line("digits", "holdout accuracy", ens["ensemble_accuracy"], sk["accuracy"], True))
    lines.append(line("digits", "holdout NLL", ens["ensemble_nll"], sk["nll"], False))
    lines.append(line("digits", "member accuracy (mean)", ens.get("member_accuracy_mean"),
                      float(np.mean(sk_members)), True))
    walls.append(("digits", wall_e, wall_s, member_epochs(members), sum(i["n_iter"] for i in sk_info)))
    result["digits"] = {
        "rows": {"train": int(len(yt)), "holdout": int(len(yh))}, "config": cfg,
        "ensembled": {"wall_s": round(wall_e, 3), "summary_ensemble": ens,
                      "recomputed_from_member_files": mine,
                      "members": {n: {"epochs_run": m["epochs_run"], "best_val_loss_epoch": m["best_val_loss_epoch"],
                                      "holdout_accuracy": m["metrics"].get("holdout_accuracy")}
                                  for n, m in members.items()}},
        "sklearn": {"wall_s": round(wall_s, 3), "ensemble": sk, "member_accuracy": sk_members, "members": sk_info},
    }
    if abs(mine["accuracy"] - ens["ensemble_accuracy"]) > 1e-9 or abs(mine["nll"] - ens["ensemble_nll"]) > 1e-4:
        print("[real_data] WARNING: digits summary %s differs from the member files %s" % (ens, mine), file=sys.stderr)


def diabetes(a, work, result, lines, walls):
    xt, yt, xh, yh, _ = load("diabetes")
    d = os.path.join(work, "diabetes")
    os.makedirs(d)
    write_csv(os.path.join(d, "train.csv"), xt, yt, False)
    write_csv(os.path.join(d, "holdout.csv"), xh, yh, False)
    cfg = ens_config(a, d, "diabetes", False, "mse")
    print("[real_data] diabetes: %d train rows, %d holdout rows; ensembled (mse) ..." % (len(yt), len(yh)),
          flush=True)
    wall_e, _ = run_ensembled(cfg, d, "diabetes")
    summary, _, members = ens_results(cfg)
    ens = summary["ensemble"]
    preds = np.stack([m["pred"].reshape(len(yh)) for m in members.values()])
    mine = rmse(preds.mean(0), yh)
    if abs(mine - ens["ensemble_rmse"]) > 1e-3 * max(1.0, mine):
        print("[real_data] WARNING: diabetes summary rmse %r differs from the member files' %r" %
              (ens["ensemble_rmse"], mine), file=sys.stderr)

    print("[real_data] diabetes: sklearn ...", flush=True)
    wall_s, sk_info, sk_h, sk_t = run_sklearn(a, False, xt, yt, xh)
    sk_mean = sk_h.mean(0)
    sk_rmse = rmse(sk_mean, yh)
    sk_member_rmse = [rmse(p, yh) for p in sk_h]
    resid_var = float(np.mean((yt - sk_t.mean(0)) ** 2))
    sk_var = sk_h.var(0) + resid_var
    sk_nll = normal_nll(yh, sk_mean, sk_var)
    lines.append(line("diabetes", "holdout RMSE (mse members)", ens["ensemble_rmse"], sk_rmse, False))
    lines.append(line("diabetes", "member RMSE (mean)", ens.get("member_rmse_mean"),
                      float(np.mean(sk_member_rmse)), False))
    walls.append(("diabetes (mse)", wall_e, wall_s, member_epochs(members), sum(i["n_iter"] for i in sk_info)))
    res = {
        "rows": {"train": int(len(yt)), "holdout": int(len(yh))}, "config": cfg,
        "ensembled": {"wall_s": round(wall_e, 3), "summary_ensemble": ens, "recomputed_rmse": mine,
                      "members": {n: {"epochs_run": m["epochs_run"], "best_val_loss_epoch": m["best_val_loss_epoch"],
                                      "holdout_rmse": m["metrics"].get("holdout_rmse")}
                                  for n, m in members.items()}},
        "sklearn": {"wall_s": round(wall_s, 3), "ensemble_rmse": sk_rmse, "member_rmse": sk_member_rmse,
                    "members": sk_info,
                    "gaussian": {"nll": sk_nll, "train_residual_var": resid_var,
                                 "mean_across_model_var": float(sk_h.var(0).mean()),
                                 "what": "Normal(mean of the models, variance across the models (ddof 0) + "
                                         "the residual variance of their average on its training rows)"}},
    }
    result["diabetes"] = res

    # gaussian_nll members, if this build has them
    gcfg = ens_config(a, d, "diabetes-gaussian", False, "gaussian_nll")
    ok, msg = ctl_validate(gcfg, d, "diabetes-gaussian")
    res["gaussian_nll"] = {"config": gcfg, "validate_config": msg, "available": ok}
    if not ok:
        print("[real_data] gaussian_nll: ensemblectl validate-config rejects it: %s" % msg, flush=True)
        lines.append(line("diabetes", "gaussian_nll: holdout NLL", None, sk_nll, False,
                          "not available in this build"))
        return
    print("[real_data] diabetes: ensembled (gaussian_nll) ...", flush=True)
    wall_g, _ = run_ensembled(gcfg, d, "diabetes-gaussian")
    gsum, _, gmembers = ens_results(gcfg)
    gens = gsum["ensemble"]
    n = len(yh)
    means, variances, shapes = [], [], []
    for m in gmembers.values():
        shapes.append(int(m["pred"].size))
        if m["pred"].size == 2 * n:
            mv = m["pred"].reshape(n, 2)
            means.append(mv[:, 0].astype(np.float64))
            variances.append(mv[:, 1].astype(np.float64))
    recomputed = None
    if len(means) == len(gmembers):
        means, variances = np.stack(means), np.stack(variances)
        recomputed = {"rmse": rmse(means.mean(0), yh), "mixture_nll": mixture_nll(yh, means, variances),
                      "mean_member_variance": float(variances.mean()),
                      "min_member_variance": float(variances.min())}
    else:
        print("[real_data] WARNING: gaussian_nll holdout_pred.f32 sizes %s, expected %d ([mean, variance] "
              "per row)" % (shapes, 2 * n), file=sys.stderr)
    g_nll = gens.get("ensemble_nll")
    if g_nll is None:
        print("[real_data] WARNING: the gaussian_nll run's summary has no ensemble_nll: %s" % gens, file=sys.stderr)
    lines.append(line("diabetes", "gaussian_nll: holdout NLL", g_nll, sk_nll, False,
                      "sklearn: Normal(mean, var across models + train residual var)"))
    lines.append(line("diabetes", "gaussian_nll: holdout RMSE", gens.get("ensemble_rmse"), sk_rmse, False))
    walls.append(("diabetes (gaussian_nll)", wall_g, None, member_epochs(gmembers), None))
    res["gaussian_nll"].update({
        "ensembled": {"wall_s": round(wall_g, 3), "summary_ensemble": gens, "recomputed_from_member_files": recomputed,
                      "holdout_pred_sizes": shapes,
                      "members": {nm: {"epochs_run": m["epochs_run"], "best_val_loss_epoch": m["best_val_loss_epoch"]}
                                  for nm, m in gmembers.items()}},
        "sklearn_nll": sk_nll})
    if recomputed and g_nll is not None and abs(recomputed["mixture_nll"] - g_nll) > 1e-3:
        print("[real_data] WARNING: summary ensemble_nll %r, mixture NLL from the member files %r" %
              (g_nll, recomputed["mixture_nll"]), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--patience", type=int, default=20)
    ap.add_argument("--hidden", default="100", help="hidden layer widths, comma-separated")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--workers", type=int, default=2, help="ensembled cpu_workers")
    ap.add_argument("--sk-jobs", type=int, default=2, help="sklearn models fitted at once")
    ap.add_argument("--datasets", default="digits,diabetes", help="comma-separated: digits, diabetes")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    a.datasets = a.datasets.split(",")
    a.hidden = [int(u) for u in a.hidden.split(",")]
    machine = C.machine_info()
    work = C.tempdir("ens-real-data-")
    lines, walls = [], []
    result = {"machine": machine, "args": vars(a), "sklearn_version": sklearn.__version__,
              "numpy_version": np.__version__, "split": "train_test_split(test_size=0.25, random_state=0"
              ", stratify=y for digits)", "differences": DIFFERENCES}
    t0 = time.monotonic()
    try:
        for name, fn in (("digits", digits), ("diabetes", diabetes)):
            if name not in a.datasets:
                continue
            try:
                fn(a, work, result, lines, walls)
            except RunFailed as e:
                print("[real_data] %s: the ensembled run failed: %s" % (name, e), flush=True)
                result.setdefault("failures", {})[name] = str(e)
                lines.append(line(name, "ensembled run", None, None, False, "FAILED: %s" % e))
    finally:
        if a.keep:
            print("[real_data] work directory kept:", work)
        else:
            C.rmtree(work)
    result["lines"] = lines
    result["walls"] = [{"what": w[0], "ensembled_s": round(w[1], 3),
                        "sklearn_s": None if w[2] is None else round(w[2], 3),
                        "ensembled_member_epochs": w[3], "sklearn_model_epochs": w[4]} for w in walls]
    result["total_wall_s"] = round(time.monotonic() - t0, 1)
    print()
    C.print_table(["dataset", "metric", "ensembled", "sklearn", "ens vs sklearn", "ensembled at least as good?"],
                  [[ln["dataset"], ln["metric"],
                    ln["note"].split(":")[0] if ln["ensembled"] is None and ln["note"] else ln["ensembled"],
                    ln["sklearn"], ln["compare"],
                    {True: "yes", False: "no", None: "n/a"}[ln["ensembled_at_least_as_good"]]] for ln in lines])
    for ln in lines:
        if ln["note"]:
            print("  %s / %s: %s" % (ln["dataset"], ln["metric"], ln["note"]))
    print()
    C.print_table(["run", "ensembled wall s", "sklearn wall s", "ensembled member-epochs", "sklearn model-epochs",
                   "ensembled ms / member-epoch", "sklearn ms / model-epoch"],
                  [[w[0], w[1], "(same models as mse)" if w[2] is None else w[2], w[3],
                    "-" if w[4] is None else w[4], 1000.0 * w[1] / max(1, w[3]),
                    "-" if w[4] is None else 1000.0 * w[2] / max(1, w[4])] for w in walls])
    print("\n%d members a side; ensembled %d CPU workers; sklearn %d models at a time; total %.1f s" %
          (a.members, a.workers, a.sk_jobs, result["total_wall_s"]))
    print("differences between the sides:\n  - " + "\n  - ".join(DIFFERENCES))
    C.write_result("real_data", result)


if __name__ == "__main__":
    main()
