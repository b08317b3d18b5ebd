#!/usr/bin/env python3
"""Calibrated uncertainty in every round (issue 49): the built-in example (configs/example.json,
Friedman #1, 8 Huber members, query by committee) and a 12-member, 6-round query-by-committee
run on 8 synthetic features, each on several run seeds. Per round it prints the holdout's raw and
calibrated coverage of +-1 and 2 sigma, Gaussian NLL and interval calibration error (ICE), and
the ensemble RMSE, from each round's summary.json (common/scoring/sigma_calibration.h: calibrated
figures are cross-fitted on the holdout's halves). Target: calibrated +-1 sigma in 0.63-0.73 and
+-2 sigma in 0.93-0.97 in every round, NLL better than raw.

Usage: bench/calibration.py [--seeds 42,1,2] [--keep]
Writes bench/results/calibration.json.
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402


def example_config():
    text = open(os.path.join(C.REPO, "configs", "example.json")).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"(?m)(^|\s)//.*$", r"\1", text)
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", text))


def qbc_config():
    return {"run_name": "qbc12", "resources": {"gpus": "none", "cpu_workers": 2},
            "data": {"synthetic": {"features": 8, "noise": 1.0, "initial_rows": 200, "pool_rows": 3000,
                                   "holdout_rows": 1000}},
            "members": {"defaults": {"layers": [{"units": 32, "activation": "relu"}], "epochs": 60, "lr": 0.003,
                                     "early_stopping": {"enabled": True, "patience": 10}},
                        "count": 12},
            "mutation": {"policy": "query_by_committee", "k": 100},
            "rounds": {"count": 6}}


FIGURES = ["coverage_1sigma", "calibrated_coverage_1sigma", "coverage_2sigma", "calibrated_coverage_2sigma",
           "ensemble_gaussian_nll", "calibrated_gaussian_nll", "interval_calibration_error",
           "calibrated_interval_calibration_error", "ensemble_rmse"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="42,1,2")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    C.wait_for_binaries()
    work = C.tempdir("bench-calibration-")
    result = {"machine": C.machine_info(), "command": " ".join(["bench/calibration.py"] + sys.argv[1:]), "runs": []}
    rows, in_target, rounds_total = [], 0, 0
    for name, make in (("example", example_config), ("qbc12", qbc_config)):
        for seed in [int(s) for s in a.seeds.split(",")]:
            cfg = make()
            cfg["run_seed"] = seed
            cfg["run_name"] = f"{name}-{seed}"
            cfg["state_dir"] = os.path.join(work, f"{name}-{seed}")
            cfg["resources"] = {"gpus": "none", "cpu_workers": 2}
            C.run_to_end(cfg, work, f"{name}-{seed}")
            run = {"config": name, "seed": seed, "rounds": []}
            r = 0
            while os.path.exists(os.path.join(cfg["state_dir"], "rounds", f"r{r:04d}", "summary.json")):
                e = json.load(open(os.path.join(cfg["state_dir"], "rounds", f"r{r:04d}", "summary.json")))["ensemble"]
                fig = {k: e.get(k) for k in FIGURES}
                run["rounds"].append(dict(round=r, **fig))
                ok = (0.63 <= fig["calibrated_coverage_1sigma"] <= 0.73 and
                      0.93 <= fig["calibrated_coverage_2sigma"] <= 0.97 and
                      fig["calibrated_gaussian_nll"] < fig["ensemble_gaussian_nll"])
                in_target += ok
                rounds_total += 1
                rows.append([name, seed, r] + [C.fmt(fig[k]) for k in FIGURES] + ["yes" if ok else "NO"])
                r += 1
            result["runs"].append(run)
    C.print_table(["config", "seed", "round", "cov1", "cal cov1", "cov2", "cal cov2", "NLL", "cal NLL", "ICE",
                   "cal ICE", "RMSE", "in target"], rows)
    print(f"rounds in target: {in_target} of {rounds_total}")
    result["rounds_in_target"] = in_target
    result["rounds_total"] = rounds_total
    C.write_result("calibration", result)
    C.keep_or_remove(work, a.keep)


if __name__ == "__main__":
    main()
