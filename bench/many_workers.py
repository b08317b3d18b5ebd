#!/usr/bin/env python3
"""Many workers on one machine (issue 16): what a worker costs, and runs of 64 and 256 workers.

1. Per idle worker, side by side in one run: --idle workers started as the supervisor starts CPU
   workers (CUDA_VISIBLE_DEVICES="": libtorch's CPU half only) and as many with libtorch_cuda
   loaded (CUDA_VISIBLE_DEVICES unset: what every worker loaded before December, when the worker
   linked all of libtorch). Each gets a SOCK_SEQPACKET channel on fd 3, as from ensembled; after
   its "ready" message, Private_Dirty and Pss from /proc/<pid>/smaps_rollup.
2. Whole runs: `ensembled run` with N CPU workers and N tiny members (pack_size 1), for each N in
   --runs, under RLIMIT_MSGQUEUE = 800 KiB (Debian's default). Wall time, the supervisor's CPU
   seconds (last sample of /proc/<pid>/stat), and the sum of the workers' Private_Dirty at its
   largest sample.

Usage: bench/many_workers.py [--idle 8] [--runs 64,256]
"""
import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

TCK = os.sysconf("SC_CLK_TCK")
QUEUE_BUDGET = 819200


def rollup(pid):
    out = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Pss", "Private_Dirty", "Rss"):
                    out[k] = int(v.split()[0]) / 1024.0
    except OSError:
        pass
    return out


def idle_workers(n, visible):
    """n idle `ensemble-worker serve` processes; their memory once each said ready."""
    procs, ends = [], []
    env = dict(os.environ)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    for i in range(n):
        sup, wrk = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = wrk.fileno()
        p = subprocess.Popen([C.WORKER, "serve", "--run-id", "bench", "--slot", str(i), "--channel-fd", str(fd)],
                             env=env, pass_fds=[fd], stderr=subprocess.DEVNULL)
        wrk.close()
        procs.append(p)
        ends.append(sup)
    mem = []
    for p, sup in zip(procs, ends):
        sup.settimeout(120)
        msg = json.loads(sup.recv(8192))
        assert msg["type"] == "ready" and msg["pid"] == p.pid, msg
        mem.append(rollup(p.pid))
    with open("/proc/%d/maps" % procs[0].pid) as f:
        cuda_loaded = "libtorch_cuda.so" in f.read()
    for p, sup in zip(procs, ends):
        sup.close()  # end of stream: the worker exits 0
    codes = [p.wait(30) for p in procs]
    assert all(c == 0 for c in codes), codes
    avg = lambda k: sum(m.get(k, 0) for m in mem) / len(mem)  # noqa: E731
    return {"private_dirty_mib": avg("Private_Dirty"), "pss_mib": avg("Pss"), "rss_mib": avg("Rss"),
            "libtorch_cuda_loaded": cuda_loaded}


def config(work, n):
    return {"run_name": "many%d" % n, "state_dir": os.path.join(work, "s%d" % n), "run_seed": n,
            "resources": {"gpus": "none", "cpu_workers": n, "threads_per_worker": 1},
            "data": {"synthetic": {"initial_rows": 200, "pool_rows": 40, "holdout_rows": 40}},
            "members": {"defaults": {"epochs": 2, "batch_size": 32, "layers": [{"units": 8}]}, "count": n},
            "pack_size": 1, "rounds": {"count": 1}}


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TCK
    except (OSError, IndexError):
        return None


def whole_run(work, n):
    cfg = os.path.join(work, "c%d.json" % n)
    with open(cfg, "w") as f:
        json.dump(config(work, n), f)
    limit = lambda: resource.setrlimit(resource.RLIMIT_MSGQUEUE, (QUEUE_BUDGET, QUEUE_BUDGET))  # noqa: E731
    t0 = time.time()
    p = subprocess.Popen([C.ENSEMBLED, "run", "--config", cfg], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=limit, text=True)
    sup_cpu, peak_private, peak_workers = 0.0, 0.0, 0
    while p.poll() is None:
        c = cpu_seconds(p.pid)
        if c is not None:
            sup_cpu = c
        kids = children(p.pid)
        total = sum(rollup(k).get("Private_Dirty", 0) for k in kids)
        if total > peak_private:
            peak_private, peak_workers = total, len(kids)
        time.sleep(0.5)
    out, err = p.communicate()
    wall = time.time() - t0
    if p.returncode != 0:
        print(out, err[-3000:], file=sys.stderr)
        sys.exit("run of %d workers failed: exit %d" % (n, p.returncode))
    return {"workers": n, "wall_s": wall, "supervisor_cpu_s": sup_cpu, "peak_workers_private_mib": peak_private,
            "workers_at_peak": peak_workers}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle", type=int, default=8)
    ap.add_argument("--runs", default="64,256")
    a = ap.parse_args()
    C.wait_for_binaries()
    print("machine:", C.machine_info())
    cpu = idle_workers(a.idle, "")
    with_cuda = idle_workers(a.idle, None)
    print("\nidle worker (mean of %d each), MiB" % a.idle)
    C.print_table(["worker", "libtorch_cuda", "Private_Dirty", "Pss", "Rss"],
                  [[name, str(m["libtorch_cuda_loaded"]), m["private_dirty_mib"], m["pss_mib"], m["rss_mib"]]
                   for name, m in (("CPU worker (now)", cpu), ("CUDA loaded (all workers before)", with_cuda))])
    print("ratio CPU worker / CUDA loaded, Private_Dirty: %.3f" % (cpu["private_dirty_mib"] / with_cuda["private_dirty_mib"]))
    runs = []
    with tempfile.TemporaryDirectory(prefix="ens-many-") as work:
        for n in [int(x) for x in a.runs.split(",") if x]:
            runs.append(whole_run(work, n))
    print("\nwhole runs under RLIMIT_MSGQUEUE %d bytes" % QUEUE_BUDGET)
    C.print_table(["workers", "wall s", "supervisor CPU s", "peak workers Private_Dirty MiB", "at workers"],
                  [[r["workers"], r["wall_s"], r["supervisor_cpu_s"], r["peak_workers_private_mib"],
                    r["workers_at_peak"]] for r in runs])
    C.write_result("many_workers", {"machine": C.machine_info(), "idle": a.idle, "idle_cpu_worker": cpu,
                                    "idle_cuda_loaded": with_cuda, "runs": runs})


if __name__ == "__main__":
    main()
