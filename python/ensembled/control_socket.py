"""One request over a control socket (orchestrator/service/control_socket.h), as ensemblectl
sends it (ControlRequest): connect to the Unix socket, send one JSON object on one line, read
one JSON line back, close.

request(path, request, timeout_ms=5000) -> the reply (a dict; {"ok": false, ...} included:
deciding what a refusal means is the caller's). No reply is DaemonUnreachable with
ensemblectl's words: "PATH: too long for a Unix socket path", "connect PATH (is the daemon
running?): <strerror>", "PATH: no reply within N ms", "PATH: reply is not a JSON object".
Thread-safe (a connection per call).
"""
import json
import os
import socket
import time

from .errors import DaemonUnreachable

SUN_PATH_BYTES = 108  # sizeof(sockaddr_un::sun_path) on Linux
MAX_LINE = 1 << 20    # kControlMaxLine


def request(path, req, timeout_ms=5000):
    path = os.fspath(path)
    if len(path.encode()) >= SUN_PATH_BYTES:
        raise DaemonUnreachable("%s: too long for a Unix socket path" % path)
    deadline = time.monotonic() + timeout_ms / 1000.0
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(path)
        except OSError as e:
            raise DaemonUnreachable("connect %s (is the daemon running?): %s" % (path, os.strerror(e.errno))) from None
        got = b""
        try:
            s.settimeout(max(deadline - time.monotonic(), 0.001))
            s.sendall((json.dumps(req, separators=(",", ":")) + "\n").encode())
            while b"\n" not in got and len(got) < MAX_LINE:
                s.settimeout(max(deadline - time.monotonic(), 0.001))
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except socket.timeout:
            raise DaemonUnreachable("%s: no reply within %d ms" % (path, timeout_ms)) from None
        except OSError:
            pass  # the daemon closed on us: judge what came
    try:
        reply = json.loads(got.split(b"\n", 1)[0].decode())
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        raise DaemonUnreachable("%s: reply is not a JSON object" % path)
    return reply
