#!/usr/bin/env python3
"""Long-run soak: does the supervisor's per-round cost stay flat over thousands of rounds?

Runs `ensembled run` for --rounds tiny rounds (default 10,000): 4 members of a 2-unit MLP, 1
epoch, batch 1024, no checkpoints; 2 CPU workers (1 thread each), pack_size 1 (each member its
own task, so both workers train); synthetic data of 5 features, 40 initial rows, 40 holdout
rows; mutation append_from_pool with k = 2 from a pool of 2 x rounds + 100 rows (never runs
dry). Then, per round r (from the journal and the daemon's stdout):

  members(r)          = max over worker slots of the summed "seconds" of the members that slot
                        trained in round r (the members' own time on the busiest worker)
  overhead(r)         = round_committed.wall_seconds - members(r): the round's time that is not
                        a member training (dispatch, reports, journal, status.json, ...); the
                        wall_seconds clock stops before the round's commit
  period_overhead(r)  = time between the "round r-1 committed" and "round r committed" stdout
                        lines - members(r): the same with the commit's work (summary, mutation,
                        journal append, progress update) included

  supervisor_cpu      the supervisor's own CPU time (all its threads, /proc schedstat) per round,
                        sampled every 0.25 s against the rounds committed so far: what the
                        supervisor itself spends, which other work on the machine does not inflate
                        (the two above are wall times, and a busy 2-core machine stretches them)

It prints the medians of rounds 100-199 and of the last 100 rounds and their ratio (for
supervisor_cpu: the CPU per round over those two windows), the supervisor's RSS at the start and
end, and status.json's size at the end, and appends the result to bench/results/long_run_soak.json.
Goal: the last 100 rounds' overhead within 10 % of rounds 100-199.
With --keep-rounds N the run has a retention policy (config retention.keep_rounds N, issue 34
item 5); either way it prints the state directory's size at the end (as `ensemblectl status
--json` gives it, and the members' prediction files' share of it).

Usage: bench/long_run_soak.py [--rounds 10000] [--build build] [--label after] [--keep-rounds N] [--keep]
  --build DIR   the ensembled under test (DIR/ensembled); the worker is build/'s unless --worker
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

COMMITTED = re.compile(r"^round (\d+) committed:")


def config(state, rounds, keep_rounds=0):
    cfg = {
        "run_name": "long-run-soak", "state_dir": state, "run_seed": 5,
        "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
        "data": {"source": "synthetic", "synthetic": {"features": 5, "initial_rows": 40, "holdout_rows": 40,
                                                      "pool_rows": 2 * rounds + 100}},
        "members": {"defaults": dict(C.member_defaults(1, 1024), layers=[{"units": 2, "activation": "tanh"}]),
                    "count": 4},
        "mutation": {"policy": "append_from_pool", "k": 2},
        "rounds": {"count": rounds},
        "pack_size": 1,
        "save_checkpoints": False,
    }
    if keep_rounds:
        cfg["retention"] = {"keep_rounds": keep_rounds}
    return cfg


def state_sizes(state):
    """(the state directory's bytes as `ensemblectl status --json` says, bytes of *_pred.f32 files)."""
    import subprocess
    out = subprocess.run([C.CTL, "status", "--state-dir", state, "--json"], capture_output=True, text=True, check=True)
    preds = 0
    for root, _, files in os.walk(os.path.join(state, "rounds")):
        preds += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith("_pred.f32"))
    return json.loads(out.stdout)["state_dir_bytes"], preds


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def per_round(records, commit_times):
    """One row per committed round: wall, members, overhead, period_overhead (None for round 0)."""
    busiest = {}
    for r in records:
        if r.get("event") == "member_done":
            key = (r["round"], r.get("slot", 0))
            busiest[key] = busiest.get(key, 0.0) + r.get("metrics", {}).get("seconds", 0.0)
    members = {}
    for (rnd, _), s in busiest.items():
        members[rnd] = max(members.get(rnd, 0.0), s)
    rows = []
    for r in records:
        if r.get("event") != "round_committed":
            continue
        n = r["round"]
        m = members.get(n, 0.0)
        period = commit_times[n] - commit_times[n - 1] if n in commit_times and n - 1 in commit_times else None
        rows.append({"round": n, "wall": r["wall_seconds"], "members": m, "overhead": r["wall_seconds"] - m,
                     "period_overhead": None if period is None else period - m})
    return rows


def cpu_per_round(samples, first, last):
    """Supervisor CPU seconds per round over the rounds [first, last): from the last sample with
    at most `first` rounds committed to the first with at least `last`. samples: (rounds, ns)."""
    before = [x for x in samples if x[0] <= first]
    after = [x for x in samples if x[0] >= last]
    if not before or not after or after[0][0] == before[-1][0]:
        return None
    return (after[0][1] - before[-1][1]) / 1e9 / (after[0][0] - before[-1][0])


def medians(rows, key, first, last):
    early = [x[key] for x in rows if first <= x["round"] < last and x[key] is not None]
    late = [x[key] for x in rows[-100:] if x[key] is not None]
    if not early or not late:
        return None
    a, b = statistics.median(early), statistics.median(late)
    return {"rounds_100_199": a, "last_100": b, "ratio": b / a if a > 0 else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10000)
    ap.add_argument("--build", default=C.BUILD, help="directory of the ensembled under test")
    ap.add_argument("--worker", default=None, help="ensemble-worker (default: build/ensemble-worker)")
    ap.add_argument("--label", default="", help="what is measured, e.g. before/after (kept in the result)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--keep-rounds", type=int, default=0, help="retention.keep_rounds (0: keep everything)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if args.rounds < 300:
        sys.exit("--rounds must be at least 300 (rounds 100-199 and a distinct last 100)")
    ensembled = os.path.join(os.path.abspath(args.build), "ensembled")
    worker = args.worker or C.WORKER
    info = C.machine_info()
    work = C.tempdir("bench-soak-")
    state = os.path.join(work, "state")
    d = C.Daemon(C.write_config(work, config(state, args.rounds, args.keep_rounds)), os.path.join(work, "ensembled.log"),
                 ensembled=ensembled, worker=worker)
    rss, cpu, t0, seen, committed = [], [], time.monotonic(), 0, 0
    try:
        while d.proc.poll() is None and time.monotonic() - t0 < args.timeout:
            lines = len(d.lines)
            committed += sum(1 for _, line in d.lines[seen:lines] if COMMITTED.match(line))
            seen = lines
            try:
                cpu.append((committed, C.sched_ns(d.pid)))
            except OSError:
                pass
            kb = rss_kb(d.pid)
            if kb:
                rss.append(kb)
            time.sleep(0.25)
        rc = d.proc.poll()
        if rc is None:
            d.stop()
            sys.exit("timed out after %.0f s (try fewer --rounds)" % args.timeout)
        d.wait()
    except KeyboardInterrupt:
        d.stop()
        raise
    wall = d.t_end - d.t_start
    if rc != 0:
        sys.exit("ensembled exited %d; see %s" % (rc, os.path.join(work, "ensembled.log")))
    commit_times = {}
    for t, line in d.lines:
        m = COMMITTED.match(line)
        if m:
            commit_times[int(m.group(1))] = t
    rows = per_round(C.journal(state), commit_times)
    if len(rows) != args.rounds:
        sys.exit("%d rounds committed, expected %d" % (len(rows), args.rounds))
    try:
        status_bytes = os.path.getsize(os.path.join(state, "status.json"))
    except OSError:
        status_bytes = None
    state_bytes, pred_bytes = state_sizes(state)
    result = {
        "state_dir_bytes_at_end": state_bytes, "pred_file_bytes_at_end": pred_bytes,
        "bench": "long_run_soak", "label": args.label, "machine": info, "rounds": args.rounds,
        "ensembled": ensembled, "wall_seconds": wall, "config": config(state, args.rounds, args.keep_rounds),
        "overhead": medians(rows, "overhead", 100, 200),
        "period_overhead": medians(rows, "period_overhead", 100, 200),
        "members_seconds": medians(rows, "members", 100, 200),
        "supervisor_cpu": {"rounds_100_199": cpu_per_round(cpu, 100, 200),
                           "last_100": cpu_per_round(cpu, args.rounds - 101, args.rounds - 1)},
        "supervisor_rss_kb_first": rss[0] if rss else None, "supervisor_rss_kb_last": rss[-1] if rss else None,
        "status_json_bytes_at_end": status_bytes,
        "per_100_rounds_median_overhead": [statistics.median(x["overhead"] for x in rows[i:i + 100])
                                           for i in range(0, len(rows), 100)],
        "supervisor_cpu_per_tenth": [cpu_per_round(cpu, i, i + args.rounds // 10)
                                     for i in range(0, args.rounds, args.rounds // 10)],
    }
    print("%d rounds in %.0f s (%s)" % (args.rounds, wall, args.label or ensembled))
    sc = result["supervisor_cpu"]
    sc["ratio"] = sc["last_100"] / sc["rounds_100_199"] if sc["last_100"] and sc["rounds_100_199"] else None
    table = []
    for key in ("overhead", "period_overhead", "members_seconds", "supervisor_cpu"):
        m = result[key]
        if m and m["rounds_100_199"] is not None and m["last_100"] is not None:
            unit = " (ms a round)" if key == "supervisor_cpu" else " (ms, median)"
            table.append([key + unit, m["rounds_100_199"] * 1e3, m["last_100"] * 1e3,
                          "%.3f" % m["ratio"] if m["ratio"] else "n/a"])
    C.print_table(["per round", "rounds 100-199", "last 100", "ratio"], table)
    print("supervisor RSS %s -> %s KiB; status.json %s bytes at the end" %
          (result["supervisor_rss_kb_first"], result["supervisor_rss_kb_last"], status_bytes))
    print("state directory %.1f MiB at the end, of it prediction files %.1f MiB (retention.keep_rounds %s)" %
          (state_bytes / 2**20, pred_bytes / 2**20, args.keep_rounds or "0: keep everything"))
    ok = result["overhead"]["ratio"] is not None and result["overhead"]["ratio"] <= 1.10
    print("goal: last 100 rounds' median overhead within 10 %% of rounds 100-199: %s" % ("MET" if ok else "NOT MET"))
    result["machine"]["loadavg_at_end"] = open("/proc/loadavg").read().split()[:3]
    C.write_result("long_run_soak", result)
    C.keep_or_remove(work, args.keep)


if __name__ == "__main__":
    main()
