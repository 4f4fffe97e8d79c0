"""Shared helpers for the sections that drive a live `deepmt serve` (sched, models,
hardening): a server on a free loopback port, started and stopped; JSON requests;
/metrics values; percentiles.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, method, path, body, timeout=3600, conn=None):
    """(status, body bytes) of one request with a JSON body (None: no body); on
    `conn` when given (keep-alive clients), else on a connection of its own."""
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, data, {"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        if not conn:
            c.close()


def metric(port, name):
    """The value of one unlabelled line of GET /metrics, or None."""
    st, data = post(port, "GET", "/metrics", None, timeout=30)
    for line in data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


class Server:
    """`deepmt serve ARGS` on a free loopback port, ready (GET /ready is 200) when
    the constructor returns; SystemExit naming `section` when it exits or is not
    ready within two minutes."""

    def __init__(self, build, args, section, env=None):
        self.port = free_port()
        self.proc = subprocess.Popen([os.path.join(build, "deepmt"), "serve", *args, "--port", str(self.port),
                                      # the workloads stand for many clients, all from 127.0.0.1
                                      "--max-connections-per-ip", "0"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=dict(os.environ, **(env or {})))
        end = time.time() + 120
        while time.time() < end:
            if self.proc.poll() is not None:
                raise SystemExit(f"{section}: the server exited with status {self.proc.returncode} before it was ready")
            if self.status("/ready") == 200:
                return
            time.sleep(0.1)
        self.stop()
        raise SystemExit(f"{section}: the server did not become ready in 120 s")

    def status(self, path):
        """The status of GET `path` on a new connection; 0 when it fails."""
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            try:
                c.request("GET", path)
                return c.getresponse().status
            finally:
                c.close()
        except (OSError, http.client.HTTPException):
            return 0

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
