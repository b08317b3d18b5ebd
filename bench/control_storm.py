#!/usr/bin/env python3
"""No client can stall `ensembled serve` (issue 53): a storm of hostile local clients against a
serve daemon that has a run training, with the daemon's own answers timed meanwhile.

The daemon: `ensembled serve` with 2 CPU worker slots, its HTTP endpoint on a free loopback port,
and systemd's watchdog emulated (NOTIFY_SOCKET: a datagram socket of this script's,
WATCHDOG_USEC 2 s: the daemon pings every ~1 s). A run (4 seed-000 members, 300 epochs, 2 rounds)
trains through the whole storm. The storm's clients run as another user (nobody, when this
script runs as root) than the one who asks, as on a shared server. Phases, one after another,
each held while 50 `ensemblectl list`
and 50 GET /metrics are timed and a run config is dropped into runs_dir (the delay to its
"queued run" log line is measured):
  silent      1,000 control connections that send nothing
  slow        1,000 control connections that send a byte every 100 ms, never a whole line
  slow_http   1,000 HTTP connections that send half a request line and wait
  garbage     200 connections of random bytes and a newline, 10 lines of 2 MiB
  churn       10,000 control connect-and-close, as fast as this script can
Then the trained run's members are compared, checkpoint and predictions, with the same config
run undisturbed by `ensembled run`.
Targets: list <= 100 ms and /metrics <= 200 ms at worst, a dropped run queued within 1 s, no
watchdog ping late (a gap over 2 s would be: systemd kills at WATCHDOG_USEC), members bitwise.

Usage: bench/control_storm.py [--keep]     Writes bench/results/control_storm.json.
"""
import argparse
import json
import os
import random
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import member_files as MF  # noqa: E402  (a member's files in either results_layout)

WATCHDOG_USEC = 2_000_000


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_config(name, state_dir=None):
    cfg = {"run_name": name, "run_seed": 5,
           "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
           "data": {"source": "synthetic", "synthetic": {"features": 9, "initial_rows": 400, "pool_rows": 0,
                                                         "holdout_rows": 100}},
           "members": {"defaults": C.member_defaults(300, 32), "count": 4},
           "mutation": {"policy": "none"}, "rounds": {"count": 2}}
    if state_dir:
        cfg["state_dir"] = state_dir
    return cfg


class Watchdog:
    """The datagram socket systemd would listen on: the times of the daemon's WATCHDOG=1."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.pings, self.stop = [], False
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        while not self.stop:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            if b"WATCHDOG=1" in data:
                self.pings.append(time.monotonic())


def timed_list(sock_path):
    t0 = time.monotonic()
    r = subprocess.run([C.CTL, "list", "--socket", sock_path], capture_output=True, text=True, timeout=30)
    return (time.monotonic() - t0) * 1000, r.returncode


def timed_metrics(port):
    t0 = time.monotonic()
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read()
        ok = True
    except Exception:
        ok = False
    return (time.monotonic() - t0) * 1000, ok


def unix_client(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(path)
    except (BlockingIOError, ConnectionRefusedError, OSError):
        pass
    return s


def tcp_client(port):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except (BlockingIOError, OSError):
        pass
    return s


def queued_delay(runs_dir, log_path, name):
    """Drops run config `name` into runs_dir; seconds until the daemon logs it queued."""
    cfg = run_config(name)
    cfg["members"]["defaults"]["epochs"] = 1
    tmp = os.path.join(runs_dir, "." + name + ".json")
    with open(tmp, "w") as f:
        json.dump(cfg, f)
    t0 = time.time()
    os.rename(tmp, os.path.join(runs_dir, name + ".json"))
    needle = "queued run " + name + " "
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(log_path, errors="replace") as f:
            for line in f:
                if needle in line:
                    ts = time.mktime(time.strptime(line[1:20], "%Y-%m-%d %H:%M:%S")) + float("0" + line[20:24])
                    return max(0.0, ts - t0)
        time.sleep(0.02)
    return None


def measure(phase, sock_path, port, runs_dir, log_path, hold, as_uid):
    """50 list and 50 /metrics calls, and one dropped run, while `hold` keeps its clients busy in
    a child process of uid `as_uid` (another user than the one who asks: the daemon bounds
    connections per uid, so one user's storm must not refuse another's ensemblectl)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the storm's own process
        os.close(w)
        try:
            if as_uid is not None:
                os.setgroups([])
                os.setgid(as_uid)
                os.setuid(as_uid)
            stop = threading.Event()
            threading.Thread(target=lambda: (os.read(r, 1), stop.set()), daemon=True).start()
            hold(stop)
        finally:
            os._exit(0)
    os.close(r)
    time.sleep(1.5)  # the storm in place
    lists = [timed_list(sock_path) for _ in range(50)]
    metrics = [timed_metrics(port) for _ in range(50)]
    delay = queued_delay(runs_dir, log_path, "dropped-" + phase)
    os.close(w)
    os.waitpid(pid, 0)
    lv, mv = [t for t, _ in lists], [t for t, _ in metrics]
    return {"phase": phase, "list_ms_median": statistics.median(lv), "list_ms_worst": max(lv),
            "list_failures": sum(rc != 0 for _, rc in lists), "metrics_ms_median": statistics.median(mv),
            "metrics_ms_worst": max(mv), "metrics_failures": sum(not ok for _, ok in metrics),
            "dropped_run_queued_s": delay}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    C.wait_for_binaries()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 20000), hard))
    work = C.tempdir("bench-control-storm-")
    runs_dir, state_root = os.path.join(work, "runs.d"), os.path.join(work, "state")
    os.makedirs(runs_dir)
    sock_path, port = os.path.join(work, "serve.sock"), free_port()
    config = os.path.join(work, "serve.json")
    json.dump({"runs_dir": runs_dir, "state_root": state_root, "resources": {"gpus": "none", "cpu_workers": 2},
               "service": {"control_socket": sock_path, "http_port": port}}, open(config, "w"))
    dog = Watchdog(os.path.join(work, "notify.sock"))
    log_path = os.path.join(work, "daemon.log")
    env = dict(os.environ, NOTIFY_SOCKET=os.path.join(work, "notify.sock"), WATCHDOG_USEC=str(WATCHDOG_USEC))
    env.pop("WATCHDOG_PID", None)
    proc = subprocess.Popen([C.ENSEMBLED, "serve", "--config", config], stdout=open(log_path, "w"),
                            stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 30
    while not os.path.exists(sock_path):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit("ensembled serve did not start; see " + log_path)
        time.sleep(0.05)
    with open(os.path.join(runs_dir, "trained.json"), "w") as f:
        json.dump(run_config("trained"), f)
    while "started run trained" not in open(log_path, errors="replace").read():
        time.sleep(0.1)
    t_storm = time.monotonic()

    def hold_silent(stop):
        conns = [unix_client(sock_path) for _ in range(1000)]
        stop.wait()
        for s in conns:
            s.close()

    def hold_slow(stop):
        conns = [unix_client(sock_path) for _ in range(1000)]
        while not stop.wait(0.1):
            for i, s in enumerate(conns):
                try:
                    s.send(b"{")
                except OSError:
                    conns[i] = unix_client(sock_path)  # dropped at its deadline: another comes
        for s in conns:
            s.close()

    def hold_slow_http(stop):
        conns = [tcp_client(port) for _ in range(1000)]
        time.sleep(0.2)
        for s in conns:
            try:
                s.send(b"GET /metr")
            except OSError:
                pass
        stop.wait()
        for s in conns:
            s.close()

    def hold_garbage(stop):
        rng = random.Random(7)
        while not stop.is_set():
            conns = []
            for _ in range(200):
                s = unix_client(sock_path)
                try:
                    s.send(bytes(rng.randrange(256) for _ in range(64)) + b"\n")
                except OSError:
                    pass
                conns.append(s)
            for _ in range(10):
                s = unix_client(sock_path)
                s.setblocking(True)
                s.settimeout(2)
                try:
                    s.sendall(b"x" * (2 << 20))
                except OSError:
                    pass
                conns.append(s)
            for s in conns:
                s.close()

    def hold_churn(stop):
        n = 0
        while not stop.is_set() and n < 10000:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(sock_path)
            except OSError:
                pass
            s.close()
            n += 1
        stop.wait()

    # The storm comes from another user (nobody) than the one who asks; the socket is opened to
    # every user for that (a served daemon's is its group's, mode 0660).
    os.chmod(sock_path, 0o666)
    os.chmod(work, 0o755)
    phases = []
    for name, hold in (("silent", hold_silent), ("slow", hold_slow), ("slow_http", hold_slow_http),
                       ("garbage", hold_garbage), ("churn", hold_churn)):
        phases.append(measure(name, sock_path, port, runs_dir, log_path, hold, 65534 if os.geteuid() == 0 else None))
        print(json.dumps(phases[-1]), file=sys.stderr)
    t_end = time.monotonic()
    # The trained run to its end, then the daemon stopped.
    done = os.path.join(state_root, "trained", "journal.jsonl")
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline and not (os.path.exists(done) and '"run_finished"' in open(done).read()):
        time.sleep(0.5)
    proc.terminate()
    proc.wait(timeout=120)
    dog.stop = True
    gaps = [b - a for a, b in zip(dog.pings, dog.pings[1:]) if a >= t_storm - 2 and b <= t_end + 2]
    # The same run undisturbed.
    alone = os.path.join(work, "alone")
    C.run_to_end(run_config("trained", alone), work, "alone")
    equal, compared = 0, 0
    for r in (0, 1):
        for m in ("m000", "m001", "m002", "m003"):
            a_round = os.path.join(state_root, "trained", "rounds", f"r{r:04d}")
            b_round = os.path.join(alone, "rounds", f"r{r:04d}")
            a_dir, b_dir = os.path.join(a_round, "members", m), os.path.join(b_round, "members", m)
            compared += 1
            same_pred = MF.member_bytes(a_round, m, "holdout_pred.f32") == MF.member_bytes(b_round, m, "holdout_pred.f32")
            cmp = subprocess.run([C.WORKER, "compare", a_dir, b_dir], capture_output=True)  # each one's checkpoint
            equal += same_pred and cmp.returncode == 0
    result = {"machine": C.machine_info(), "command": "bench/control_storm.py", "phases": phases,
              "watchdog_usec": WATCHDOG_USEC, "watchdog_pings_during_storm": len(gaps) + 1 if gaps else 0,
              "watchdog_gap_s_worst": max(gaps) if gaps else None, "members_bitwise_equal": equal,
              "members_compared": compared}
    rows = [[p["phase"], "%.1f" % p["list_ms_median"], "%.1f" % p["list_ms_worst"], p["list_failures"],
             "%.1f" % p["metrics_ms_median"], "%.1f" % p["metrics_ms_worst"], p["metrics_failures"],
             "%.3f" % p["dropped_run_queued_s"] if p["dropped_run_queued_s"] is not None else "never"] for p in phases]
    C.print_table(["phase", "list med ms", "list worst ms", "list fails", "/metrics med ms", "/metrics worst ms",
                   "metrics fails", "dropped run queued s"], rows)
    print(f"watchdog: {result['watchdog_pings_during_storm']} pings during the storm, worst gap "
          f"{result['watchdog_gap_s_worst']:.2f} s (WATCHDOG_USEC {WATCHDOG_USEC / 1e6:.0f} s)" if gaps else "watchdog: no pings seen")
    print(f"members bitwise equal to the undisturbed run: {equal} of {compared}")
    C.write_result("control_storm", result)
    C.keep_or_remove(work, a.keep)


if __name__ == "__main__":
    main()
