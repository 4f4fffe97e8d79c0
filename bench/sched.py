#!/usr/bin/python3
"""Section: the server's scheduling, continuous (iteration-level) batching against
whole batches, same model, same run (`deepmt serve --batching continuous|whole`).

    bench/sched.py --build build --model models/default --shared ../shared --rounds 1
    bench/bench.py --sections sched                     # the same, inside the report

Workloads (each run against a fresh server of each mode, the two modes back to back
in every round; 2 workers x 1 thread, the server's defaults otherwise):
  heavy+light  a heavy request (64 FLORES sentences of ~190 bytes, beam_size 16,
               max_length 254) while light one-sentence requests arrive at 2/s;
               light p99 against the light latency on the idle server, and the heavy
               request's status and time;
  mixed-64     64 keep-alive clients, one sentence a request, short Multi30k lines
               and long FLORES lines alternating: throughput, p50, p99;
  clients-8    the same with 8 clients;
  gone-300     300 clients send a 13-sentence request and disconnect at once, while
               8 live clients keep sending: seconds from the last disconnect until the
               queue is empty and no worker busy, and the live clients' 429s;
  invariance   1,000 Multi30k sentences under load (64 clients) against each sent
               alone: how many translations are identical.
Prints a markdown section (and --json a JSON object) on stdout.
"""
import argparse
import gzip
import http.client
import json
import os
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serving import Server, metric, pct, post  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("continuous", "whole")


def log(msg):
    print(f"[sched {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def serve_args(model, mode):
    return ["-m", model, "--workers", "2", "--threads", "1", "--batching", mode]


def load(shared):
    with gzip.open(os.path.join(shared, "data", "multi30k", "test_2016_flickr.en.gz"), "rt", encoding="utf-8") as f:
        short = [l for l in f.read().splitlines() if l.strip()]
    with open(os.path.join(shared, "data", "general", "test", "flores101.devtest.en"), encoding="utf-8") as f:
        long_ = [l for l in f.read().splitlines() if l.strip()]
    heavy = sorted((l for l in long_ if 170 <= len(l.encode()) <= 210 and "." not in l[:-1]),
                   key=lambda l: -len(l))[:64]
    return short, sorted(long_, key=len)[len(long_) // 2:], heavy


def clients(port, n_clients, per_client, pick, target="de", stop=None, statuses=None):
    """n_clients keep-alive clients sending per_client one-sentence requests each:
    (latencies, seconds, sentences)."""
    lat, lock = [], threading.Lock()

    def one(c):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        k = 0
        while (stop is None and k < per_client) or (stop is not None and not stop.is_set()):
            t = time.perf_counter()
            try:
                st, _ = post(port, "POST", "/translate", {"q": pick(c, k), "source": "en", "target": target},
                             conn=conn)
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                st = 0
            with lock:
                lat.append(time.perf_counter() - t)
                if statuses is not None:
                    statuses[st] = statuses.get(st, 0) + 1
            k += 1
        conn.close()
    t0 = time.perf_counter()
    th = [threading.Thread(target=one, args=(c,)) for c in range(n_clients)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    return lat, time.perf_counter() - t0, len(lat)


def heavy_light(a, mode, heavy):
    heavy = heavy[:a.heavy_sentences]
    srv = Server(a.build, serve_args(a.model, mode), "sched")
    try:
        light = "Two dogs are playing in the snow."
        idle = []
        for _ in range(20):
            t = time.perf_counter()
            post(srv.port, "POST", "/translate", {"q": light, "source": "en", "target": "de"})
            idle.append(time.perf_counter() - t)
        res = {}

        def run_heavy():
            t = time.perf_counter()
            st, _ = post(srv.port, "POST", "/translate", {"q": heavy, "source": "en", "target": "de",
                                                           "beam_size": 16, "max_length": 254})
            res["status"], res["s"] = st, time.perf_counter() - t
        th = threading.Thread(target=run_heavy)
        th.start()
        time.sleep(0.5)
        lat = []
        while th.is_alive() and len(lat) < 240:
            t = time.perf_counter()
            st, _ = post(srv.port, "POST", "/translate", {"q": light, "source": "en", "target": "de"})
            lat.append(time.perf_counter() - t)
            time.sleep(max(0.0, 0.5 - (time.perf_counter() - t)))
        th.join()
        idle_ms = statistics.median(idle) * 1e3
        return {"idle_ms": idle_ms, "light_p50_ms": pct(lat, 50) * 1e3, "light_p99_ms": pct(lat, 99) * 1e3,
                "light_n": len(lat), "p99_vs_idle": pct(lat, 99) * 1e3 / idle_ms, "heavy_status": res["status"],
                "heavy_s": res["s"]}
    finally:
        srv.stop()


def mixed(a, mode, short, long_, n_clients, per_client):
    srv = Server(a.build, serve_args(a.model, mode), "sched")
    try:
        def pick(c, k):
            i = c * per_client + k
            return long_[i % len(long_)] if (c + k) % 2 else short[i % len(short)]
        clients(srv.port, n_clients, 2, pick)  # warm-up
        lat, dt, n = clients(srv.port, n_clients, per_client, pick)
        return {"sent_per_s": n / dt, "p50_ms": pct(lat, 50) * 1e3, "p99_ms": pct(lat, 99) * 1e3, "requests": n}
    finally:
        srv.stop()


def gone(a, mode, short):
    srv = Server(a.build, serve_args(a.model, mode), "sched")
    try:
        body = json.dumps({"q": " ".join(short[:13]), "source": "en", "target": "de"}).encode()
        req = (b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
        stop, statuses = threading.Event(), {}
        live = threading.Thread(target=clients, args=(srv.port, 8, 0, lambda c, k: short[(c * 97 + k) % len(short)]),
                                kwargs={"stop": stop, "statuses": statuses})
        live.start()
        try:  # the live clients stop even when this fails (they would spin on)
            for _ in range(300):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
                s.sendall(req)
                s.close()
            t_gone = time.perf_counter()
            peak = metric(srv.port, "deepmt_queue_sentences")
            empty = None
            while time.perf_counter() - t_gone < 300:
                q = metric(srv.port, "deepmt_queue_sentences")
                peak = max(peak or 0, q or 0)
                if q == 0:
                    empty = time.perf_counter() - t_gone
                    break
                time.sleep(0.1)
        finally:
            stop.set()
            live.join()
        return {"queue_empty_s": empty, "queue_peak": peak, "live_429": statuses.get(429, 0),
                "live_requests": sum(statuses.values())}
    finally:
        srv.stop()


def invariance(a, mode, short, n):
    srv = Server(a.build, serve_args(a.model, mode), "sched")
    try:
        items = short[:n]
        loaded = [None] * len(items)

        def pick(c, k):
            i = k * 64 + c
            return items[i] if i < len(items) else items[0]

        def client(c):
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
            for i in range(c, len(items), 64):
                loaded[i] = post(srv.port, "POST", "/translate", {"q": items[i], "source": "en", "target": "de"},
                                 conn=conn)
            conn.close()
        th = [threading.Thread(target=client, args=(c,)) for c in range(64)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        same = sum(post(srv.port, "POST", "/translate", {"q": q, "source": "en", "target": "de"}) == loaded[i]
                   for i, q in enumerate(items))
        return {"identical": same, "sentences": len(items)}
    finally:
        srv.stop()


def ratio(new, old):
    return new / old if old else float("nan")


def bench(a):
    short, long_, heavy = load(a.shared)
    res = {m: {} for m in MODES}
    for r in range(a.rounds):
        for w in a.workloads.split(","):
            for mode in MODES:
                log(f"{w}, {mode}, round {r + 1}/{a.rounds}")
                if w == "heavy":
                    x = heavy_light(a, mode, heavy)
                elif w == "mixed64":
                    x = mixed(a, mode, short, long_, 64, a.per_client)
                elif w == "clients8":
                    x = mixed(a, mode, short, long_, 8, a.per_client * 2)
                elif w == "gone":
                    x = gone(a, mode, short)
                elif w == "invariance":
                    x = invariance(a, mode, short, a.invariance)
                else:
                    raise SystemExit(f"sched: unknown workload {w}")
                log(f"{w}, {mode}: {json.dumps(x)}")
                res[mode].setdefault(w, []).append(x)
    med = {m: {w: {k: statistics.median([x[k] for x in xs if x[k] is not None] or [float("nan")])
                   for k in xs[0]} for w, xs in ws.items()} for m, ws in res.items()}
    return med, res


def markdown(med, a):
    c, w = med["continuous"], med["whole"]
    rows = []
    if "heavy" in c:
        rows += [("heavy+light: light p99 / light idle latency", f"{c['heavy']['p99_vs_idle']:.1f}x",
                  f"{w['heavy']['p99_vs_idle']:.1f}x", "<= 3x"),
                 ("heavy+light: light p50 / p99 ms",
                  f"{c['heavy']['light_p50_ms']:.0f} / {c['heavy']['light_p99_ms']:.0f}",
                  f"{w['heavy']['light_p50_ms']:.0f} / {w['heavy']['light_p99_ms']:.0f}", ""),
                 ("heavy+light: heavy status, seconds", f"{c['heavy']['heavy_status']:.0f}, {c['heavy']['heavy_s']:.1f}",
                  f"{w['heavy']['heavy_status']:.0f}, {w['heavy']['heavy_s']:.1f}", "200")]
    if "mixed64" in c:
        m, o = c["mixed64"], w["mixed64"]
        rows += [("64 clients mixed: sentences/s", f"{m['sent_per_s']:.1f} ({ratio(m['sent_per_s'], o['sent_per_s']):.2f}x)",
                  f"{o['sent_per_s']:.1f}", ">= 1.0x"),
                 ("64 clients mixed: p50 ms", f"{m['p50_ms']:.0f} ({ratio(m['p50_ms'], o['p50_ms']):.2f}x)",
                  f"{o['p50_ms']:.0f}", "<= 0.5x"),
                 ("64 clients mixed: p99 ms", f"{m['p99_ms']:.0f} ({ratio(m['p99_ms'], o['p99_ms']):.2f}x)",
                  f"{o['p99_ms']:.0f}", "<= 0.7x")]
    if "clients8" in c:
        m, o = c["clients8"], w["clients8"]
        rows += [("8 clients mixed: sentences/s", f"{m['sent_per_s']:.1f} ({ratio(m['sent_per_s'], o['sent_per_s']):.2f}x)",
                  f"{o['sent_per_s']:.1f}", ">= 1.2x")]
    if "gone" in c:
        rows += [("300 gone: queue empty after (s), peak queue",
                  f"{c['gone']['queue_empty_s']:.1f}, {c['gone']['queue_peak']:.0f}",
                  f"{w['gone']['queue_empty_s']:.1f}, {w['gone']['queue_peak']:.0f}", "<= 2 s"),
                 ("300 gone: live clients' 429s (of requests)",
                  f"{c['gone']['live_429']:.0f} of {c['gone']['live_requests']:.0f}",
                  f"{w['gone']['live_429']:.0f} of {w['gone']['live_requests']:.0f}", "0")]
    if "invariance" in c:
        rows += [("batch invariance: identical to alone",
                  f"{c['invariance']['identical']:.0f} of {c['invariance']['sentences']:.0f}",
                  f"{w['invariance']['identical']:.0f} of {w['invariance']['sentences']:.0f}", "all")]
    lines = ["| workload | continuous (vs whole) | whole | target |", "|---|---|---|---|"]
    lines += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} |" for r in rows]
    return "\n".join(lines) + f"\n\nMedians of {a.rounds} round(s), each mode on a fresh server, modes back to back.\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", default="models/default")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--workloads", default="heavy,mixed64,clients8,gone,invariance")
    ap.add_argument("--per-client", type=int, default=8, help="requests per client (mixed-64; x2 for 8 clients)")
    ap.add_argument("--invariance", type=int, default=1000, help="sentences for the invariance check")
    ap.add_argument("--heavy-sentences", type=int, default=64, help="sentences in the heavy request")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    os.chdir(REPO)
    med, raw = bench(a)
    print(json.dumps({"medians": med, "rounds": raw}) if a.json else markdown(med, a))


if __name__ == "__main__":
    main()
