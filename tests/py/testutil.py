"""Small helpers shared by the Python tests (standard library only)."""

import http.client
import json
import os
import socket
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def repo_path(p):
    """p as given when absolute, else relative to the repository root."""
    return p if os.path.isabs(p) else os.path.join(REPO, p)


def serve_log(binary, args, wait_for=("; ready", "cannot", "error"), get=None):
    """`binary serve --port P --threads 1 ARGS`: its log up to a line holding one of
    wait_for (or its exit), then it is stopped. -> (log, exit status, the JSON of GET
    get once ready, else None)."""
    port = free_port()
    p = subprocess.Popen([binary, "serve", "--port", str(port), "--threads", "1", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log, answer = "", None
    try:
        t0 = time.time()
        while time.time() - t0 < 60:
            line = p.stdout.readline()
            if not line:
                break
            log += line
            if any(w in line for w in wait_for):
                break
        if get and "; ready" in log:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", get)
            answer = json.loads(c.getresponse().read())
    finally:
        if p.poll() is None:
            p.terminate()
        p.wait(timeout=30)
    return log, p.returncode, answer
