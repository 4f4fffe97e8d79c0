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
import struct

from common import PYTHON, log, median, run, table


def f32_weight_mib(model_dir):
    """The model's weights as F32 in MiB, from the safetensors header (4 bytes a value)."""
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    n = 0
    for name, t in header.items():
        if name != "__metadata__":
            k = 1
            for d in t["shape"]:
                k *= d
            n += k
    return n * 4 / 2**20


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
               "peak_rss_mib": max((c.get("peak_rss_mib") or 0 for c in cs), default=0) or None,
               "requests": sum(c["requests"] for c in cs), "on_vs_off": ratio, "per_round": cs}
        rows.append(row)
        md_rows.append([clients, mode, row["sentences_per_s"], row["p50_ms"], row["p99_ms"], row["mean_batch"],
                        f"{ratio:.2f}x" if ratio else "", row["peak_rss_mib"] or "-", row["errors"]])
    md = table(["clients", "mode", "sentences/s", "p50 ms", "p99 ms", "mean batch", "on/off throughput",
                "server peak RSS MiB", "errors"], md_rows)
    # Memory budget: the server's peak RSS under the heaviest load against the model's
    # F32 weights + 200 MiB (buffers, HTTP, queues, allocator slack).
    weights = f32_weight_mib(cfg["model"])
    peak = max((r["peak_rss_mib"] or 0 for r in rows), default=0)
    budget = weights + 200
    verdict = "within" if peak and peak <= budget else ("over" if peak else "not measured:")
    md += (f"\nHighest server peak RSS (VmHWM) in any cell: **{peak:.0f} MiB**, {verdict} the "
           f"budget of F32 weights ({weights:.1f} MiB) + 200 MiB = {budget:.0f} MiB.\n")
    return md + "\n", {"rows": rows, "peak_rss_mib": peak, "f32_weights_mib": weights, "rss_budget_mib": budget}
