#!/usr/bin/env python3
"""An active-learning mutation command for ensembled ("mutation": {"policy": "command", ...}).

After every round ensembled runs this with the round summary on stdin; its "run" object (and
the ENSEMBLED_* variables, README "Mutation commands") says where the run's data and the
members' predictions are. It does what DP-GEN-style loops do:
  1. generates its own candidates (uniform in the unit cube: not from the pool);
  2. scores them with this round's ensemble through `ensemblectl predict --input -`, one
     process for all batches;
  3. labels the most uncertain ones with a stand-in "simulation" (the Friedman #1 function,
     the same as ensembled's synthetic data);
  4. adds them and drops the oldest training rows.
It prints {"add": [[x..., y], ...], "drop": [row ids]} on stdout. Deterministic: the
candidates are seeded by the round, so a resumed run decides the same rows.
    "mutation": {"policy": "command",
                 "argv": ["/path/to/venv/bin/python", "examples/active_learning.py", "--k", "20"]}
"""
import argparse
import json
import math
import subprocess
import sys

import numpy as np


def friedman1(x):
    """The "simulation": Friedman #1 on the first five features (the rest are noise features)."""
    return (10 * np.sin(math.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4])


def score(run, candidates, batch):
    """The ensemble's std on each candidate, from ensemblectl predict streaming CSV batches."""
    names = run["feature_names"]
    ctl = subprocess.Popen([run["ensemblectl"], "predict", "--state-dir", run["state_dir"],
                            "--round", str(run["round"]), "--input", "-"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ctl.stdin.write(",".join(names) + "\n")
    stds = []
    for start in range(0, len(candidates), batch):
        rows = candidates[start:start + batch]
        ctl.stdin.write("".join(",".join(f"{v:.9g}" for v in r) + "\n" for r in rows) + "\n")
        ctl.stdin.flush()
        assert ctl.stdout.readline().strip() == "row,mean,std"
        for _ in rows:
            stds.append(float(ctl.stdout.readline().split(",")[2]))
        ctl.stdout.readline()  # the blank line that ends the answer
    ctl.stdin.close()
    if ctl.wait() != 0:
        sys.exit(f"ensemblectl predict exited with {ctl.returncode}")
    return np.array(stds)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--k", type=int, default=20, help="rows to label and add per round")
    p.add_argument("--candidates", type=int, default=400, help="candidates generated per round")
    p.add_argument("--batch", type=int, default=100, help="candidates per scoring batch")
    p.add_argument("--drop", type=int, default=5, help="oldest training rows dropped per round")
    args = p.parse_args()
    summary = json.load(sys.stdin)
    run = summary["run"]
    rng = np.random.default_rng(1000 + run["round"])
    candidates = rng.random((args.candidates, run["features"]), dtype=np.float64).astype(np.float32)
    spread = score(run, candidates, args.batch)
    chosen = np.argsort(-spread, kind="stable")[:args.k]
    x = candidates[chosen]
    y = friedman1(x.astype(np.float64))
    rows = np.load(run["train_row_ids"])  # the rows trained on, net of earlier drops, oldest first
    print(json.dumps({"add": [list(map(float, r)) + [float(t)] for r, t in zip(x, y)],
                      "drop": [int(i) for i in rows[:args.drop]]}))
    print(f"round {run['round']}: {len(rows)} rows, added {len(x)} of {len(candidates)} candidates "
          f"(std {spread[chosen].min():.3f}..{spread[chosen].max():.3f}), dropped rows {rows[:args.drop].tolist()}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
