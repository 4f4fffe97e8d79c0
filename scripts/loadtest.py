#!/usr/bin/python3
"""Load test for `deepmt serve`: throughput and latency at several concurrency levels,
with dynamic batching on and off (standard library only).

    scripts/loadtest.py --model models/default                  # starts the servers itself
    scripts/loadtest.py --model tests/fixtures/tiny-model --concurrency 1,8,64
    scripts/loadtest.py --url http://127.0.0.1:5000             # one running server

Without --url it starts `deepmt serve` twice on free ports: batching on (the
server's defaults) and off (--max-batch-sentences 1), same model and threads. Each
request is one sentence (what most LibreTranslate clients send) with a target
language picked round-robin, so batches mix languages. Sentences come from
--sentences FILE (one a line; e.g. Multi30k test_2016_flickr.en) or a built-in set.
Each cell runs --requests requests (at least 2 a client) after a short warm-up.
Prints a table: requests/s, sentences/s, p50/p99 latency (ms), mean batch size
(from /metrics), errors.
"""

import argparse
import asyncio
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BUILTIN = [
    "A man in a red shirt is riding a bike.", "Two dogs are playing in the snow.",
    "A woman is reading a newspaper on a bench.", "Children are running on the beach.",
    "A group of people stand in front of a building.", "The little girl is climbing a tree.",
    "A black dog runs through the grass.", "Two men are working on a roof.",
    "A musician plays the guitar on the street.", "People are walking down a busy city street.",
    "A boy jumps into the swimming pool.", "An old man sits on a chair in the sun.",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(host, port, path, timeout=10):
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def batch_stats(host, port):
    """(sum, count) of deepmt_batch_sentences from /metrics."""
    st, data = get(host, port, "/metrics")
    s = n = 0.0
    for line in data.decode().splitlines():
        if line.startswith("deepmt_batch_sentences_sum "):
            s = float(line.split()[1])
        elif line.startswith("deepmt_batch_sentences_count "):
            n = float(line.split()[1])
    return s, n


def languages(host, port):
    st, data = get(host, port, "/languages")
    return [l["code"] for l in json.loads(data)]


async def _client(host, port, jobs, lat, errors, timeout):
    """One keep-alive connection sending the bodies it takes from jobs (asyncio: one
    thread drives every client, so the GIL does not throttle the load)."""
    reader = writer = None
    while True:
        try:
            body = jobs.get_nowait()
        except asyncio.QueueEmpty:
            break
        t0 = time.perf_counter()
        ok = False
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"POST /translate HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (host.encode(), len(body), body))
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
            status = int(head.split(b" ", 2)[1])
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
                elif k.strip().lower() == b"connection" and v.strip().lower() == b"close":
                    length = -1 if length == 0 else length
            await reader.readexactly(max(length, 0))
            ok = status == 200
            if b"connection: close" in head.lower():
                writer.close()
                writer = None
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError):
            if writer is not None:
                writer.close()
            writer = None
        dt = time.perf_counter() - t0
        if ok:
            lat.append(dt)
        else:
            errors[0] += 1
    if writer is not None:
        writer.close()


def run_cell(host, port, sentences, langs, clients, n_requests, timeout):
    """n_requests one-sentence requests from `clients` keep-alive connections."""
    lat, errors = [], [0]

    async def go():
        jobs = asyncio.Queue()
        for i in range(n_requests):
            jobs.put_nowait(json.dumps({"q": sentences[i % len(sentences)], "source": "auto",
                                        "target": langs[i % len(langs)]}).encode())
        await asyncio.gather(*(_client(host, port, jobs, lat, errors, timeout) for _ in range(clients)))

    b0 = batch_stats(host, port)
    t0 = time.perf_counter()
    asyncio.run(go())
    wall = time.perf_counter() - t0
    b1 = batch_stats(host, port)
    lat.sort()

    def pct(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3 if lat else float("nan")

    mean_batch = (b1[0] - b0[0]) / (b1[1] - b0[1]) if b1[1] > b0[1] else float("nan")
    return {"clients": clients, "requests": len(lat), "errors": errors[0], "wall_s": wall,
            "sent_per_s": len(lat) / wall, "p50_ms": pct(0.50), "p99_ms": pct(0.99), "mean_batch": mean_batch}


def rss_mib(pid):
    """(current, peak) resident set of a process in MiB from /proc/PID/status (VmRSS,
    VmHWM); (None, None) where unreadable (another host, or not Linux)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            kv = dict(line.split(":", 1) for line in f if ":" in line)
        return int(kv["VmRSS"].split()[0]) / 1024, int(kv["VmHWM"].split()[0]) / 1024
    except (OSError, KeyError, ValueError):
        return None, None


def start_server(binary, model, extra, threads):
    port = free_port()
    args = [binary, "serve", "--model", model, "--host", "127.0.0.1", "--port", str(port),
            "--max-connections", "512", *extra]
    if threads:
        args += ["--threads", str(threads)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.time() + 120
    while time.time() < end:
        if proc.poll() is not None:
            sys.exit(f"loadtest: the server exited ({' '.join(args)})")
        try:
            if get("127.0.0.1", port, "/ready", timeout=2)[0] == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    sys.exit("loadtest: the server did not become ready")


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="load an already running server instead of starting two")
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "deepmt"))
    ap.add_argument("--model", default=os.path.join(REPO, "models", "default"))
    ap.add_argument("--threads", type=int, default=0, help="--threads for the servers (0: their default)")
    ap.add_argument("--concurrency", default="1,8,64")
    ap.add_argument("--requests", type=int, default=128, help="requests per cell (at least 2 per client)")
    ap.add_argument("--sentences", help="file with one sentence a line")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    a = ap.parse_args()

    sentences = BUILTIN
    if a.sentences:
        with open(a.sentences, encoding="utf-8") as f:
            sentences = [l.strip() for l in f if l.strip()] or BUILTIN
    levels = [int(x) for x in a.concurrency.split(",")]

    modes = [("batching on", [])] if a.url else [("batching on", []), ("batching off", ["--max-batch-sentences", "1"])]
    results = []
    for name, extra in modes:
        if a.url:
            u = urllib.parse.urlparse(a.url)
            host, port, proc = u.hostname, u.port or 80, None
        else:
            proc, port = start_server(a.bin, a.model, extra, a.threads)
            host = "127.0.0.1"
        try:
            langs = languages(host, port)
            run_cell(host, port, sentences, langs, 2, 8, a.timeout)  # warm-up
            for c in levels:
                r = run_cell(host, port, sentences, langs, c, max(a.requests, 2 * c), a.timeout)
                r["mode"] = name
                # the server's peak RSS so far (VmHWM): cells run in rising concurrency, so
                # the last one's is the peak under the heaviest load
                r["rss_mib"], r["peak_rss_mib"] = rss_mib(proc.pid) if proc else (None, None)
                results.append(r)
                peak = f"  peak RSS {r['peak_rss_mib']:.0f} MiB" if r["peak_rss_mib"] else ""
                print(f"# {name:12s} {c:3d} clients: {r['sent_per_s']:8.1f} sentences/s  p50 {r['p50_ms']:8.1f} ms  "
                      f"p99 {r['p99_ms']:8.1f} ms  mean batch {r['mean_batch']:5.1f}  errors {r['errors']}{peak}",
                      file=sys.stderr, flush=True)
        finally:
            if proc:
                stop_server(proc)

    print(f"model: {a.model if not a.url else a.url}; one sentence a request, mixed target languages")
    print(f"| mode | clients | sentences/s | p50 ms | p99 ms | mean batch | errors |")
    print(f"|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['mode']} | {r['clients']} | {r['sent_per_s']:.1f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
              f"{r['mean_batch']:.1f} | {r['errors']} |")
    if a.json:
        print(json.dumps(results, indent=1))
    return 1 if any(r["errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
