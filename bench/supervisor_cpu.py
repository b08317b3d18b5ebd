#!/usr/bin/env python3
"""Supervisor CPU while 8 CPU workers train.

Starts `ensembled run` with 8 CPU workers (1 thread each) and 8 members of the seed-000 model
with far more epochs than the window lasts (so all 8 stay busy), waits until every worker has
mapped data/train.bin and is using CPU, then measures a window of --window seconds:
  supervisor CPU  = delta (utime + stime) of /proc/<pid>/stat (10 ms ticks) and, finer, the
                    summed /proc/<pid>/task/*/schedstat run time (ns), over the window
  workers CPU     = the same for the 8 workers (to show they were busy the whole time)
  wakeups         = delta voluntary + involuntary context switches of the supervisor
No member may finish inside the window (checked). Then SIGTERM twice.
Goal: supervisor CPU <= 1 % of one core.

Usage: bench/supervisor_cpu.py [--window 40] [--workers 8]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

TCK = os.sysconf("SC_CLK_TCK")


def ctx_switches(pid):
    v = n = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                v = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                n = int(line.split()[1])
    return v, n


def has_train_mapping(pid):
    try:
        with open("/proc/%d/maps" % pid) as f:
            return any(line.rstrip().endswith("/data/train.bin") for line in f)
    except OSError:
        return False


def snapshot(sup, workers):
    return {"t": time.monotonic(), "sup_ticks": C.cpu_ticks(sup), "sup_ns": C.sched_ns(sup),
            "sup_ctx": ctx_switches(sup),
            "workers_ns": {w: C.sched_ns(w) for w in workers}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--window", type=float, default=40)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    C.wait_for_binaries()
    packs = C.supports_pack_size()
    info = C.machine_info()
    work = C.tempdir("bench-supcpu-")
    state = os.path.join(work, "state")
    cfg = {
        "run_name": "bench-supervisor-cpu", "state_dir": state, "run_seed": 3,
        "resources": {"gpus": "none", "cpu_workers": args.workers, "threads_per_worker": 1},
        "data": {"source": "synthetic", "synthetic": {"features": 9, "initial_rows": args.rows, "pool_rows": 0,
                                                      "holdout_rows": 1000}},
        "members": {"defaults": C.member_defaults(1000000, 32), "count": args.workers},
        "mutation": {"policy": "none"},
        "rounds": {"count": 1},
    }
    if packs:
        cfg["pack_size"] = 1  # one member per task: all 8 workers train
    d = C.Daemon(C.write_config(work, cfg), os.path.join(work, "ensembled.log"))
    result = None
    try:
        deadline = time.monotonic() + 120
        workers = []
        while time.monotonic() < deadline:
            if d.proc.poll() is not None:
                sys.exit("ensembled exited early (%s); see %s" % (d.proc.returncode, work))
            kids = C.children_of(d.pid)
            workers = [k for k in kids if has_train_mapping(k)]
            if len(workers) == args.workers:
                break
            time.sleep(0.25)
        else:
            sys.exit("not all %d workers mapped train.bin within 120 s" % args.workers)
        time.sleep(3)  # past the first epoch's start everywhere
        t_ready = time.monotonic() - d.t_start
        a = snapshot(d.pid, workers)
        done_before = sum(1 for _, line in d.lines if " done " in line)
        time.sleep(args.window)
        b = snapshot(d.pid, workers)
        done_after = sum(1 for _, line in d.lines if " done " in line)
        same_workers = sorted(C.children_of(d.pid)) == sorted(workers)
        dt = b["t"] - a["t"]
        sup_ticks = (b["sup_ticks"] - a["sup_ticks"]) / TCK
        sup_ns = (b["sup_ns"] - a["sup_ns"]) / 1e9
        w_cpu = {w: (b["workers_ns"][w] - a["workers_ns"].get(w, 0)) / 1e9 for w in workers}
        vol = b["sup_ctx"][0] - a["sup_ctx"][0]
        invol = b["sup_ctx"][1] - a["sup_ctx"][1]
        result = {"window_seconds": dt, "ready_after_launch_s": t_ready,
                  "supervisor_cpu_seconds_ticks": sup_ticks, "supervisor_cpu_seconds_schedstat": sup_ns,
                  "supervisor_cpu_pct_of_core_ticks": 100 * sup_ticks / dt,
                  "supervisor_cpu_pct_of_core": 100 * sup_ns / dt,
                  "supervisor_wakeups_per_s": (vol + invol) / dt, "supervisor_voluntary_ctx": vol,
                  "supervisor_involuntary_ctx": invol,
                  "workers_cpu_seconds": sum(w_cpu.values()), "workers_cores_busy": sum(w_cpu.values()) / dt,
                  "per_worker_cpu_seconds": sorted(w_cpu.values()),
                  "members_done_in_window": done_after - done_before, "workers_unchanged": same_workers}
    finally:
        rc = d.stop(twice=True)
        if not args.keep:
            C.rmtree(work)
    result["exit_code_after_stop"] = rc
    print("\nsupervisor CPU: %d CPU workers x 1 thread training 8 members (seed-000 model, %d rows), "
          "window %.1f s" % (args.workers, args.rows, result["window_seconds"]))
    C.print_table(["what", "value"], [
        ["supervisor CPU, % of one core (schedstat)", "%.3f %%" % result["supervisor_cpu_pct_of_core"]],
        ["supervisor CPU, % of one core (stat ticks)", "%.3f %%" % result["supervisor_cpu_pct_of_core_ticks"]],
        ["supervisor CPU seconds in window", "%.4f" % result["supervisor_cpu_seconds_schedstat"]],
        ["supervisor wake-ups / s (ctx switches)", "%.1f" % result["supervisor_wakeups_per_s"]],
        ["workers' CPU, cores busy (of %d)" % (os.cpu_count() or 0), "%.2f" % result["workers_cores_busy"]],
        ["min / max worker CPU s in window", "%.1f / %.1f" % (min(result["per_worker_cpu_seconds"]),
                                                             max(result["per_worker_cpu_seconds"]))],
        ["members finished inside window", str(result["members_done_in_window"])],
        ["same 8 worker pids at end", str(result["workers_unchanged"])],
    ])
    ok = result["supervisor_cpu_pct_of_core"] <= 1.0
    print("goal supervisor CPU <= 1%% of one core: %s (%.3f %%)" % ("MET" if ok else "NOT MET",
                                                                  result["supervisor_cpu_pct_of_core"]))
    C.write_result("supervisor_cpu", {"machine": info, "args": vars(args), "pack_size_1_set": packs,
                                      "result": result})


if __name__ == "__main__":
    main()
