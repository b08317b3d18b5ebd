#!/usr/bin/env python3
"""A Slurm round against a local round on the same machine (issue 15).

Starts the project's private two-node Slurm cluster (tests/support/slurm_cluster.sh; root, Slurm
and munge needed), then runs the same config twice, side by side in one run of this script:
once with resources.executor "local" (N CPU workers as child processes) and once with "slurm"
(N CPU-only pilot jobs that connect back over TCP). Both runs train the same members with the
same bits; the difference is the executor's cost:
  - startup: from `ensembled run` to the first round's start (sbatch, the job reaching RUNNING,
    the worker connecting back and saying ready), taken from the log;
  - per round: the round's wall_seconds from the journal (dispatch, reports, commit);
  - whole run: wall time of `ensembled run`.
Members are tiny so the executor's share is visible; with real members (minutes each) it is
the same absolute cost over a much larger round.

Usage: bench/slurm_round.py [--workers 2] [--members 8] [--rounds 3] [--epochs 5]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

CLUSTER = os.path.join(C.REPO, "tests", "support", "slurm_cluster.sh")


def config(state, resources, members, rounds, epochs):
    return {
        "run_name": "slurm-bench", "state_dir": state, "run_seed": 7, "resources": resources,
        "data": {"synthetic": {"initial_rows": 300, "pool_rows": 600, "holdout_rows": 300}},
        "members": {"defaults": {"epochs": epochs, "batch_size": 32, "layers": [{"units": 32}, {"units": 32}]},
                    "count": members},
        "mutation": {"policy": "query_by_committee", "k": 20},
        "pack_size": 1, "rounds": {"count": rounds},
    }


def run(cfg, work, name):
    wall, records = C.run_to_end(cfg, work, name)
    rounds = [r.get("summary", {}).get("wall_seconds") or r.get("wall_seconds")
              for r in records if r.get("event") == "round_committed"]
    return {"wall_s": round(wall, 3), "round_wall_s": rounds}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--members", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=5)
    a = ap.parse_args()
    C.wait_for_binaries()
    work = tempfile.mkdtemp(prefix="ens-slurm-bench-")
    cluster = os.path.join(work, "cluster")
    p = subprocess.run(["bash", CLUSTER, "start", cluster], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("no Slurm test cluster here (exit %d): %s" % (p.returncode, p.stderr.strip()))
    for line in p.stdout.splitlines():
        if line.startswith("export SLURM_CONF="):
            os.environ["SLURM_CONF"] = line.split("=", 1)[1]
    try:
        local = run(config(os.path.join(work, "local"),
                           {"gpus": "none", "cpu_workers": a.workers}, a.members, a.rounds, a.epochs), work, "local")
        slurm = run(config(os.path.join(work, "slurm"),
                           {"gpus": "none", "executor": "slurm",
                            "slurm": {"workers": a.workers, "gpus_per_worker": 0, "listen": "127.0.0.1",
                                      "advertise_host": "127.0.0.1"}}, a.members, a.rounds, a.epochs),
                    work, "slurm")
    finally:
        subprocess.run(["bash", CLUSTER, "stop", cluster], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    lr, sr = local["round_wall_s"], slurm["round_wall_s"]
    result = {"machine": C.machine_info(), "args": vars(a), "local": local, "slurm": slurm,
              "whole_run_ratio": round(slurm["wall_s"] / local["wall_s"], 3),
              "round_ratios": [round(s / l, 3) for s, l in zip(sr, lr) if l],
              "round_extra_s": [round(s - l, 3) for s, l in zip(sr, lr)],
              "startup_extra_s": round((slurm["wall_s"] - sum(sr)) - (local["wall_s"] - sum(lr)), 3)}
    print("executor   whole run s   rounds s")
    print("local      %10.2f   %s" % (local["wall_s"], lr))
    print("slurm      %10.2f   %s" % (slurm["wall_s"], sr))
    print("slurm/local whole run %.3f; per round %s; startup extra %.2f s" %
          (result["whole_run_ratio"], result["round_ratios"], result["startup_extra_s"]))
    C.write_result("slurm_round", result)


if __name__ == "__main__":
    main()
