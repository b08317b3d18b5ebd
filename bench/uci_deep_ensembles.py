#!/usr/bin/env python3
"""The deep-ensembles paper's protocol on its UCI regression sets (issue 49): ensembled beside
the paper's Table 1 and a plain-PyTorch copy of the same protocol.

Protocol (Lakshminarayanan et al. 2017, Table 1): 5 members, 1 hidden layer of 50 ReLU units, a
Gaussian mean-and-variance head trained on NLL, adversarial training by the fast gradient sign
(eps = 0.01 of each input's range), Adam, batch 100, 40 epochs, torch's default initialisation,
every training row trains (validation_split 0); inputs and targets standardised on the training
rows. The paper's lr 0.1 diverges in both ensembled and the PyTorch copy; --lr (default 0.01) is
used by both. Each set's 20 published splits (../shared/data/uci/, README there): a split's test
rows are ensembled's holdout, seen only when it is scored (nothing is fitted on them: the RMSE
and NLL below are the raw ensemble's, the mixture as one Gaussian in the target's units).
"calibrated cover 2sd" is the round's cross-fitted calibrated coverage (orchestrator/
sigma_calibration.h), which is fitted on half of the test rows and scored on the other half: it
is shown, not compared with the paper.

Usage: bench/uci_deep_ensembles.py [--sets yacht,energy,...] [--splits 20] [--lr 0.01] [--no-torch]
Writes bench/results/uci_deep_ensembles.json.
"""
import argparse
import json
import math
import os
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
train, test, lr, seed = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3]), int(sys.argv[4])
X = torch.tensor([r[:-1] for r in train]); Y = torch.tensor([r[-1] for r in train])
Xt = torch.tensor([r[:-1] for r in test]); Yt = torch.tensor([r[-1] for r in test])
xm, xs = X.mean(0), X.std(0, unbiased=False).clamp_min(1e-6); ym, ys = Y.mean(), Y.std(unbiased=False).clamp_min(1e-6)
Xn, Yn, Xtn = (X - xm) / xs, (Y - ym) / ys, (Xt - xm) / xs
eps = 0.01 * (X.max(0).values - X.min(0).values) / xs
def nll(out, y):
    var = torch.nn.functional.softplus(out[:, 1]) + 1e-6
    return 0.5 * (var.log() + (out[:, 0] - y) ** 2 / var)
means, variances = [], []
for k in range(5):
    torch.manual_seed(seed * 100 + k)
    net = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 50), torch.nn.ReLU(), torch.nn.Linear(50, 2))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    for epoch in range(40):
        perm = torch.randperm(len(Xn))
        for b in range(0, len(Xn), 100):
            i = perm[b:b + 100]; x = Xn[i].clone().requires_grad_(True); y = Yn[i]
            loss = nll(net(x), y).mean()
            g, = torch.autograd.grad(loss, x, retain_graph=True)
            loss = loss + nll(net((x + eps * g.sign()).detach()), y).mean()
            opt.zero_grad(); loss.backward(); opt.step()
    with torch.no_grad():
        out = net(Xtn)
        means.append(out[:, 0] * ys + ym); variances.append((torch.nn.functional.softplus(out[:, 1]) + 1e-6) * ys * ys)
M, V = torch.stack(means), torch.stack(variances)
mu = M.mean(0); var = (V + M * M).mean(0) - mu * mu
rmse = ((mu - Yt) ** 2).mean().sqrt().item()
nll_t = (0.5 * torch.log(2 * math.pi * var) + 0.5 * (Yt - mu) ** 2 / var).mean().item()
print(json.dumps({"rmse": rmse, "nll": nll_t}))
"""


def load(name):
    lines = open(os.path.join(DATA, name + ".csv")).read().splitlines()
    header, rows = lines[0], [l for l in lines[1:] if l.strip()]
    splits = [[int(t) for t in l.split()] for l in open(os.path.join(DATA, name + ".splits")).read().splitlines() if l.strip()]
    return header, rows, splits


def mean_se(v):
    return (statistics.mean(v), statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else 0.0)


def ensembled_split(work, name, s, header, train_rows, test_rows, lr):
    d = os.path.join(work, f"{name}-{s}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "train.csv"), "w") as f:
        f.write(header + "\n" + "\n".join(train_rows) + "\n")
    with open(os.path.join(d, "test.csv"), "w") as f:
        f.write(header + "\n" + "\n".join(test_rows) + "\n")
    cfg = {"run_name": f"{name}-{s}", "state_dir": os.path.join(d, "state"), "run_seed": s,
           "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
           "data": {"source": "csv", "train_path": os.path.join(d, "train.csv"),
                    "holdout_path": os.path.join(d, "test.csv"), "target_column": "y"},
           "members": {"defaults": {"layers": [{"units": 50, "activation": "relu"}], "loss": "gaussian_nll",
                                    "optimizer": "adam", "lr": lr, "batch_size": 100, "epochs": 40,
                                    "validation_split": 0, "initializer": "torch_default", "adversarial_eps": 0.01},
                       "count": 5},
           "mutation": {"policy": "none"}, "rounds": {"count": 1}}
    C.run_to_end(cfg, d, "run")
    e = json.load(open(os.path.join(d, "state", "rounds", "r0000", "summary.json")))["ensemble"]
    return {"rmse": e["ensemble_rmse"], "nll": e["ensemble_gaussian_nll"],
            "calibrated_coverage_2sigma": e.get("calibrated_coverage_2sigma"), "coverage_2sigma": e.get("coverage_2sigma")}


def torch_split(work, name, s, train_rows, test_rows, lr):
    d = os.path.join(work, f"{name}-{s}")
    tr, te = os.path.join(d, "train.json"), os.path.join(d, "test.json")
    json.dump([[float(x) for x in r.split(",")] for r in train_rows], open(tr, "w"))
    json.dump([[float(x) for x in r.split(",")] for r in test_rows], open(te, "w"))
    r = subprocess.run([TORCH_PY, "-c", TORCH_COPY, tr, te, str(lr), str(s)], capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        sys.exit(f"torch copy failed on {name} split {s}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="yacht,energy,concrete,wine,kin8nm")
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    C.wait_for_binaries()
    work = C.tempdir("bench-uci-")
    result = {"machine": C.machine_info(), "command": " ".join(["bench/uci_deep_ensembles.py"] + sys.argv[1:]),
              "settings": {"members": 5, "layers": "1 x 50 relu", "loss": "gaussian_nll", "optimizer": "adam",
                           "lr": a.lr, "batch_size": 100, "epochs": 40, "validation_split": 0,
                           "initializer": "torch_default", "adversarial_eps": 0.01},
              "sets": {}}
    rows = []
    for name in a.sets.split(","):
        header, data, splits = load(name)
        per = {"ensembled": [], "torch": []}
        for s, test_ids in enumerate(splits[: a.splits]):
            test = set(test_ids)
            train_rows = [r for i, r in enumerate(data) if i not in test]
            test_rows = [data[i] for i in test_ids]
            per["ensembled"].append(ensembled_split(work, name, s, header, train_rows, test_rows, a.lr))
            if not a.no_torch:
                per["torch"].append(torch_split(work, name, s, train_rows, test_rows, a.lr))
            print(f"[uci] {name} split {s}: ensembled {per['ensembled'][-1]}"
                  + (f" torch {per['torch'][-1]}" if per["torch"] else ""), file=sys.stderr)
        summary = {}
        for side, runs in per.items():
            if runs:
                summary[side] = {"rmse": mean_se([r["rmse"] for r in runs]), "nll": mean_se([r["nll"] for r in runs])}
        cal = [r["calibrated_coverage_2sigma"] for r in per["ensembled"] if r["calibrated_coverage_2sigma"] is not None]
        raw = [r["coverage_2sigma"] for r in per["ensembled"] if r["coverage_2sigma"] is not None]
        summary["ensembled"]["coverage_2sigma"] = statistics.mean(raw) if raw else None
        summary["ensembled"]["calibrated_coverage_2sigma"] = statistics.mean(cal) if cal else None
        p = PAPER[name]
        summary["paper"] = {"rmse": [p[0], p[1]], "nll": [p[2], p[3]]}
        e = summary["ensembled"]
        summary["ensembled_at_or_below_paper"] = {"rmse": e["rmse"][0] <= p[0], "nll": e["nll"][0] <= p[2]}
        result["sets"][name] = {"summary": summary, "splits": per}
        t = summary.get("torch")
        rows.append([name, len(per["ensembled"]), "%.3f ± %.3f" % e["rmse"], "%.2f ± %.2f" % (p[0], p[1]),
                     "%.3f ± %.3f" % t["rmse"] if t else "-", "%.3f ± %.3f" % e["nll"], "%.2f ± %.2f" % (p[2], p[3]),
                     "%.3f ± %.3f" % t["nll"] if t else "-", C.fmt(e["coverage_2sigma"]),
                     C.fmt(e["calibrated_coverage_2sigma"])])
        C.print_table(["set", "splits", "RMSE ensembled", "RMSE paper", "RMSE torch", "NLL ensembled", "NLL paper",
                       "NLL torch", "cover 2sd", "cal. cover 2sd"], rows)
    C.write_result("uci_deep_ensembles", result)
    C.keep_or_remove(work, a.keep)


if __name__ == "__main__":
    main()
