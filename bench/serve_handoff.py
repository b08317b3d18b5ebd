#!/usr/bin/env python3
"""`ensembled serve`: from a grant freeing to the next queued run's first worker.

Starts `ensembled serve` with 1 CPU worker slot (resources.gpus "none", cpu_workers 1) and, per
repetition, drops two tiny runs into its runs_dir together, each asking 1 CPU worker: the
second waits ("needs 1 CPU worker, 0 free") until the first's `ensembled run` exits. Measured
per repetition, all on CLOCK_BOOTTIME (the clock of /proc/<pid>/stat's start times):
  exit          the first run's `ensembled run` exiting: a pidfd (pidfd_open) on it, polled by
                this script every 2 ms, or the daemon's reap when that was logged earlier
  reaped        the daemon's log line "run A: `ensembled run` exited ..." (ms timestamps)
  started       the daemon's log line "started run B"
  run process   the second run's `ensembled run` process start (/proc/<pid>/stat: 10 ms ticks,
                truncated, so up to 10 ms early; it may show before "started", logged after exec)
  first worker  that run's first ensemble-worker process start (/proc/<pid>/stat)
  worker ready  the daemon's copy of that run's "all 1 workers ready" line (libtorch loaded)
The issue's goal: exit -> first worker <= 1 s plus worker start (exit -> worker ready).

Usage: bench/serve_handoff.py [--reps 5] [--keep]
"""
import argparse
import datetime
import json
import os
import re
import select
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

TCK = os.sysconf("SC_CLK_TCK")
BOOT = time.CLOCK_BOOTTIME
LOG_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\] ")


def boottime():
    return time.clock_gettime(BOOT)


def wall_to_boot():
    """Offset to add to a wall-clock time (the daemon's log) for CLOCK_BOOTTIME."""
    return boottime() - time.time()


def start_time(pid):
    """A process's start on CLOCK_BOOTTIME (10 ms resolution), or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    return int(s[s.rindex(")") + 2:].split()[19]) / TCK


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def run_config(name):
    return {"run_name": name, "run_seed": 11,
            "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
            "data": {"source": "synthetic", "synthetic": {"initial_rows": 200, "pool_rows": 0, "holdout_rows": 100}},
            "members": {"defaults": C.member_defaults(2, 32), "count": 1},
            "mutation": {"policy": "none"}, "pack_size": 1, "rounds": {"count": 1}}


def daemon_log_times(path, offset):
    """(boottime, message) of each line of the daemon's log."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LOG_TS.match(line)
            if not m:
                continue
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
            out.append((t + offset, line.rstrip("\n")))
    return out


def first(lines, needle):
    for t, line in lines:
        if needle in line:
            return t
    return None


def finished(state_root, name):
    try:
        with open(os.path.join(state_root, name, "journal.jsonl"), errors="replace") as f:
            return any('"run_finished"' in line for line in f)
    except OSError:
        return False


def one_pair(rep, runs_dir, daemon_pid, state_root, timeout_s=120):
    a, b = "h%da" % rep, "h%db" % rep
    for name in (a, b):  # written hidden, then renamed: both appear within a few microseconds
        tmp = os.path.join(runs_dir, "." + name + ".json")
        with open(tmp, "w") as f:
            json.dump(run_config(name), f)
    for name in (a, b):
        os.rename(os.path.join(runs_dir, "." + name + ".json"), os.path.join(runs_dir, name + ".json"))
    procs = {}    # run name -> pid of its `ensembled run`
    starts = {}   # pid -> start (boottime)
    workers = {}  # run name -> [(start, pid)]
    pidfd, exit_at = None, None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pid in C.children_of(daemon_pid):
            args = cmdline(pid)
            if pid not in starts and len(args) >= 4 and args[1] == b"run":
                t = start_time(pid)
                if t is None:
                    continue
                starts[pid] = t
                name = os.path.basename(args[3].decode()).rsplit(".", 1)[0]
                procs[name] = pid
        for name, pid in list(procs.items()):
            for w in C.children_of(pid):
                if w not in starts:
                    t = start_time(w)
                    if t is not None:
                        starts[w] = t
                        workers.setdefault(name, []).append((t, w))
        if pidfd is None and a in procs:
            try:
                pidfd = os.pidfd_open(procs[a])
            except ProcessLookupError:  # already gone: the exit time is lost for this pair
                pidfd = -1
        if pidfd is not None and pidfd >= 0 and exit_at is None:
            if select.select([pidfd], [], [], 0.002)[0]:
                exit_at = boottime()
                os.close(pidfd)
        else:
            time.sleep(0.002)
        if exit_at is not None and b in workers and finished(state_root, a) and finished(state_root, b):
            break
    else:
        sys.exit("repetition %d did not finish within %d s" % (rep, timeout_s))
    return {"a": a, "b": b, "exit": exit_at, "b_process": starts.get(procs.get(b)),
            "b_first_worker": min(workers[b])[0] if b in workers else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    C.wait_for_binaries()
    info = C.machine_info()
    work = C.tempdir("bench-handoff-")
    d = C.Serve(work, cpu_workers=1)
    runs_dir, state_root, log_path = d.runs_dir, d.state_root, d.log_path
    pairs = []
    try:
        for rep in range(1, args.reps + 1):
            pairs.append(one_pair(rep, runs_dir, d.pid, state_root))
    finally:
        rc = d.stop()
    offset = wall_to_boot()
    lines = daemon_log_times(log_path, offset)
    rows, results = [], []
    for p in pairs:
        reaped = first(lines, "run %s: `ensembled run` exited" % p["a"])
        started = first(lines, "started run %s " % p["b"])
        ready = next((t for t, line in lines if ("[run %s] " % p["b"]) in line and "workers ready" in line), None)
        r = {"run": p["a"] + " -> " + p["b"], "exit_to_reaped_ms": None, "exit_to_started_ms": None,
             "exit_to_run_process_ms": None, "exit_to_first_worker_ms": None, "exit_to_worker_ready_ms": None}
        if p["exit"] is not None:
            # The script polls the pidfd among other things on a busy machine: when the daemon's
            # reap is logged earlier than the script saw the exit, the reap is the exit's time.
            exit_at = min(p["exit"], reaped) if reaped is not None else p["exit"]
            ms = lambda t: None if t is None else round(1000 * (t - exit_at), 1)  # noqa: E731
            r.update(exit_to_reaped_ms=ms(reaped), exit_to_started_ms=ms(started),
                     exit_to_run_process_ms=ms(p["b_process"]), exit_to_first_worker_ms=ms(p["b_first_worker"]),
                     exit_to_worker_ready_ms=ms(ready))
        results.append(r)
        rows.append([r["run"]] + ["n/a" if r[k] is None else "%.0f" % r[k] for k in
                                  ("exit_to_reaped_ms", "exit_to_started_ms", "exit_to_run_process_ms",
                                   "exit_to_first_worker_ms", "exit_to_worker_ready_ms")])
    print("\nserve hand-off: 1 CPU worker slot, two 1-worker runs per repetition; ms after the first "
          "run's `ensembled run` exited (pidfd or the daemon's reap; process starts: 10 ms ticks)")
    C.print_table(["pair", "reaped", "next started", "its process", "its first worker", "worker ready"], rows)
    firsts = sorted(r["exit_to_first_worker_ms"] for r in results if r["exit_to_first_worker_ms"] is not None)
    if firsts:
        print("exit -> first worker: median %.0f ms, max %.0f ms (goal: <= 1000 ms)" %
              (firsts[len(firsts) // 2], firsts[-1]))
    info["loadavg_at_end"] = open("/proc/loadavg").read().split()[:3]
    C.write_result("serve_handoff", {"machine": info, "reps": args.reps, "daemon_exit_code": rc, "pairs": results})
    if args.keep:
        print("kept", work)
    else:
        C.rmtree(work)


if __name__ == "__main__":
    main()
