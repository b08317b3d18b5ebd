"""Fixtures of the package's tests: real state directories made by the real binaries.

The binaries are $ENSEMBLED_BUILD_DIR's (ctest sets it to the build folder), else the
clone's build/; a test that needs them is skipped when they are not there. Each run below is
made once per session in a temporary folder, by `ensembled run` on a tiny config (synthetic
data, 2 members, 2 epochs: well under a second each).
"""
import json
import os
import subprocess
import sys

import pytest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ENSEMBLED_BUILD_DIR") or os.path.join(SOURCE, "build")
sys.path.insert(0, os.path.join(SOURCE, "python"))
os.environ.setdefault("MPLBACKEND", "Agg")


def binary(name):
    return os.path.join(BUILD, name)


def tiny_config(name, state_dir=None, rounds=2, members=2, pack_size=1, extra=None):
    """tests/support/serve_harness.h TinyRunConfig's run, as a dict."""
    cfg = {"run_name": name, "run_seed": 7,
           "resources": {"gpus": "none", "cpu_workers": 2},
           "data": {"synthetic": {"initial_rows": 120, "pool_rows": 60, "holdout_rows": 60}},
           "members": {"defaults": {"epochs": 2, "batch_size": 16, "layers": [{"units": 8}]}, "count": members},
           "mutation": {"policy": "append_from_pool", "k": 10},
           "pack_size": pack_size,
           "rounds": {"count": rounds}}
    if state_dir:
        cfg["state_dir"] = str(state_dir)
    cfg.update(extra or {})
    return cfg


def run_ensembled(folder, cfg, env=None, timeout=120):
    """Writes cfg to <folder>/<run_name>.json, runs `ensembled run` on it; its state directory."""
    path = os.path.join(str(folder), cfg["run_name"] + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
    r = subprocess.run([binary("ensembled"), "run", "--config", path], cwd=str(folder), capture_output=True, text=True,
                       timeout=timeout, env=env)
    assert r.returncode == 0, "ensembled run %s exited %d:\n%s%s" % (path, r.returncode, r.stdout, r.stderr)
    return cfg["state_dir"]


def ctl(*args, **kw):
    """`ensemblectl ARGS`: the CompletedProcess (text)."""
    return subprocess.run([binary("ensemblectl")] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=60, **kw)


def package_env():
    """The environment with this clone's package importable (for programs the daemon starts)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(SOURCE, "python"), env.get("PYTHONPATH")) if p)
    return env


@pytest.fixture(scope="session")
def binaries():
    missing = [n for n in ("ensembled", "ensemblectl", "ensemble-worker") if not os.access(binary(n), os.X_OK)]
    if missing:
        pytest.skip("no %s in %s (build the project: ./scripts/build)" % (", ".join(missing), BUILD))
    return BUILD


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="session")
def members_run(binaries, runs_dir):
    """2 rounds, each member in its own directory (pack_size 1)."""
    return run_ensembled(runs_dir, tiny_config("members", runs_dir / "members"))


@pytest.fixture(scope="session")
def packs_run(binaries, runs_dir):
    """The same run with both members in one pack, results_layout "packs"."""
    return run_ensembled(runs_dir, tiny_config("packs", runs_dir / "packs", pack_size=2,
                                               extra={"results_layout": "packs"}))


@pytest.fixture(scope="session")
def classifier_run(binaries, runs_dir):
    """Three classes from a CSV of three features, 3 members in one pack, 1 round."""
    rows = ["a,b,c,label"]
    state = 12345
    for _ in range(240):
        values = []
        for _ in range(3):
            state = (state * 1103515245 + 12345) % 2**31
            values.append(state / 2**31)
        a, b, c = values
        rows.append("%.6f,%.6f,%.6f,%s" % (a, b, c, "lo" if a + b < 0.8 else "mid" if a + b < 1.2 else "hi"))
    with open(runs_dir / "classes.csv", "w") as f:
        f.write("\n".join(rows) + "\n")
    cfg = {"run_name": "classifier", "run_seed": 7, "state_dir": str(runs_dir / "classifier"), "task": "classification",
           "resources": {"gpus": "none", "cpu_workers": 2},
           "data": {"source": "csv", "train_path": "classes.csv", "target_column": "label"},
           "members": {"defaults": {"epochs": 3, "batch_size": 16, "layers": [{"units": 8}]}, "count": 3},
           "pack_size": 3, "rounds": {"count": 1}}
    return run_ensembled(runs_dir, cfg)
