#!/usr/bin/python3
"""Section: two models served together by one server against each served alone
(`deepmt serve -m a=DIR -m b=DIR`, docs/server.md "Several models").

    bench/models.py --build build --models models/default,models/captions --shared ../shared --rounds 1
    bench/bench.py --sections models                    # the same, inside the report

Workloads (a fresh server for each configuration, the three back to back in every
round; 2 workers x 1 thread, the server's defaults otherwise; Multi30k test_2016
English lines, one sentence a request, en->de, keep-alive clients on loopback):
  alone A, alone B  CLIENTS clients send to the one model (its "model" field set);
  together          CLIENTS clients to A and CLIENTS to B at once, on one server:
                    each model's sentences/s and p99 latency, and the total against
                    the mean of the two alone (1.0x: sharing the workers costs nothing);
  RSS               each server's resident memory after its load: together against
                    A alone + B alone - the overhead of a server (the memory of one
                    serving the tiny test model), i.e. whether each model's weights
                    are there once and nothing else grows.
Prints a markdown section (and --json a JSON object) on stdout.
"""
import argparse
import gzip
import http.client
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serving import Server, pct, post  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(REPO, "tests", "fixtures", "tiny-model")


def log(msg):
    print(f"[models {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def models_args(models):
    """[(name, dir)] -> the serve flags: -m NAME=DIR each, 2 workers x 1 thread."""
    return [x for name, d in models for x in ("-m", f"{name}={d}")] + ["--workers", "2", "--threads", "1"]


def drive(port, groups, seconds):
    """groups: [(model name, clients)]; each client sends one-sentence requests with
    that model for `seconds`. {model: {"sent_per_s", "p50_ms", "p99_ms", "errors"}}."""
    lines = LINES
    lat = {name: [] for name, _ in groups}
    errors = {name: 0 for name, _ in groups}
    lock, stop = threading.Lock(), threading.Event()

    def one(name, c):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        k = c * 7
        while not stop.is_set():
            t = time.perf_counter()
            try:
                st, _ = post(port, "POST", "/translate", {"q": lines[k % len(lines)], "source": "en", "target": "de",
                                                        "model": name}, conn=conn)
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                st = 0
            with lock:
                if st == 200:
                    lat[name].append(time.perf_counter() - t)
                else:
                    errors[name] += 1
            k += 1
        conn.close()
    th = [threading.Thread(target=one, args=(name, c)) for name, n in groups for c in range(n)]
    t0 = time.perf_counter()
    for t in th:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in th:
        t.join()
    dt = time.perf_counter() - t0
    return {name: {"sent_per_s": len(lat[name]) / dt, "p50_ms": pct(lat[name], 50) * 1e3,
                   "p99_ms": pct(lat[name], 99) * 1e3, "errors": errors[name]} for name, _ in groups}


LINES = []


def bench(a):
    global LINES
    with gzip.open(os.path.join(a.shared, "data", "multi30k", "test_2016_flickr.en.gz"), "rt", encoding="utf-8") as f:
        LINES = [l for l in f.read().splitlines() if l.strip()]
    dirs = a.models.split(",")
    models = [("a", dirs[0]), ("b", dirs[1])]
    runs = []
    for r in range(a.rounds):
        row = {}
        for label, served, groups in (("alone_a", models[:1], [("a", a.clients)]),
                                      ("alone_b", models[1:], [("b", a.clients)]),
                                      ("together", models, [("a", a.clients), ("b", a.clients)])):
            log(f"{label}, round {r + 1}/{a.rounds}")
            srv = Server(a.build, models_args(served), "models")
            try:
                drive(srv.port, groups, 2)  # warm-up: states made, pages touched
                row[label] = drive(srv.port, groups, a.seconds)
                row[label]["rss_mib"] = srv.rss_mib()
            finally:
                srv.stop()
        srv = Server(a.build, models_args([("tiny", TINY)]), "models")
        drive(srv.port, [("tiny", 2)], 1)
        row["overhead_rss_mib"] = srv.rss_mib()
        srv.stop()
        runs.append(row)
    med = lambda f: statistics.median(f(x) for x in runs)  # noqa: E731
    out = {"models": dict(models), "clients": a.clients, "seconds": a.seconds, "rounds": runs}
    out["alone_a_sent_per_s"] = med(lambda x: x["alone_a"]["a"]["sent_per_s"])
    out["alone_b_sent_per_s"] = med(lambda x: x["alone_b"]["b"]["sent_per_s"])
    out["together_a_sent_per_s"] = med(lambda x: x["together"]["a"]["sent_per_s"])
    out["together_b_sent_per_s"] = med(lambda x: x["together"]["b"]["sent_per_s"])
    out["total_vs_mean_alone"] = med(lambda x: (x["together"]["a"]["sent_per_s"] + x["together"]["b"]["sent_per_s"])
                                     / ((x["alone_a"]["a"]["sent_per_s"] + x["alone_b"]["b"]["sent_per_s"]) / 2))
    for k in ("a", "b"):
        out[f"alone_{k}_p99_ms"] = med(lambda x: x[f"alone_{k}"][k]["p99_ms"])
        out[f"together_{k}_p99_ms"] = med(lambda x: x["together"][k]["p99_ms"])
    out["errors"] = sum(v["errors"] for x in runs for c in ("alone_a", "alone_b", "together")
                        for v in x[c].values() if isinstance(v, dict))
    out["rss_alone_a"] = med(lambda x: x["alone_a"]["rss_mib"])
    out["rss_alone_b"] = med(lambda x: x["alone_b"]["rss_mib"])
    out["rss_together"] = med(lambda x: x["together"]["rss_mib"])
    out["rss_overhead"] = med(lambda x: x["overhead_rss_mib"])
    out["rss_expected"] = out["rss_alone_a"] + out["rss_alone_b"] - out["rss_overhead"]
    return out


def markdown(o):
    rows = [
        ("A alone: sentences/s, p99 ms", f"{o['alone_a_sent_per_s']:.1f}, {o['alone_a_p99_ms']:.0f}"),
        ("B alone: sentences/s, p99 ms", f"{o['alone_b_sent_per_s']:.1f}, {o['alone_b_p99_ms']:.0f}"),
        ("together, A's traffic: sentences/s, p99 ms", f"{o['together_a_sent_per_s']:.1f}, {o['together_a_p99_ms']:.0f}"),
        ("together, B's traffic: sentences/s, p99 ms", f"{o['together_b_sent_per_s']:.1f}, {o['together_b_p99_ms']:.0f}"),
        ("together: total sentences/s / mean of the two alone", f"{o['total_vs_mean_alone']:.2f}x"),
        ("failed requests", f"{o['errors']}"),
        ("RSS MiB: A alone, B alone, one server's overhead (tiny model)",
         f"{o['rss_alone_a']:.0f}, {o['rss_alone_b']:.0f}, {o['rss_overhead']:.0f}"),
        ("RSS MiB together / A + B - overhead", f"{o['rss_together']:.0f} / {o['rss_expected']:.0f} "
                                                f"({o['rss_together'] / o['rss_expected']:.2f}x)"),
    ]
    return "\n".join([f"A = {o['models']['a']}, B = {o['models']['b']}; {o['clients']} clients a model, "
                      f"{o['seconds']} s a run, {len(o['rounds'])} round(s), medians.", "",
                      "| | |", "|---|---|", *[f"| {a} | {b} |" for a, b in rows]])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--models", default="models/default,models/captions", help="A,B: two model directories")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    os.chdir(REPO)
    o = bench(a)
    print(json.dumps(o, indent=1) if a.json else markdown(o))


if __name__ == "__main__":
    main()
