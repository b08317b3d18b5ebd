"""Daemon: `ensembled serve` over its control socket, answered as ensemblectl is answered.

One daemon for the module, in a short temporary folder (a Unix socket path has 107 bytes),
configured as tests/support/serve_harness.h configures it: runs_dir, state_root, 2 CPU workers.
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import ensembled
from conftest import binary, ctl, tiny_config


class Serve:
    def __init__(self, folder):
        self.folder = folder
        self.socket = os.path.join(folder, "s.sock")
        self.state_root = os.path.join(folder, "state")
        os.makedirs(os.path.join(folder, "runs.d"))
        with open(os.path.join(folder, "serve.json"), "w") as f:
            json.dump({"runs_dir": "runs.d", "state_root": "state",
                       "resources": {"gpus": "none", "cpu_workers": 2},
                       "service": {"control_socket": self.socket}}, f)
        self.err = open(os.path.join(folder, "daemon.err"), "w")
        self.proc = subprocess.Popen([binary("ensembled"), "serve", "--config", os.path.join(folder, "serve.json")],
                                     cwd=folder, stdout=subprocess.DEVNULL, stderr=self.err)
        self.daemon = ensembled.Daemon(self.socket)

    def log(self):
        with open(os.path.join(self.folder, "daemon.err")) as f:
            return f.read()

    def config(self, cfg):
        """cfg written to <folder>/<run_name>.json: its path."""
        path = os.path.join(self.folder, cfg["run_name"] + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


@pytest.fixture(scope="module")
def serve(binaries):
    folder = tempfile.mkdtemp(prefix="ens-py-", dir="/tmp")
    s = Serve(folder)
    deadline = time.monotonic() + 20
    while True:
        try:
            s.daemon.list()
            break
        except ensembled.DaemonUnreachable:
            if s.proc.poll() is not None or time.monotonic() > deadline:
                s.stop()
                pytest.fail("ensembled serve did not answer on %s:\n%s" % (s.socket, s.log()))
            time.sleep(0.1)
    yield s
    s.stop()
    shutil.rmtree(folder, ignore_errors=True)


def cli_list(serve):
    out = ctl("list", "--socket", serve.socket, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["runs"]


def test_submit_list_status_and_the_finished_run(serve):
    d = serve.daemon
    name = d.submit(serve.config(tiny_config("served", rounds=1)))
    assert name == "served"
    entry = next(r for r in d.list() if r["name"] == "served")
    assert entry["state"] in ("queued", "starting", "running") and entry["priority"] == 0
    done = d.wait("served", timeout_s=90)
    assert done["state"] == "finished" and done["reason"] == "all rounds done", serve.log()
    status = d.status("served")
    assert status["run"]["state"] == "finished" and status["live"] is None
    assert [r for r in d.list() if r["name"] == "served"] == [r for r in cli_list(serve) if r["name"] == "served"]
    state_dir = d.locate("served")
    assert state_dir == os.path.join(serve.state_root, "served")
    run = d.open_run("served")
    assert run.name == "served" and run.finished and [r.number for r in run.rounds] == [0]
    assert run.round(0).member_names == ["m000", "m001"]


def test_submit_a_dict_with_a_priority(serve):
    d = serve.daemon
    cfg = tiny_config("from_dict", rounds=1)
    assert d.submit(cfg, priority=3, base_dir=serve.folder) == "from_dict"
    assert next(r for r in d.list() if r["name"] == "from_dict")["priority"] == 3
    assert d.wait("from_dict", timeout_s=90)["state"] == "finished", serve.log()


def test_cancel_a_run_and_its_words(serve):
    d = serve.daemon
    d.submit(serve.config(tiny_config("long", rounds=50)))
    message = d.cancel("long")
    assert message in ("cancelled run long (its state is kept)", "stopping run long (its state is kept)")
    assert d.wait("long", until=("cancelled",), timeout_s=60)["state"] == "cancelled", serve.log()
    with pytest.raises(ensembled.Refused) as e:
        d.pause("long")
    assert str(e.value) == "run 'long' is cancelled: nothing to pause"


def refusal_of(cli, command):
    """What ensemblectl printed after "ensemblectl <command>: ", with its exit status."""
    prefix = "ensemblectl %s: " % command
    assert cli.stderr.startswith(prefix), cli.stderr
    return cli.stderr[len(prefix):].rstrip("\n"), cli.returncode


def test_refusals_are_ensemblectls_words(serve):
    d = serve.daemon
    with pytest.raises(ensembled.Refused) as e:
        d.cancel("nobody")
    assert (str(e.value), 78) == refusal_of(ctl("cancel", "--socket", serve.socket, "nobody"), "cancel")
    assert str(e.value) == "no queued or running run named 'nobody'"

    bad = serve.config({"run_name": "bad", "rounds": {"count": -1}})  # two config errors
    with pytest.raises(ensembled.Refused) as e:
        d.submit(bad)
    assert (str(e.value), 78) == refusal_of(ctl("submit", "--socket", serve.socket, bad), "submit")
    assert [x["pointer"] for x in e.value.errors] == ["/members", "/rounds/count"]
    assert str(e.value).splitlines()[1:] == ["  /members: " + e.value.errors[0]["message"],
                                             "  /rounds/count: must be an integer >= 1, got -1"]


def test_no_daemon_is_unreachable_in_ensemblectls_words(binaries, tmp_path):
    socket = str(tmp_path / "none.sock")
    with pytest.raises(ensembled.DaemonUnreachable) as e:
        ensembled.Daemon(socket).list()
    assert (str(e.value), 1) == refusal_of(ctl("list", "--socket", socket), "list")
    assert str(e.value) == "connect %s (is the daemon running?): No such file or directory" % socket
