#!/usr/bin/env python3
"""The deep-ensembles paper's protocol on its UCI regression sets (issues 49 and 64): ensembled's
one recipe beside the paper's Table 1, and beside the paper's own setting run the same way.

Protocol (Lakshminarayanan et al. 2017, Table 1): 5 members, 1 hidden layer of 50 ReLU units, a
Gaussian mean-and-variance head trained on NLL, adversarial training by the fast gradient sign
(eps = 0.01 of each input's range), Adam, batch 100, torch's default initialisation; inputs and
targets standardised on the training rows. Each set's 20 published splits (../shared/data/uci/,
README there). A split's test rows are seen only when it is scored: nothing is fitted on them.

The recipe (one setting for every set; the run prints it and records it in its result; there is
no per-set option):
- lr 0.01 (the paper's 0.1 diverges in ensembled and in a plain PyTorch copy);
- the training length chosen by the data (early_stopping.refit, config.h): each member holds
  out --validation-split (0.2) of the split's training rows, trains up to --max-epochs (1000)
  and stops after --patience (50) epochs without a lower validation MSE (--monitor val_mse:
  the validation NLL picks lengths that are best for a member alone and short for the
  ensemble: wine, splits 0-3, chose 18 epochs on average and NLL 0.943, val_mse 51 and 0.932);
  then it trains again from its first weights on every training row for its best epoch count
  (the PBP protocol's way). Each member chooses its own length; the table shows the mean.
- no calibration (--calibrate fits ensembled's sigma map on --calibration-fraction of every
  set's training rows held out of training, and scores the test rows through `ensemblectl
  predict`; a switch for all sets or none).
Columns: RMSE and NLL of the test rows (the ensemble as one Gaussian, target units), their
coverage by mean +-1 sigma and +-2 sigma, and "cal. NLL" / "cal. cover 2sd": the round's
cross-fitted calibration of the test rows (the sigma map fitted on one half of them and scored
on the other, both ways): shown, never part of the recipe's RMSE or NLL.
--fixed-epochs N (default 40, the paper's; 0 skips it) also runs every split with N fixed epochs
and every row training (no early stopping), the paper's own setting: its RMSE and NLL, and the
recipe's wall time per split against it.
--torch adds the plain-PyTorch copy of the fixed-epoch protocol (TORCH_COPY below).

Usage: bench/uci_deep_ensembles.py [--sets yacht,energy,...] [--splits 20] [--lr 0.01]
       [--max-epochs 1000] [--patience 50] [--monitor val_mse] [--validation-split 0.2] [--batch-size 100]
       [--adversarial-eps 0.01] [--fixed-epochs 40] [--calibrate] [--calibration-fraction 0.1]
       [--torch]
ENSEMBLED_BUILD=<folder> picks the binaries (default: this checkout's build/).
Writes bench/results/uci_deep_ensembles.json.
"""
import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

DATA = os.environ.get("ENSEMBLED_UCI_DIR", os.path.join(C.REPO, "..", "shared", "data", "uci"))
PAPER = {"concrete": (6.03, 0.58, 3.06, 0.18), "energy": (2.09, 0.29, 1.38, 0.22), "kin8nm": (0.09, 0.00, -1.20, 0.02),
         "wine": (0.64, 0.04, 0.94, 0.12), "yacht": (1.58, 0.48, 1.18, 0.21)}
TORCH_PY = os.path.expanduser("~/.cache/ensembled/venv/bin/python")

TORCH_COPY = r"""
import json, math, sys, torch
torch.set_num_threads(1)
train, test = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
lr, seed, epochs, batch, adv = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
X = torch.tensor([r[:-1] for r in train]); Y = torch.tensor([r[-1] for r in train])
Xt = torch.tensor([r[:-1] for r in test]); Yt = torch.tensor([r[-1] for r in test])
xm, xs = X.mean(0), X.std(0, unbiased=False).clamp_min(1e-6); ym, ys = Y.mean(), Y.std(unbiased=False).clamp_min(1e-6)
Xn, Yn, Xtn = (X - xm) / xs, (Y - ym) / ys, (Xt - xm) / xs
eps = adv * (X.max(0).values - X.min(0).values) / xs
# The 5 members side by side: member k's weights are [k] of each tensor; the loss is the sum of
# the members' mean NLLs, so each member's gradient (and Adam, elementwise) is its own.
# torch's default init: weights and biases uniform in +-1/sqrt(fan_in).
K, F, H = 5, X.shape[1], 50
torch.manual_seed(seed)
def u(*shape, fan_in): return ((torch.rand(*shape) * 2 - 1) / math.sqrt(fan_in)).requires_grad_()
W1, c1, W2, c2 = u(K, F, H, fan_in=F), u(K, 1, H, fan_in=F), u(K, H, 2, fan_in=H), u(K, 1, 2, fan_in=H)
opt = torch.optim.Adam([W1, c1, W2, c2], lr=lr)
def net(x): return torch.baddbmm(c2, torch.relu(torch.baddbmm(c1, x, W1)), W2)
def nll(out, y):
    var = torch.nn.functional.softplus(out[..., 1]) + 1e-6
    return 0.5 * (var.log() + (out[..., 0] - y) ** 2 / var)
for epoch in range(epochs):
    perm = torch.stack([torch.randperm(len(Xn)) for _ in range(K)])
    for b in range(0, len(Xn), batch):
        i = perm[:, b:b + batch]; x = Xn[i].clone().requires_grad_(True); y = Yn[i]
        loss = nll(net(x), y).mean(1).sum()
        if adv > 0:
            g, = torch.autograd.grad(loss, x, retain_graph=True)
            loss = loss + nll(net((x + eps * g.sign()).detach()), y).mean(1).sum()
        opt.zero_grad(); loss.backward(); opt.step()
def predict(Z):
    with torch.no_grad():
        out = net(((Z - xm) / xs).expand(K, -1, -1))
        M = (out[..., 0] * ys + ym).double(); V = ((torch.nn.functional.softplus(out[..., 1]) + 1e-6) * ys * ys).double()
    mu = M.mean(0); return mu, ((V + M * M).mean(0) - mu * mu).clamp_min(1e-12)
def score(mu, var, y):
    return {"rmse": ((mu - y) ** 2).mean().sqrt().item(),
            "nll": (0.5 * torch.log(2 * math.pi * var) + 0.5 * (y - mu) ** 2 / var).mean().item(),
            "coverage_2sigma": ((y - mu).abs() <= 2 * var.sqrt()).double().mean().item()}
mu, var = predict(Xt); Ytd = Yt.double(); res = score(mu, var, Ytd)
if len(sys.argv) > 8 and json.load(open(sys.argv[8])):
    # Calibration rows (drawn from the split's training rows, not trained on): the map
    # sigma -> sqrt(u sigma^2 + v) of least mean NLL there (ensembled's SigmaMap), by a grid.
    cal = torch.tensor(json.load(open(sys.argv[8]))); mc, vc = predict(cal[:, :-1]); e2 = (cal[:, -1].double() - mc) ** 2
    m2 = e2.mean(); u = (m2 / vc.mean()) * torch.exp(torch.linspace(-4, 4, 321, dtype=torch.float64))
    v = torch.cat([torch.zeros(1, dtype=torch.float64), m2 * torch.exp(torch.linspace(math.log(1e-6), math.log(10), 120, dtype=torch.float64))])
    tot = u[:, None, None] * vc + v[None, :, None]
    obj = (torch.log(tot) + e2 / tot).mean(-1); i = int(obj.argmin()); bu, bv = u[i // len(v)].item(), v[i % len(v)].item()
    raw = res; res = score(mu, bu * var + bv, Ytd)
    res.update({"raw_nll": raw["nll"], "calibrated_coverage_2sigma": res["coverage_2sigma"],
                "coverage_2sigma": raw["coverage_2sigma"], "sigma_map": {"scale": math.sqrt(bu), "noise": math.sqrt(bv)}})
print(json.dumps(res))
"""


def load(name):
    lines = open(os.path.join(DATA, name + ".csv")).read().splitlines()
    header, rows = lines[0], [l for l in lines[1:] if l.strip()]
    splits = [[int(t) for t in l.split()] for l in open(os.path.join(DATA, name + ".splits")).read().splitlines() if l.strip()]
    return header, rows, splits


def mean_se(v):
    return (statistics.mean(v), statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else 0.0)


def calibration_rows(n, s, fraction):
    """The indices (into the split's training rows) of the calibration rows: a fraction of them,
    drawn by a permutation seeded by the split index; empty when fraction is 0."""
    k = int(round(fraction * n))
    order = list(range(n))
    random.Random(1000 + s).shuffle(order)
    return sorted(order[:k])


def member_settings(a, fixed_epochs=0):
    """The members' defaults: the recipe, or (fixed_epochs > 0) the paper's fixed-length setting."""
    m = {"layers": [{"units": 50, "activation": "relu"}], "loss": "gaussian_nll", "optimizer": "adam", "lr": a.lr,
         "batch_size": a.batch_size, "initializer": "torch_default", "adversarial_eps": a.adversarial_eps}
    if fixed_epochs > 0:
        m.update({"epochs": fixed_epochs, "validation_split": 0})
    else:
        m.update({"epochs": a.max_epochs, "validation_split": a.validation_split,
                  "early_stopping": {"enabled": True, "monitor": a.monitor, "patience": a.patience, "refit": True}})
    return m


def chosen_epochs(state_dir):
    """The epoch counts the members chose (early_stopping.refit), through our Python package."""
    sys.path.insert(0, os.path.join(C.REPO, "python"))
    import ensembled  # noqa: E402

    return [m.metrics["epochs_chosen"] for m in ensembled.open_run(state_dir).round(0).members
            if "epochs_chosen" in m.metrics]


def ensembled_split(work, name, s, header, train_rows, test_rows, cal_rows, a, fixed_epochs=0):
    """One split through ensembled. Without calibration rows the split's test rows are the run's
    holdout and the figures are the round's summary (raw ensemble). With them, the calibration
    rows (drawn from the split's training rows) are the holdout, so the round's sigma map
    (sigma_calibration.h) is fitted on them alone; the test rows are then scored through
    `ensemblectl predict` (the calibrated total std) and never enter the run."""
    d = os.path.join(work, f"{name}-{s}" + (f"-fixed{fixed_epochs}" if fixed_epochs else ""))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "train.csv"), "w") as f:
        f.write(header + "\n" + "\n".join(train_rows) + "\n")
    with open(os.path.join(d, "test.csv"), "w") as f:
        f.write(header + "\n" + "\n".join(test_rows) + "\n")
    holdout = os.path.join(d, "test.csv")
    if cal_rows:
        holdout = os.path.join(d, "calibration.csv")
        with open(holdout, "w") as f:
            f.write(header + "\n" + "\n".join(cal_rows) + "\n")
    state = os.path.join(d, "state")
    cfg = {"run_name": f"{name}-{s}", "state_dir": state, "run_seed": s,
           "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
           "data": {"source": "csv", "train_path": os.path.join(d, "train.csv"),
                    "holdout_path": holdout, "target_column": "y"},
           "members": {"defaults": member_settings(a, fixed_epochs), "count": 5},
           "mutation": {"policy": "none"}, "rounds": {"count": 1}}
    wall, _ = C.run_to_end(cfg, d, "run")
    e = json.load(open(os.path.join(state, "rounds", "r0000", "summary.json")))["ensemble"]
    common = {"wall_s": wall, "epochs_chosen": chosen_epochs(state) if not fixed_epochs else []}
    if not cal_rows:
        return dict(common, rmse=e["ensemble_rmse"], nll=e["ensemble_gaussian_nll"],
                    calibrated_nll=e.get("calibrated_gaussian_nll"),
                    calibrated_coverage_2sigma=e.get("calibrated_coverage_2sigma"),
                    coverage_1sigma=e.get("coverage_1sigma"), coverage_2sigma=e.get("coverage_2sigma"))
    ys = [float(r.split(",")[-1]) for r in test_rows]
    out = {}
    for kind, extra in (("calibrated", []), ("raw", ["--raw-sigma"])):
        p = subprocess.run([C.CTL, "predict", "--state-dir", state, "--input",
                            os.path.join(d, "test.csv")] + extra, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            sys.exit(f"ensemblectl predict failed on {name} split {s}: {p.stderr[-2000:]}")
        lines = p.stdout.strip().splitlines()
        col = lines[0].split(",")
        mu = [float(l.split(",")[col.index("mean")]) for l in lines[1:]]
        sd = [float(l.split(",")[col.index("total_std")]) for l in lines[1:]]
        out[kind] = (mu, sd)
    mu, sd = out["calibrated"]
    raw_sd = out["raw"][1]
    n = len(ys)

    def nll(sds):
        return sum(0.5 * math.log(2 * math.pi * v * v) + 0.5 * (y - m) ** 2 / (v * v) for y, m, v in zip(ys, mu, sds)) / n

    def cover(sds, k):
        return sum(abs(y - m) <= k * v for y, m, v in zip(ys, mu, sds)) / n

    # With --calibrate the recipe's NLL is the calibrated one (fitted on training rows only).
    return dict(common, rmse=math.sqrt(sum((y - m) ** 2 for y, m in zip(ys, mu)) / n), nll=nll(sd),
                raw_nll=nll(raw_sd), calibrated_nll=nll(sd), sigma_map=e.get("sigma_calibration"),
                calibrated_coverage_2sigma=cover(sd, 2), coverage_1sigma=cover(raw_sd, 1),
                coverage_2sigma=cover(raw_sd, 2))


def torch_split(work, name, s, train_rows, test_rows, cal_rows, a):
    d = os.path.join(work, f"{name}-{s}")
    tr, te, ca = os.path.join(d, "train.json"), os.path.join(d, "test.json"), os.path.join(d, "calibration.json")
    json.dump([[float(x) for x in r.split(",")] for r in train_rows], open(tr, "w"))
    json.dump([[float(x) for x in r.split(",")] for r in test_rows], open(te, "w"))
    json.dump([[float(x) for x in r.split(",")] for r in cal_rows], open(ca, "w"))
    r = subprocess.run([TORCH_PY, "-c", TORCH_COPY, tr, te, str(a.lr), str(s), str(a.fixed_epochs or 40),
                        str(a.batch_size), str(a.adversarial_eps), ca], capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        sys.exit(f"torch copy failed on {name} split {s}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def mean_of(runs, key):
    v = [r[key] for r in runs if r.get(key) is not None]
    return statistics.mean(v) if v else None


def summarise(name, per, a):
    summary = {}
    for side, runs in per.items():
        if runs:
            summary[side] = {"rmse": mean_se([r["rmse"] for r in runs]), "nll": mean_se([r["nll"] for r in runs])}
            for key in ("calibrated_nll", "coverage_1sigma", "coverage_2sigma", "calibrated_coverage_2sigma", "wall_s"):
                summary[side][key] = mean_of(runs, key)
    chosen = [e for r in per["ensembled"] for e in r.get("epochs_chosen", [])]
    summary["ensembled"]["epochs_chosen"] = {"mean": statistics.mean(chosen), "min": min(chosen),
                                             "max": max(chosen)} if chosen else None
    p = PAPER[name]
    summary["paper"] = {"rmse": [p[0], p[1]], "nll": [p[2], p[3]]}
    e = summary["ensembled"]
    summary["ensembled_at_or_below_paper"] = {"rmse": e["rmse"][0] <= p[0], "nll": e["nll"][0] <= p[2]}
    return summary


def table_row(name, n, summary):
    e, p, f = summary["ensembled"], summary["paper"], summary.get("fixed")
    ch = e["epochs_chosen"]
    return [name, n, "%.3f ± %.3f" % e["rmse"], "%.2f ± %.2f" % tuple(p["rmse"]),
            "%.3f" % f["rmse"][0] if f else "-", "%.3f ± %.3f" % e["nll"], "%.2f ± %.2f" % tuple(p["nll"]),
            "%.3f" % f["nll"][0] if f else "-", C.fmt(e["calibrated_nll"]), C.fmt(e["coverage_1sigma"]),
            C.fmt(e["coverage_2sigma"]), C.fmt(e["calibrated_coverage_2sigma"]),
            "%.0f (%d-%d)" % (ch["mean"], ch["min"], ch["max"]) if ch else "-",
            "%.1f / %.1f" % (e["wall_s"], f["wall_s"]) if f else "%.1f" % e["wall_s"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="yacht,energy,concrete,wine,kin8nm")
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--max-epochs", type=int, default=1000)
    ap.add_argument("--patience", type=int, default=50)
    ap.add_argument("--validation-split", type=float, default=0.2)
    ap.add_argument("--monitor", default="val_mse", choices=["val_loss", "val_mse", "val_mae"])
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--adversarial-eps", type=float, default=0.01)
    ap.add_argument("--fixed-epochs", type=int, default=40, help="also run the paper's fixed length (0: skip)")
    ap.add_argument("--calibrate", action="store_true",
                    help="calibrate sigma on rows held out of every split's training rows")
    ap.add_argument("--calibration-fraction", type=float, default=0.1)
    ap.add_argument("--torch", action="store_true", help="also the plain-PyTorch copy (fixed epochs)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    C.ensure_numpy()  # the Python package reads the members' metrics
    C.wait_for_binaries()
    work = C.tempdir("bench-uci-")
    result = {"machine": C.machine_info(), "command": " ".join(["bench/uci_deep_ensembles.py"] + sys.argv[1:]),
              "settings": {"members": 5, "recipe": member_settings(a), "calibrated": a.calibrate,
                           "calibration_fraction_of_train_rows": a.calibration_fraction if a.calibrate else 0,
                           "fixed_epochs_comparison": a.fixed_epochs},
              "sets": {}}
    print("recipe:", json.dumps(result["settings"]))
    rows = []
    for name in a.sets.split(","):
        header, data, splits = load(name)
        per = {"ensembled": [], "fixed": [], "torch": []}
        for s, test_ids in enumerate(splits[: a.splits]):
            test = set(test_ids)
            train_rows = [r for i, r in enumerate(data) if i not in test]
            test_rows = [data[i] for i in test_ids]
            cal_ids = set(calibration_rows(len(train_rows), s, a.calibration_fraction) if a.calibrate else [])
            cal_rows = [r for i, r in enumerate(train_rows) if i in cal_ids]
            train_rows = [r for i, r in enumerate(train_rows) if i not in cal_ids]
            per["ensembled"].append(ensembled_split(work, name, s, header, train_rows, test_rows, cal_rows, a))
            if a.fixed_epochs > 0:
                per["fixed"].append(ensembled_split(work, name, s, header, train_rows, test_rows, cal_rows, a,
                                                    fixed_epochs=a.fixed_epochs))
            if a.torch:
                per["torch"].append(torch_split(work, name, s, train_rows, test_rows, cal_rows, a))
            print(f"[uci] {name} split {s}: " + json.dumps({k: v[-1] for k, v in per.items() if v}), file=sys.stderr)
        summary = summarise(name, per, a)
        result["sets"][name] = {"summary": summary, "splits": per}
        rows.append(table_row(name, len(per["ensembled"]), summary))
        C.print_table(["set", "splits", "RMSE", "RMSE paper", "RMSE %d ep." % a.fixed_epochs, "NLL", "NLL paper",
                       "NLL %d ep." % a.fixed_epochs, "cal. NLL", "cover 1sd", "cover 2sd", "cal. cover 2sd",
                       "epochs chosen", "wall s recipe / %d ep." % a.fixed_epochs], rows)
    C.write_result("uci_deep_ensembles", result)
    C.keep_or_remove(work, a.keep)


if __name__ == "__main__":
    main()
