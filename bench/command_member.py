#!/usr/bin/env python3
"""A trivial command member's cost per task, next to a built-in member (issue 14).

Runs the same small run twice, side by side in one run of this script, with pack_size 1 so
each member is one task either way:
  - "builtin": N built-in MLP members of 1 epoch (the smallest real training);
  - "command": N command members whose program is a stdlib-only Python script that reads its
    inputs and writes a constant prediction (process start, input files, output checks: the
    command member's fixed cost, with nothing to train);
  - "command-cp": the same with `sh -c 'cp ...'` copying ready prediction files, so the
    interpreter's start (about 0.1 s for Python on this machine) is out of the figure and what
    is left is ensembled's own cost per command task.
Per task: each member's metrics "seconds" (worker side: from taking the task to its outputs,
process start included) and the round's wall time over its members. Prints both and the
ratio command/builtin; writes bench/results/command_member-*.json.

Usage: bench/command_member.py [--members 16] [--workers 2] [--rounds 2]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

TRIVIAL = r'''
import os, struct
def rows(path):
    with open(path, "rb") as f:
        head = f.read(10)
        n = struct.unpack("<H", head[8:10])[0]
        header = f.read(n).decode()
    return int(header.split("'shape': (")[1].split(",")[0])
def save(path, n):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % n
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"\0\0\0\0" * n)
out = os.environ["ENSEMBLED_OUTPUT_DIR"]
save(os.path.join(out, "holdout_pred.npy"), rows(os.environ["ENSEMBLED_HOLDOUT_X"]))
save(os.path.join(out, "pool_pred.npy"), rows(os.environ["ENSEMBLED_POOL_X"]))
'''


def config(state, members, workers, rounds, member):
    return {"run_name": "cmd-bench", "state_dir": state, "run_seed": 1,
            "resources": {"gpus": "none", "cpu_workers": workers},
            "data": {"synthetic": {"initial_rows": 300, "pool_rows": 300, "holdout_rows": 300}},
            "members": {"defaults": member, "count": members},
            "mutation": {"policy": "append_from_pool", "k": 10},
            "pack_size": 1, "rounds": {"count": rounds}}


def run(cfg, work, name):
    wall, records = C.run_to_end(cfg, work, name)
    per_task = [r["metrics"]["seconds"] for r in records if r.get("event") == "member_done"]
    round_walls = [r.get("wall_seconds") for r in records if r.get("event") == "round_committed"]
    members = cfg["members"]["count"]
    return {"wall_s": round(wall, 3), "task_s_median": round(statistics.median(per_task), 4),
            "task_s_mean": round(statistics.mean(per_task), 4),
            "round_wall_per_member_s": [round(w / members, 4) for w in round_walls]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    C.wait_for_binaries()
    work = tempfile.mkdtemp(prefix="ens-cmd-bench-")
    try:
        script = os.path.join(work, "trivial.py")
        with open(script, "w") as f:
            f.write(TRIVIAL)
        builtin = run(config(os.path.join(work, "builtin"), a.members, a.workers, a.rounds,
                             {"epochs": 1, "layers": [{"units": 32}, {"units": 32}]}), work, "builtin")
        command = run(config(os.path.join(work, "command"), a.members, a.workers, a.rounds,
                             {"model": {"kind": "command", "argv": [sys.executable, script]}}), work, "command")
        ready = os.path.join(work, "ready")
        os.makedirs(ready)
        for name in ("holdout_pred.npy", "pool_pred.npy"):  # 300 holdout rows, 300 pool rows
            header = "{'descr': '<f4', 'fortran_order': False, 'shape': (300,), }"
            header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
            with open(os.path.join(ready, name), "wb") as f:
                f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + bytes(4 * 300))
        copy = ["/bin/sh", "-c", 'exec cp "$0"/holdout_pred.npy "$0"/pool_pred.npy "$ENSEMBLED_OUTPUT_DIR"/', ready]
        command_cp = run(config(os.path.join(work, "command-cp"), a.members, a.workers, a.rounds,
                                {"model": {"kind": "command", "argv": copy}}), work, "command-cp")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"machine": C.machine_info(), "args": vars(a), "builtin": builtin, "command": command,
              "command_cp": command_cp,
              "task_median_ratio": round(command["task_s_median"] / builtin["task_s_median"], 3),
              "task_median_ratio_cp": round(command_cp["task_s_median"] / builtin["task_s_median"], 3)}
    print("member kind   task s (median)   task s (mean)   round wall / member s   whole run s")
    for name, r in (("builtin", builtin), ("command", command), ("command-cp", command_cp)):
        print("%-12s %16.4f %15.4f   %-22s %11.2f" % (name, r["task_s_median"], r["task_s_mean"],
                                                     r["round_wall_per_member_s"], r["wall_s"]))
    print("command/builtin per task (median): %.3f; command-cp/builtin: %.3f" %
          (result["task_median_ratio"], result["task_median_ratio_cp"]))
    C.write_result("command_member", result)


if __name__ == "__main__":
    main()
