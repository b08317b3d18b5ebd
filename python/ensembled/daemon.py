"""Daemon: a client of `ensembled serve` over its control socket (docs/serving.md), sending
what ensemblectl sends (ctl/serve_commands.cpp):

    d = Daemon("/run/ensembled/ensembled-serve.sock")
    name = d.submit("experiment.json", priority=0)   {"cmd":"submit","config":TEXT,"base_dir":DIR,"priority":N}
    d.list()                                         {"cmd":"list"}: every run, as `ensemblectl list --json`
    d.status(name)                                   {"cmd":"run","run":NAME,"action":"status"}: {"run", "live"}
    d.cancel(name)                                   {"cmd":"cancel","run":NAME}
    d.pause(name), d.resume(name), d.stop(name), d.reload(name)   the run's commands by name
    d.locate(name) -> its state directory; d.open_run(name) -> a Run on it
    d.wait(name) -> its list entry once it is finished, failed, cancelled or rejected

A refusal ({"ok": false}) is Refused: str() is exactly what `ensemblectl <command>` prints after
"ensemblectl <command>: "; no answer is DaemonUnreachable (control_socket.py). Who may do
what is the daemon's to decide (the socket's peer uid: a run's submitter or root cancels it).
Thread-safe (a connection per request).
"""
import json
import os
import time

from .control_socket import request
from .errors import DaemonUnreachable, EnsembledError, Refused

ENDED = ("finished", "failed", "cancelled", "rejected")


class Daemon:
    def __init__(self, socket, timeout_ms=5000):
        self.socket = os.fspath(socket)
        self.timeout_ms = timeout_ms

    def __repr__(self):
        return "Daemon(%r)" % self.socket

    def request(self, req):
        """One request; its reply when "ok" is true, else Refused."""
        reply = request(self.socket, req, self.timeout_ms)
        if not reply.get("ok", False):
            raise Refused(reply)
        return reply

    def submit(self, config, priority=0, base_dir=None):
        """Queues a run and returns its name. `config`: a config file (its folder is the base
        of its relative paths, as for `ensemblectl submit FILE`), or the config as a dict
        (relative paths from `base_dir`, default the current directory)."""
        if isinstance(config, dict):
            text = json.dumps(config, indent=2)
            base_dir = base_dir or os.getcwd()
        else:
            path = os.path.abspath(os.fspath(config))
            with open(path) as f:
                text = f.read()
            base_dir = base_dir or os.path.dirname(path)
        reply = self.request({"cmd": "submit", "config": text, "base_dir": os.path.abspath(base_dir),
                              "priority": int(priority)})
        return reply["run"]

    def list(self):
        return self.request({"cmd": "list"})["runs"]

    def cancel(self, name):
        return self.request({"cmd": "cancel", "run": name}).get("message", "cancelled")

    def _action(self, name, action):
        return self.request({"cmd": "run", "run": name, "action": action})

    def _run_reply(self, name, action):
        """A per-run reply that must describe the run (ctl/serve_commands.cpp AskServedRun)."""
        reply = self._action(name, action)
        if not isinstance(reply.get("run"), dict):
            raise DaemonUnreachable("the daemon at %s gave no run in its answer" % self.socket)
        return reply

    def status(self, name):
        """{"run": the daemon's view (as list gives it), "live": the supervisor's status, None
        when the run is not running}."""
        reply = self._run_reply(name, "status")
        return {"run": reply["run"], "live": reply.get("live")}

    def pause(self, name):
        return self._action(name, "pause").get("message", "ok")

    def resume(self, name):
        return self._action(name, "resume").get("message", "ok")

    def stop(self, name):
        return self._action(name, "stop").get("message", "ok")

    def reload(self, name):
        return self._action(name, "reload").get("message", "ok")

    def locate(self, name):
        """The run's state directory (what `ensemblectl predict|verify|export --socket S NAME` use)."""
        state_dir = self._run_reply(name, "locate")["run"].get("state_dir", "")
        if not state_dir:
            raise EnsembledError("run '%s' has no state directory" % name)
        return state_dir

    def open_run(self, name):
        from .run import Run
        return Run(self.locate(name))

    def wait(self, name, until=ENDED, timeout_s=60.0, poll_s=0.2):
        """The run's list entry once its state is one of `until`; TimeoutError naming the
        state it was in after timeout_s."""
        deadline = time.monotonic() + timeout_s
        while True:
            entry = next((r for r in self.list() if r.get("name") == name), None)
            if entry is not None and entry.get("state") in until:
                return entry
            if time.monotonic() > deadline:
                state = entry.get("state") if entry else "not listed"
                raise TimeoutError("run %s is %s after %.0f s (waited for %s)" % (name, state, timeout_s, ", ".join(until)))
            time.sleep(poll_s)
