#!/usr/bin/python3
"""`deepmt serve` scheduling over real HTTP (TAP; standard library only).

The failures a batch scheduler can show, each reproduced with the tiny random model
(tests/fixtures/tiny-model: it always decodes to max_length, so cost is easy to set):
  - one heavy request (long sentences, beam 16, max_length 254) must not stall light
    one-sentence requests, and must itself complete;
  - clients that disconnect after sending must not keep the queue full and the
    workers busy: their work is dropped within 2 s and live clients get no 429;
  - a request that started in time completes however long it runs, while one that
    waited past --request-timeout before starting gets 503;
  - a SIGTERM drain answers what it accepted: a request whose headers were still
    arriving, and a second request on a keep-alive connection;
  - what can never run (over --max-batch-cost or --max-request-cost) gets 413;
  - batch invariance: 300 sentences translated under load equal each sent alone.
"""

import http.client
import json
import os
import signal
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tap  # noqa: E402
import test_server as ts  # noqa: E402  (Server)
from testutil import repo_path  # noqa: E402

BIN = repo_path(os.environ.get("DEEPMT_BIN", "build/deepmt"))
SLOW = 4 if "asan" in BIN else 1
SANITIZER_REPORTS = ts.SANITIZER_REPORTS  # excerpts of sanitizer reports in any server's stderr

WORDS = ("man woman dog bicycle street river mountain city child ball house red green blue old young "
         "running sitting playing walking riding reading near under over behind beside").split()


def sentence(i, words):
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(words)).capitalize() + "."


class Server(ts.Server):
    """test_server's server; a drain here may wait on long translations."""

    def stop(self, timeout=60 * SLOW):
        return super().stop(timeout)


def request(port, method, path, body=None, timeout=120 * SLOW):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {}
        if body is not None:
            body = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body, headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def translate(port, q, **extra):
    st, data = request(port, "POST", "/translate", {"q": q, "source": "en", "target": "de", **extra})
    try:
        return st, json.loads(data)
    except ValueError:
        return st, {"raw": data[:200].decode("utf-8", "replace")}


def gauge(port, name):
    st, data = request(port, "GET", "/metrics", timeout=10)
    for line in data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


HEAVY_SENTENCES = 256


def test_heavy_and_light():
    """256 long sentences at beam 16 and max_length 254 keep both workers busy for a
    long time; light one-sentence requests sent meanwhile are answered in a small
    fraction of that time, and the heavy request completes."""
    srv = Server("--workers", "2", "--threads", "1", "--max-chars", "100000",
                 "--max-request-cost", "10000000")
    try:
        t0 = time.time()
        st, j = translate(srv.port, "A man rides a bicycle.")
        idle = time.time() - t0
        heavy = {}

        def run_heavy():
            t = time.time()
            heavy["res"] = translate(srv.port, [sentence(i, 32) for i in range(HEAVY_SENTENCES)], beam_size=16,
                                     max_length=254)
            heavy["dt"] = time.time() - t
        th = threading.Thread(target=run_heavy)
        th.start()
        # the lights must arrive while the heavy request holds both workers; a fixed
        # sleep raced it on a fast machine (the heavy request ended after one light)
        end = time.time() + 30 * SLOW
        while th.is_alive() and time.time() < end and gauge(srv.port, "deepmt_busy_workers") != 2:
            time.sleep(0.02)
        lat = []
        while th.is_alive() and len(lat) < 8:
            t = time.time()
            st, j = translate(srv.port, "Two dogs play in the snow.")
            lat.append((st, time.time() - t))
            time.sleep(0.2)
        th.join()
        hst, hj = heavy["res"]
        worst = max((x[1] for x in lat), default=0)
        tap.ok(hst == 200 and len(hj.get("translatedText", [])) == HEAVY_SENTENCES, "the heavy request completes (200)",
               f"{hst} {str(hj)[:200]}")
        tap.ok(len(lat) >= 2 and all(x[0] == 200 for x in lat), "light requests during the heavy one: all 200",
               f"{lat}")
        # the heavy request ran heavy['dt'] seconds; a light one waits at most for one
        # small batch (the cost cap keeps heavy batches to ~2 sentences)
        tap.diag(f"heavy request {heavy['dt']:.1f} s; idle light request {idle * 1e3:.0f} ms; "
                 f"light requests meanwhile: {', '.join(f'{x[1]:.2f}' for x in lat)} s")
        tap.ok(len(lat) >= 2 and worst < max(0.25 * heavy["dt"], 20 * idle),
               "a light request waits a small fraction of the heavy request's time",
               f"worst light {worst:.2f}s, idle {idle:.3f}s, heavy {heavy['dt']:.1f}s, lights {lat}")
    finally:
        srv.stop()


def abandon(port, body):
    """Sends a request and closes the connection at once."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(data) + data)
    s.close()


def test_disconnected_clients():
    """120 clients send 10 slow sentences each and disconnect: the queue (1,200
    sentences) empties within 2 s, the workers stop working for them, and a live
    client is served (no 429)."""
    srv = Server("--workers", "2", "--threads", "1", "--max-queue", "1200")
    try:
        body = {"q": [sentence(i, 25) for i in range(10)], "source": "en", "target": "de", "beam_size": 8,
                "max_length": 200}
        for _ in range(120):
            abandon(srv.port, body)
        t_gone = time.time()
        time.sleep(0.3)
        queued0 = gauge(srv.port, "deepmt_queue_sentences")
        empty_at = None
        while time.time() - t_gone < 10:
            q, busy = gauge(srv.port, "deepmt_queue_sentences"), gauge(srv.port, "deepmt_busy_workers")
            if q == 0 and busy == 0:
                empty_at = time.time() - t_gone
                break
            time.sleep(0.1)
        tap.ok(empty_at is not None and empty_at <= 2.0 * SLOW,
               "disconnected clients: queue empty and workers idle within 2 s",
               f"queued {queued0} at 0.3 s; empty after {empty_at} s")
        t = time.time()
        st, j = translate(srv.port, "A man rides a bicycle.")
        dt = time.time() - t
        tap.ok(st == 200 and dt < 2 * SLOW, "a live client after them is served at once (no 429, no wait)",
               f"{st} {j} after {dt:.1f}s")
        time.sleep(0.5)
        log = [line for line in srv.stderr().splitlines() if '"POST /translate"' in line]
        # 0: the answer could not be sent; 499: it was written before the reset arrived
        gone = sum(1 for line in log if '"POST /translate" 0 ' in line or '"POST /translate" 499 ' in line)
        tap.ok(gone == 120, "each abandoned request is logged once, with status 0 or 499 (client went away)",
               f"{gone} of 120; {len(log)} lines: {[line for line in log if ' 0 ' not in line][:5]}")
    finally:
        srv.stop()


def test_request_timeout():
    """--request-timeout bounds queue time before a request starts. One worker runs
    one long whole batch (1,000 sentences, --batching whole); a request queued behind
    it waits past 1 s and gets 503. A request of 600 sentences run one at a
    time takes longer than the timeout but started at once: it completes (200)."""
    srv = Server("--request-timeout", "1", "--workers", "1", "--threads", "1", "--batching", "whole",
                 "--max-batch-sentences", "1000",
                 "--max-wait-ms", "0", "--max-sentences", "2000", "--max-queue", "5000", "--max-chars", "400000",
                 "--max-batch-cost", "100000000", "--max-batch-tokens", "1000000")
    try:
        big = {}

        def run_big():
            t = time.time()
            big["res"] = translate(srv.port, " ".join(sentence(i, 8) for i in range(1000)), max_length=40)
            big["dt"] = time.time() - t
        th = threading.Thread(target=run_big)
        th.start()
        end = time.time() + 30 * SLOW  # until its batch runs (tokenizing 1,000 sentences takes a moment)
        while time.time() < end and gauge(srv.port, "deepmt_busy_workers") != 1:
            time.sleep(0.02)
        st, j = translate(srv.port, "Hello.", beam_size=2)
        th.join()
        if big["dt"] < 1.5:
            tap.skip("the 1,000-sentence batch took under 1.5 s: too fast to time a request out")
        else:
            tap.ok(st == 503 and "too long in the queue" in j.get("error", ""),
                   "a request that waited past --request-timeout before starting: 503", f"{st} {j}")
        tap.ok(big["res"][0] == 200, "the long batch's request completes", f"{big['res'][0]}")
    finally:
        srv.stop()
    srv = Server("--request-timeout", "1", "--workers", "1", "--threads", "1", "--max-batch-sentences", "1",
                 "--max-wait-ms", "0", "--max-sentences", "2000", "--max-queue", "5000", "--max-chars", "400000")
    try:
        t = time.time()
        st, j = translate(srv.port, " ".join(sentence(i, 8) for i in range(600)), max_length=40)
        dt = time.time() - t
        tap.ok(st == 200,
               "a request that started in time completes (200) however long it runs, nothing thrown away",
               f"{st} {str(j)[:200]} after {dt:.1f}s")
    finally:
        srv.stop()


def test_batch_invariance():
    """300 sentences of 3 to 40 words, sent by 16 concurrent clients (mixed target
    languages and beam sizes, so sessions of several options run side by side and
    sentences join running batches at every step), translate exactly as each
    sentence sent alone to an idle server."""
    srv = Server("--workers", "2", "--threads", "1")
    try:
        items = [(sentence(i, 3 + (i * 13) % 38), ["de", "fr", "cs"][i % 3], 4 if i % 4 else 2) for i in range(300)]
        loaded = [None] * len(items)

        def client(c):
            for i in range(c, len(items), 16):
                q, tgt, beam = items[i]
                st, data = request(srv.port, "POST", "/translate",
                                   {"q": q, "source": "en", "target": tgt, "beam_size": beam})
                loaded[i] = (st, data)
        threads = [threading.Thread(target=client, args=(c,)) for c in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        diffs = []
        for i, (q, tgt, beam) in enumerate(items):
            st, data = request(srv.port, "POST", "/translate", {"q": q, "source": "en", "target": tgt,
                                                                 "beam_size": beam})
            if (st, data) != loaded[i]:
                diffs.append((i, loaded[i], (st, data)))
        tap.ok(all(x and x[0] == 200 for x in loaded), "batch invariance: 300 sentences under load, all 200")
        tap.ok(not diffs, "batch invariance: each of 300 sentences under load = the same sentence alone",
               "\n".join(f"{d[0]}: loaded {d[1]!r:.150} alone {d[2]!r:.150}" for d in diffs[:3]))
    finally:
        srv.stop()


def test_limits():
    # sentences over half the positions are cut into chunks (text/sentences.h): the batch
    # cost limit sits under what one chunk of sentence(1, 60) costs at beam 16
    srv = Server("--max-batch-cost", "4000", "--max-request-cost", "20000")
    try:
        st, j = translate(srv.port, sentence(1, 60), beam_size=16, max_length=254)
        tap.ok(st == 413 and "--max-batch-cost" in j.get("error", "") and "sentence 1" in j.get("error", ""),
               "a sentence costlier than a batch may be: 413 naming the sentence and the limit", f"{st} {j}")
        st, j = translate(srv.port, [sentence(i, 10) for i in range(40)], beam_size=8)
        tap.ok(st == 413 and "--max-request-cost" in j.get("error", ""),
               "a request costlier than --max-request-cost: 413 with the limit", f"{st} {j}")
        st, j = translate(srv.port, [sentence(i, 10) for i in range(4)])
        tap.ok(st == 200, "a request within the limits: 200", f"{st} {j}")
    finally:
        srv.stop()


def send_partial_then_rest(port, first, rest, signal_fn, keepalive_first=None):
    """Sends `first`, calls signal_fn(), then sends `rest`; returns the raw answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30 * SLOW)
    try:
        if keepalive_first:
            s.sendall(keepalive_first)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += s.recv(65536)
            head, _, body = buf.partition(b"\r\n\r\n")
            length = int([h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0])
            while len(body) < length:
                body += s.recv(65536)
        s.sendall(first)
        time.sleep(0.2)
        signal_fn()
        time.sleep(0.5)
        s.sendall(rest)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def test_drain():
    body = json.dumps({"q": "A man rides a bicycle.", "source": "en", "target": "de"}).encode()
    req = (b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
    cut = req.index(b"Content-Type")
    srv = Server("--workers", "1")
    out = send_partial_then_rest(srv.port, req[:cut], req[cut:], lambda: srv.proc.send_signal(signal.SIGTERM))
    rc = srv.stop()
    tap.ok(out.startswith(b"HTTP/1.1 200") and b"translatedText" in out,
           "SIGTERM while a request's headers are arriving: it is answered (200)", f"{out[:200]!r}")
    tap.ok(rc == 0, "that server exits 0", srv.stderr()[-500:])

    srv = Server("--workers", "1")
    out = send_partial_then_rest(srv.port, req[:cut], req[cut:], lambda: srv.proc.send_signal(signal.SIGTERM),
                                 keepalive_first=req)
    rc = srv.stop()
    tap.ok(out.startswith(b"HTTP/1.1 200") and b"translatedText" in out and b"close" in out.lower(),
           "SIGTERM during a second request on a keep-alive connection: answered (200, Connection: close)",
           f"{out[:300]!r}")
    tap.ok(rc == 0, "that server exits 0", srv.stderr()[-500:])

    srv = Server("--workers", "1", "--drain-timeout", "3")
    idle = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    idle.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\n")  # never finished
    time.sleep(0.2)
    t = time.time()
    rc = srv.stop()
    dt = time.time() - t
    idle.close()
    tap.ok(rc == 0 and dt < 3 + 3 * SLOW, "a request that never completes holds the drain at most --drain-timeout",
           f"rc {rc}, {dt:.1f}s")


def histogram(port, name):
    """{le: cumulative count} and the count of a /metrics histogram."""
    st, data = request(port, "GET", "/metrics", timeout=10)
    buckets, count = {}, None
    for line in data.decode().splitlines():
        if line.startswith(name + "_bucket{le="):
            buckets[line.split('"')[1]] = float(line.split()[-1])
        elif line.startswith(name + "_count "):
            count = float(line.split()[-1])
    return buckets, count


def test_model_batch_limit():
    """A model's config.json "batching": {"max_sentences": 2} keeps its batches at 2
    sentences (whole batches, and every decoder step of continuous batching) where the
    operator gave no --max-batch-sentences; an explicit one wins."""
    import shutil
    model = os.path.join(ts.TMP, "tiny-batch2")
    shutil.copytree(ts.MODEL, model)
    cfg_path = os.path.join(model, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["batching"] = {"max_sentences": 2}
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    q = [sentence(i, 6) for i in range(8)]
    for batching, metric in (("continuous", "deepmt_step_sentences"), ("whole", "deepmt_batch_sentences")):
        for explicit in ((), ("--max-batch-sentences", "8")):
            srv = Server("--workers", "1", "--threads", "1", "--batching", batching, "--max-wait-ms", "200",
                         *explicit, model=model)
            try:
                st, j = translate(srv.port, q)
                ok = st == 200 and len(j.get("translatedText", [])) == 8
                for _ in range(50):  # the last batch is counted just after the answer
                    buckets, count = histogram(srv.port, metric)
                    if count and buckets.get("+Inf") == count and (batching == "continuous" or count * 2 >= 8
                                                                   or explicit):
                        break
                    time.sleep(0.05)
                within = count is not None and count > 0 and buckets.get("2") == count
                what = "--max-batch-sentences 8 given" if explicit else "the model's limit"
                tap.ok(ok and within != bool(explicit),
                       f"{batching} batching, {what}: {'some batches over' if explicit else 'every batch within'} "
                       f"2 sentences ({metric})", f"status {st}; buckets {buckets}, count {count}")
                if not explicit:
                    tap.ok("batches of up to 2 sentences (its config.json)" in srv.stderr(),
                           f"{batching}: the ready line names the model's batch limit", srv.stderr()[-400:])
            finally:
                srv.stop()
    import subprocess
    for bad in (0, 5000, "8", [8]):
        cfg["batching"] = {"max_sentences": bad}
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        r = subprocess.run([BIN, "translate", "-m", model, "-t", "de", "-q"], input=b"A man.\n", capture_output=True,
                           timeout=60 * SLOW)
        tap.ok(r.returncode != 0 and b"batching.max_sentences must be an integer in 1..4096" in r.stderr,
               f"config.json batching.max_sentences {json.dumps(bad)}: refused, said why",
               f"exit {r.returncode}: {r.stderr[-300:]!r}")


def main():
    if not os.path.exists(BIN):
        tap.skip(f"{BIN} not built")
        return tap.done()
    try:
        only = os.environ.get("ONLY")
        for t in (test_limits, test_drain, test_batch_invariance, test_heavy_and_light, test_disconnected_clients,
                  test_request_timeout, test_model_batch_limit):
            if not only or only in t.__name__:
                t()
        tap.ok(not SANITIZER_REPORTS, "no sanitizer reports in any server's stderr", "\n".join(SANITIZER_REPORTS[:2]))
    finally:
        import shutil
        shutil.rmtree(ts.TMP, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
