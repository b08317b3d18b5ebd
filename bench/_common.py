"""Shared helpers for the ensembled benchmarks (stdlib only, plus numpy where noted).

Nothing here imports tensorflow or torch: the baseline children do that themselves
(bench/_baselines.py).
"""
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# ENSEMBLED_BUILD: the folder of the ensembled binaries under test (default: this checkout's build/).
BUILD = os.environ.get("ENSEMBLED_BUILD", os.path.join(REPO, "build"))
ENSEMBLED = os.path.join(BUILD, "ensembled")
WORKER = os.path.join(BUILD, "ensemble-worker")
RESULTS_DIR = os.path.join(REPO, "bench", "results")
BENCH_VENV = os.environ.get("BENCH_VENV", os.path.expanduser("~/.cache/ensembled/bench-venv"))
BENCH_PY = os.path.join(BENCH_VENV, "bin", "python")
SEGMENT_HEADER_BYTES = 4096


def ensure_numpy():
    """Re-executes the calling script under a python that has numpy (the bench venv, else
    ensembled's venv) when the current one lacks it (Debian's python3 has none)."""
    try:
        import numpy  # noqa: F401
        return
    except ImportError:
        pass
    for py in (BENCH_PY, os.path.expanduser("~/.cache/ensembled/venv/bin/python")):
        venv = os.path.dirname(os.path.dirname(py))
        if os.path.exists(py) and os.path.abspath(sys.prefix) != os.path.abspath(venv):
            os.execv(py, [py] + sys.argv)
    sys.exit("numpy is needed: run bench/setup_baselines.sh")


def wait_for_binaries(paths=(ENSEMBLED, WORKER), timeout_s=300):
    """build/ is rebuilt by someone else from time to time: wait until the binaries exist."""
    deadline = time.time() + timeout_s
    while True:
        missing = [p for p in paths if not (os.path.isfile(p) and os.access(p, os.X_OK))]
        if not missing:
            time.sleep(0.5)  # a binary being linked right now: give it a moment
            if all(os.path.isfile(p) for p in paths):
                return
        if time.time() > deadline:
            sys.exit("binaries missing for %ds: %s" % (timeout_s, missing))
        time.sleep(3)


def machine_info():
    info = {"utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "nproc": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    for b in (ENSEMBLED, WORKER):
        try:
            info["mtime_" + os.path.basename(b)] = datetime.datetime.fromtimestamp(
                os.path.getmtime(b), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        except OSError:
            pass
    try:
        info["loadavg_at_start"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    return info


def run_baseline(spec, work, name, timeout_s):
    """Runs bench/_baselines.py (in the baselines venv) on `spec`; returns (its result, wall s).

    Exits the benchmark with the baseline's stderr when it fails.
    """
    spec_path = os.path.join(work, name + "-spec.json")
    out_path = os.path.join(work, name + "-result.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    t0 = time.monotonic()
    p = subprocess.run([BENCH_PY, os.path.join(REPO, "bench", "_baselines.py"), "--spec", spec_path,
                        "--out", out_path], capture_output=True, text=True, timeout=timeout_s)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        print(p.stderr[-4000:], file=sys.stderr)
        sys.exit("%s baseline failed (exit %d)" % (name, p.returncode))
    with open(out_path) as f:
        return json.load(f), wall


def write_result(name, result):
    """Appends one run's result to bench/results/<name>.json (a JSON list of runs)."""
    os.makedirs(RESULTS_DIR, exist_ok=True)
    path = os.path.join(RESULTS_DIR, name + ".json")
    runs = []
    if os.path.exists(path):
        try:
            with open(path) as f:
                runs = json.load(f)
            if not isinstance(runs, list):
                runs = [runs]
        except (OSError, ValueError):
            runs = []
    runs.append(result)
    with open(path + ".tmp", "w") as f:
        json.dump(runs, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print("results appended to", os.path.relpath(path, REPO))


def print_table(headers, rows):
    cells = [[str(h) for h in headers]] + [[c if isinstance(c, str) else fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, r in enumerate(cells):
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        if v == 0:
            return "0"
        a = abs(v)
        if a >= 100:
            return "%.1f" % v
        if a >= 1:
            return "%.3f" % v
        if a >= 0.001:
            return "%.4f" % v
        return "%.2e" % v
    return str(v)


def member_defaults(epochs, batch_size, validation_split=0.2):
    """The seed-000 model: 9 -> 6 sigmoid -> 1 linear, Huber(0.35), Adam(1e-3), L1L2(1e-5, 1e-4)."""
    return {
        "layers": [{"units": 6, "activation": "sigmoid"}],
        "initializer": "glorot_uniform",
        "l1": 1e-5,
        "l2": 1e-4,
        "loss": "huber",
        "huber_delta": 0.35,
        "optimizer": "adam",
        "lr": 0.001,
        "epochs": epochs,
        "batch_size": batch_size,
        "early_stopping": {"enabled": False},
        "split": "random",
        "validation_split": validation_split,
    }


CTL = os.path.join(BUILD, "ensemblectl")


def supports_pack_size():
    """True when the ensembled under test knows the top-level config key "pack_size" (a packed
    mode: several members fused into one batched model per task). Checked with
    `ensemblectl validate-config` on a minimal config, with and without the key."""
    wait_for_binaries((ENSEMBLED, WORKER, CTL))
    d = tempfile.mkdtemp(prefix="bench-probe-")
    try:
        base = {"state_dir": os.path.join(d, "s"), "members": {"defaults": {"layers": [{"units": 2}]}, "count": 1}}
        ok = []
        for extra in ({}, {"pack_size": 1}):
            path = os.path.join(d, "c.json")
            with open(path, "w") as f:
                json.dump(dict(base, **extra), f)
            ok.append(subprocess.run([CTL, "validate-config", path], capture_output=True).returncode == 0)
        return ok[0] and ok[1]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def write_config(directory, cfg):
    path = os.path.join(directory, "config.json")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
    return path


def run_to_end(cfg, work, name, timeout_s=1800):
    """Writes cfg to <work>/<name>.json and runs `ensembled run` on it to its end. Returns the
    wall seconds and the run's journal records; exits the script when the run fails."""
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    t0 = time.monotonic()
    p = subprocess.run([ENSEMBLED, "run", "--config", path], capture_output=True, text=True, timeout=timeout_s)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        print(p.stderr[-4000:], file=sys.stderr)
        sys.exit("%s run failed (exit %d)" % (name, p.returncode))
    return wall, journal(cfg["state_dir"])


class Daemon:
    """`ensembled run --config ...` with every stdout line timestamped on arrival. `ensembled` and
    `worker` (default: the one beside ensembled) pick other binaries, e.g. an older build's
    ensembled for a before/after."""

    def __init__(self, config_path, log_path, ensembled=ENSEMBLED, worker=None):
        wait_for_binaries((ensembled, worker or WORKER))  # build/ may be mid-rebuild
        self.lines = []  # (monotonic time, line)
        self.log = open(log_path, "w")
        self.t_start = time.monotonic()
        argv = [ensembled, "run", "--config", config_path] + (["--worker", worker] if worker else [])
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        self.pid = self.proc.pid
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))
            self.log.write(line)
            self.log.flush()

    def wait(self, timeout=None):
        rc = self.proc.wait(timeout=timeout)
        self.t_end = time.monotonic()
        self._reader.join(timeout=5)
        return rc

    def stop(self, twice=True):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            if twice:
                time.sleep(0.3)
                if self.proc.poll() is None:
                    self.proc.send_signal(signal.SIGTERM)
        try:
            return self.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # our own child, by pid
            return self.wait()


class Serve:
    """`ensembled serve` in <work> with `cpu_workers` CPU worker slots and no GPU: its runs_dir
    (<work>/runs.d), state_root (<work>/state), socket and log (<work>/daemon.log). Returns once
    its socket exists; exits the script when it does not start within 30 s."""

    def __init__(self, work, cpu_workers):
        self.runs_dir, self.state_root = os.path.join(work, "runs.d"), os.path.join(work, "state")
        os.makedirs(self.runs_dir)
        socket = os.path.join(work, "serve.sock")
        config = os.path.join(work, "serve.json")
        with open(config, "w") as f:
            json.dump({"runs_dir": self.runs_dir, "state_root": self.state_root,
                       "resources": {"gpus": "none", "cpu_workers": cpu_workers},
                       "service": {"control_socket": socket}}, f)
        self.log_path = os.path.join(work, "daemon.log")
        self.proc = subprocess.Popen([ENSEMBLED, "serve", "--config", config], stdout=open(self.log_path, "w"),
                                     stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 30
        while not os.path.exists(socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit("ensembled serve did not start; see %s" % self.log_path)
            time.sleep(0.05)

    def stop(self):
        """SIGTERM (our own child), then its exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout=60)


def children_of(pid):
    """Direct children of pid (from /proc/<pid>/task/*/children)."""
    kids = set()
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                    kids.update(int(x) for x in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return sorted(kids)


def cpu_ticks(pid):
    """utime + stime of pid in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def sched_ns(pid):
    """CPU time of all threads of pid in ns (/proc/<pid>/schedstat covers the main thread only,
    so sum the tasks)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def journal(state_dir):
    recs = []
    with open(os.path.join(state_dir, "journal.jsonl")) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
    return recs


def read_segment(path):
    """A dataset segment (common/state/dataset_segment.h) as a float32 array [rows, features + 1]."""
    import numpy as np
    hdr = np.fromfile(path, dtype=np.uint8, count=64)
    rows = int(hdr[24:32].view(np.uint64)[0])
    features = int(hdr[40:44].view(np.uint32)[0])
    data = np.fromfile(path, dtype=np.float32, count=rows * (features + 1), offset=SEGMENT_HEADER_BYTES)
    return data.reshape(rows, features + 1)


def tempdir(prefix):
    base = os.environ.get("BENCH_TMP", tempfile.gettempdir())
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def rmtree(path):
    shutil.rmtree(path, ignore_errors=True)


def keep_or_remove(work, keep):
    """A benchmark's temporary directory at its end: kept (and named) with --keep, else removed."""
    if keep:
        print("kept", work)
    else:
        rmtree(work)
