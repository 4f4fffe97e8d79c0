"""Section 2: `deepmt serve` under load, dynamic batching on vs off.

scripts/loadtest.py starts the server twice on free loopback ports (its defaults,
then --max-batch-sentences 1), sends one-sentence requests (Multi30k
test_2016_flickr en, target languages round-robin) from 1, 8 and 64 keep-alive
clients, and reports sentences/s and p50/p99 latency. It runs once per
concurrency level and round, so each on/off pair is measured back to back
(on, off, on, off, ...); the table gives the medians over rounds and the median
of the per-round on/off throughput ratios.
"""
import json
import os

from common import PYTHON, log, median, run, table


def bench(cfg):
    """cfg: build, model, out, engine input (test.en), rounds, concurrency, requests, server_threads."""
    out = os.path.join(cfg["out"], "server")
    os.makedirs(out, exist_ok=True)
    if not os.path.exists("scripts/loadtest.py"):
        return "scripts/loadtest.py is missing: server section skipped.\n", {"skipped": True}
    cells = {}
    for clients in cfg["concurrency"].split(","):       # on/off pairs close together in time
        for r in range(cfg["rounds"]):
            log(f"server: {clients} clients, round {r + 1}/{cfg['rounds']}")
            cmd = [PYTHON, "scripts/loadtest.py", "--bin", os.path.join(cfg["build"], "deepmt"), "--model",
                   cfg["model"], "--concurrency", clients, "--requests", cfg["requests"], "--sentences",
                   cfg["sentences"], "--json"]
            if cfg["server_threads"]:
                cmd += ["--threads", cfg["server_threads"]]
            res = run(cmd, check=False)
            text = res["out"]
            if "\n[" not in text:
                return f"load test failed:\n```\n{res['err'][-1500:]}\n```\n", {"failed": True}
            for cell in json.loads(text[text.index("\n[") + 1:]):
                cells.setdefault((cell["clients"], cell["mode"]), []).append(cell)
    rows, md_rows = [], []
    for (clients, mode), cs in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1] != "batching on")):
        other = cells.get((clients, "batching off"))
        ratio = median([a["sent_per_s"] / b["sent_per_s"] for a, b in zip(cs, other)]) \
            if mode == "batching on" and other else None
        row = {"clients": clients, "mode": mode, "rounds": len(cs),
               "sentences_per_s": median([c["sent_per_s"] for c in cs]),
               "p50_ms": median([c["p50_ms"] for c in cs]), "p99_ms": median([c["p99_ms"] for c in cs]),
               "mean_batch": median([c["mean_batch"] for c in cs]), "errors": sum(c["errors"] for c in cs),
               "requests": sum(c["requests"] for c in cs), "on_vs_off": ratio, "per_round": cs}
        rows.append(row)
        md_rows.append([clients, mode, row["sentences_per_s"], row["p50_ms"], row["p99_ms"], row["mean_batch"],
                        f"{ratio:.2f}x" if ratio else "", row["errors"]])
    md = table(["clients", "mode", "sentences/s", "p50 ms", "p99 ms", "mean batch", "on/off throughput", "errors"],
               md_rows)
    return md + "\n", {"rows": rows}
