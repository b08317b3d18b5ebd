#!/usr/bin/env python3
"""`ensembled serve`: the daemon's own CPU while idle and while 3 runs train.

Starts `ensembled serve` with 3 CPU worker slots (resources.gpus "none", cpu_workers 3) and
measures the daemon process alone (utime + stime of /proc/<pid>/stat, 10 ms ticks; its children,
the runs' `ensembled run` supervisors and their workers, are not counted) and its wake-ups
(voluntary context switches in /proc/<pid>/status):
  idle     --idle-s seconds with an empty runs_dir
  3 runs   from dropping 3 runs (1 CPU worker each) into runs_dir until all 3 have finished
The issue's goal: at most 1 % of one core in both. Printed as % of one core and as a ratio
to the goal (below 1 meets it).

Usage: bench/serve_cpu.py [--idle-s 60] [--rounds 30] [--keep]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

TCK = os.sysconf("SC_CLK_TCK")
GOAL_PCT = 1.0


def cpu_seconds(pid):
    """The process's own user + system CPU seconds (not its children's)."""
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TCK


def wakeups(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    return 0


def run_config(name, rounds):
    return {"run_name": name, "run_seed": 7,
            "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
            "data": {"source": "synthetic", "synthetic": {"initial_rows": 2000, "pool_rows": 2000, "holdout_rows": 500}},
            "members": {"defaults": C.member_defaults(20, 32), "count": 2},
            "mutation": {"policy": "query_by_committee", "k": 50}, "pack_size": 1,
            "rounds": {"count": rounds}}


def finished(state_root, name):
    try:
        with open(os.path.join(state_root, name, "journal.jsonl"), errors="replace") as f:
            return any('"run_finished"' in line for line in f)
    except OSError:
        return False


def measure(pid, until, poll_s=0.5):
    """Daemon CPU seconds and wake-ups from now until `until()` is true; also the wall time."""
    c0, w0, t0 = cpu_seconds(pid), wakeups(pid), time.monotonic()
    while not until():
        time.sleep(poll_s)
    return cpu_seconds(pid) - c0, wakeups(pid) - w0, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle-s", type=float, default=60)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    C.wait_for_binaries()
    info = C.machine_info()
    work = C.tempdir("bench-serve-cpu-")
    d = C.Serve(work, cpu_workers=3)
    runs_dir, state_root, log_path = d.runs_dir, d.state_root, d.log_path
    names = ["cpu%d" % i for i in range(3)]
    try:
        time.sleep(2)  # past its start-up
        idle_end = time.monotonic() + args.idle_s
        idle = measure(d.pid, lambda: time.monotonic() >= idle_end)
        for name in names:
            tmp = os.path.join(runs_dir, "." + name + ".json")
            with open(tmp, "w") as f:
                json.dump(run_config(name, args.rounds), f)
            os.rename(tmp, os.path.join(runs_dir, name + ".json"))
        deadline = time.monotonic() + 1800

        def all_done():
            if time.monotonic() > deadline or d.proc.poll() is not None:
                sys.exit("the 3 runs did not finish (daemon exit %s); see %s" % (d.proc.poll(), log_path))
            return all(finished(state_root, n) for n in names)
        busy = measure(d.pid, all_done)
    finally:
        rc = d.stop()
    rows, results = [], {}
    for label, (cpu, wakes, wall) in (("idle", idle), ("3 runs training", busy)):
        pct = 100.0 * cpu / wall
        results[label] = {"cpu_s": cpu, "wall_s": round(wall, 1), "wakeups": wakes, "pct_of_one_core": pct,
                          "ratio_to_goal": pct / GOAL_PCT}
        rows.append([label, "%.1f" % wall, "%.0f" % (cpu * 1000), str(wakes), "%.3f" % pct, "%.3f" % (pct / GOAL_PCT)])
    print("\nensembled serve's own CPU (its children not counted), 3 CPU worker slots")
    C.print_table(["phase", "wall s", "daemon CPU ms", "wake-ups", "% of one core", "ratio to the 1 % goal"], rows)
    info["loadavg_at_end"] = open("/proc/loadavg").read().split()[:3]
    C.write_result("serve_cpu", {"machine": info, "idle_s": args.idle_s, "rounds": args.rounds,
                                 "daemon_exit_code": rc, "phases": results})
    if args.keep:
        print("kept", work)
    else:
        C.rmtree(work)


if __name__ == "__main__":
    main()
