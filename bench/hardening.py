#!/usr/bin/python3
"""Section: probes under hostile load. How fast `/health` answers while clients
flood the server with costly requests, against the same probe on the idle server.

    bench/hardening.py --build build --model models/default --seconds 20
    bench/bench.py --sections hardening                 # the same, inside the report

Workloads (a fresh server each, 2 HTTP threads, the server's defaults otherwise):
  docs-nokey   16 clients upload, in a loop, a 14 KB .docx of 8 parts that expand
               to ~8 MB of XML elements, without a key, to a server that requires
               keys (each is refused with 400, no key sent, as LibreTranslate does:
               the key is checked before the document is parsed);
  docs         the same without keys on the server (each is parsed on the document
               thread, never an HTTP thread, and refused by the whole-document
               expansion limit with 413);
  fairness     client B (127.0.0.2) sends requests of 16 sentences one after the
               other, alone and while client A (127.0.0.1) keeps 12 such requests in
               flight: B's p50 latency under the flood against alone.
For each: /health latency p50, p99 and max over one probe every 50 ms (a 1 s
timeout counts as 1 s, like a liveness probe's failure), the flood's requests per
second and statuses, and the ratio of the p99 to the idle server's p99.
Prints a markdown section (and --json a JSON object) on stdout.
"""
import argparse
import http.client
import io
import json
import os
import sys
import threading
import time
import uuid
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serving import Server, pct  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def log(msg):
    print(f"[hardening {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def expanding_docx(parts=8):
    body = "<w:a/>" * ((1 << 20) // 6 - 40)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", f'<w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>')
        for i in range(1, parts):
            z.writestr(f"word/header{i}.xml", f'<w:hdr xmlns:w="{W}">{body}</w:hdr>')
    return out.getvalue()


def multipart(filename, data):
    b = uuid.uuid4().hex
    head = "".join(f"--{b}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
                   for k, v in (("source", "en"), ("target", "de")))
    body = (head + f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{b}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={b}"}


def serve_args(model):
    return ["-m", model, "--http-threads", "2"]


def probe(port, timeout=1.0):
    """Seconds for GET /health on a new connection; timeout on failure."""
    t = time.perf_counter()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", "/health")
        ok = c.getresponse().status == 200
        c.close()
        return time.perf_counter() - t if ok else timeout
    except OSError:
        return timeout


def probes(port, seconds):
    out, end = [], time.time() + seconds
    while time.time() < end:
        out.append(probe(port))
        time.sleep(0.05)
    return out


def flood(port, body, headers, n_clients, stop, statuses):
    def one():
        while not stop.is_set():
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                c.request("POST", "/translate_file", body, headers)
                r = c.getresponse()
                r.read()
                statuses.append(r.status)
                c.close()
            except OSError:
                statuses.append(0)
    threads = [threading.Thread(target=one, daemon=True) for _ in range(n_clients)]
    for t in threads:
        t.start()
    return threads


def workload(a, name, env):
    srv = Server(a.build, serve_args(a.model), "hardening", env)
    try:
        idle = probes(srv.port, min(5, a.seconds))
        body, headers = multipart("expand.docx", expanding_docx())
        stop, statuses = threading.Event(), []
        threads = flood(srv.port, body, headers, a.clients, stop, statuses)
        time.sleep(1)
        t0, n0 = time.time(), len(statuses)
        under = probes(srv.port, a.seconds)
        rate = (len(statuses) - n0) / (time.time() - t0)
        stop.set()
        for t in threads:
            t.join(60)
    finally:
        srv.stop()
    counts = {str(s): statuses.count(s) for s in sorted(set(statuses))}
    row = {"workload": name, "idle_p50": pct(idle, 50), "idle_p99": pct(idle, 99), "p50": pct(under, 50),
           "p99": pct(under, 99), "max": max(under), "probes": len(under), "failed": sum(x >= 1.0 for x in under),
           "flood_rps": rate, "statuses": counts, "docx_bytes": len(body)}
    row["p99_ratio"] = row["p99"] / row["idle_p99"] if row["idle_p99"] > 0 else float("nan")
    log(f"{name}: {row}")
    return row


class Bound(http.client.HTTPConnection):
    """A connection from a given loopback address (one client per address)."""

    def __init__(self, source, port, timeout=600):
        super().__init__("127.0.0.1", port, timeout=timeout, source_address=(source, 0))


def translate_from(source, port, texts):
    c = Bound(source, port)
    t = time.perf_counter()
    c.request("POST", "/translate", json.dumps({"q": texts, "source": "en", "target": "de"}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, time.perf_counter() - t


FLOOD_TEXTS = ["A man in a blue shirt is riding a bicycle down a busy street in the city."] * 16


def fairness(a):
    """Client B (requests of 16 sentences, one after the other) alone, then while
    client A keeps 12 such requests in flight: B's latency ratio (the target: <= 2x;
    shared per request, B would get 1/13 of the workers)."""
    srv = Server(a.build, serve_args(a.model), "hardening")
    try:
        p = srv.port
        alone = [translate_from("127.0.0.2", p, FLOOD_TEXTS)[1] for _ in range(5)]
        stop, statuses = threading.Event(), []

        def flood_one():
            while not stop.is_set():
                statuses.append(translate_from("127.0.0.1", p, FLOOD_TEXTS)[0])
        threads = [threading.Thread(target=flood_one, daemon=True) for _ in range(12)]
        for t in threads:
            t.start()
        time.sleep(2)
        under = []
        end = time.time() + a.seconds
        while time.time() < end:
            under.append(translate_from("127.0.0.2", p, FLOOD_TEXTS)[1])
        stop.set()
        for t in threads:
            t.join(120)
    finally:
        srv.stop()
    row = {"workload": "fairness", "b_alone_p50": pct(alone, 50), "b_p50": pct(under, 50), "b_p99": pct(under, 99),
           "b_requests": len(under), "flood_requests": len(statuses)}
    row["p50_ratio"] = row["b_p50"] / row["b_alone_p50"]
    log(f"fairness: {row}")
    return row


def bench(a):
    rows = [workload(a, "docs-nokey", {"DEEPMT_API_KEYS": "bench-key"}), workload(a, "docs", {})]
    return rows + [fairness(a)]


def markdown(rows, a):
    out = ["| workload | /health p50 idle | p50 | p99 | max | failed probes (1 s) | p99 / idle p99 | flood req/s | statuses |",
           "|---|---|---|---|---|---|---|---|---|"]
    fair = [r for r in rows if r["workload"] == "fairness"]
    rows = [r for r in rows if r["workload"] != "fairness"]
    for r in rows:
        out.append(f"| {r['workload']} | {r['idle_p50'] * 1e3:.1f} ms | {r['p50'] * 1e3:.1f} ms | "
                   f"{r['p99'] * 1e3:.1f} ms | {r['max'] * 1e3:.0f} ms | {r['failed']}/{r['probes']} | "
                   f"{r['p99_ratio']:.1f}x | {r['flood_rps']:.0f} | {r['statuses']} |")
    text = (f"{a.clients} flooding clients, {a.seconds} s of probes each; the .docx is "
            f"{rows[0]['docx_bytes'] / 1024:.0f} KB.\n\n" + "\n".join(out))
    for r in fair:
        text += (f"\n\nFairness between clients: client B's 16-sentence requests took {r['b_alone_p50'] * 1e3:.0f} ms "
                 f"(p50) alone and {r['b_p50'] * 1e3:.0f} ms (p50; p99 {r['b_p99'] * 1e3:.0f} ms) while client A kept 12 "
                 f"requests of 16 sentences in flight ({r['flood_requests']} of them): **{r['p50_ratio']:.2f}x** "
                 f"(target <= 2x).")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", default="models/default")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    os.chdir(REPO)
    rows = bench(a)
    print(json.dumps(rows, indent=1) if a.json else markdown(rows, a))


if __name__ == "__main__":
    main()
