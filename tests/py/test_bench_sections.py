#!/usr/bin/python3
"""The live-server sections of `make bench` (bench/sched.py, bench/models.py,
bench/hardening.py) run end to end on the tiny model, briefly (TAP).

`make bench` takes an hour and is not part of `make test`, so a section broken by a
change to the server or to bench/serving.py would otherwise show up only there.
Each section runs with --json for a second or so of load; the checks are on what
does not depend on the machine's speed: every request answered (statuses, errors),
batch invariance (each sentence translated under load exactly as alone), the queue
drained after 300 clients left, the documents refused with the status the server
owes them; and each section's markdown table is rendered from the JSON.
Timings are printed, never compared. Skips when Multi30k (../shared) is absent.

Environment: DEEPMT_BUILD (default build), DEEPMT_SHARED (default ../shared).
"""
import argparse
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BENCH = os.path.join(REPO, "bench")
sys.path.insert(0, HERE)
sys.path.insert(0, BENCH)

import tap  # noqa: E402
from testutil import repo_path, shared_data  # noqa: E402

BUILD = repo_path(os.environ.get("DEEPMT_BUILD", "build"))
TINY = os.path.join(REPO, "tests", "fixtures", "tiny-model")
SHARED = os.path.dirname(shared_data())


def section(script, *args):
    """-> (parsed JSON or None, stderr) of bench/SCRIPT --json ARGS."""
    r = subprocess.run([sys.executable, os.path.join(BENCH, script), "--build", BUILD, *args, "--json"],
                       capture_output=True, text=True, timeout=600, cwd=REPO)
    ok = tap.ok(r.returncode == 0, f"{script} exits 0", detail=r.stderr[-3000:])
    try:
        return (json.loads(r.stdout) if ok else None), r.stderr
    except ValueError as e:
        tap.ok(False, f"{script} --json prints one JSON object", detail=f"{e}\n{r.stdout[:1000]}")
        return None, r.stderr


def renders(name, fn, *args):
    try:
        text = fn(*args)
        tap.ok("|---" in text, f"{name}: the markdown table renders", detail=text)
    except Exception as e:  # noqa: BLE001  (any exception is the failure reported)
        tap.ok(False, f"{name}: the markdown table renders", detail=repr(e))


def check_sched():
    args = ["--model", TINY, "--shared", SHARED, "--workloads", "clients8,gone,invariance,heavy",
            "--per-client", "1", "--invariance", "40", "--heavy-sentences", "4"]
    out, _ = section("sched.py", *args)
    if out is None:
        return
    for mode, w in out["medians"].items():
        inv = w["invariance"]
        tap.ok(inv["identical"] == inv["sentences"] == 40,
               f"sched, {mode}: 40 sentences under load translate exactly as alone", detail=inv)
        gone = w["gone"]
        tap.ok(gone["queue_empty_s"] is not None and not math.isnan(gone["queue_empty_s"]),
               f"sched, {mode}: the queue drains after 300 clients leave", detail=gone)
        tap.ok(w["heavy"]["heavy_status"] == 200, f"sched, {mode}: the heavy request is answered", detail=w["heavy"])
        tap.ok(w["clients8"]["requests"] == 16 and w["clients8"]["sent_per_s"] > 0,
               f"sched, {mode}: 8 clients' 16 requests answered", detail=w["clients8"])
        tap.diag(f"sched, {mode}: {w['clients8']['sent_per_s']:.0f} sentences/s, queue empty after "
                 f"{gone['queue_empty_s']:.2f} s, live 429s {gone['live_429']}")
    import sched as bench_sched  # bench/sched.py (ahead of the standard library's sched on sys.path)
    renders("sched", bench_sched.markdown, out["medians"], argparse.Namespace(**{"rounds": 1}))


def check_models():
    out, _ = section("models.py", "--models", f"{TINY},{TINY}", "--shared", SHARED, "--seconds", "1",
                     "--clients", "2")
    if out is None:
        return
    tap.ok(out["errors"] == 0, "models: no failed request, alone or together", detail=out)
    rates = [out[k] for k in ("alone_a_sent_per_s", "alone_b_sent_per_s", "together_a_sent_per_s",
                              "together_b_sent_per_s")]
    tap.ok(all(r > 0 for r in rates), "models: each model served alone and together", detail=rates)
    rss = [out[k] for k in ("rss_alone_a", "rss_alone_b", "rss_together", "rss_overhead")]
    tap.ok(all(r > 0 for r in rss), "models: each server's RSS read", detail=rss)
    tap.diag(f"models: together / mean alone {out['total_vs_mean_alone']:.2f}x")
    import models as bench_models
    renders("models", bench_models.markdown, out)


def check_hardening():
    out, _ = section("hardening.py", "--model", TINY, "--seconds", "1", "--clients", "2")
    if out is None:
        return
    rows = {r["workload"]: r for r in out}
    nokey, docs, fair = rows.get("docs-nokey"), rows.get("docs"), rows.get("fairness")
    tap.ok(nokey is not None and list(nokey["statuses"]) == ["400"] and nokey["statuses"]["400"] > 0,
           "hardening: every keyless upload to a server with keys is refused with 400", detail=nokey)
    tap.ok(docs is not None and list(docs["statuses"]) == ["413"] and docs["statuses"]["413"] > 0,
           "hardening: every expanding .docx is refused with 413", detail=docs)
    tap.ok(all(r is not None and r["probes"] > 0 for r in (nokey, docs)), "hardening: /health probed under the flood",
           detail=out)
    tap.ok(fair is not None and fair["b_requests"] > 0, "hardening: client B answered beside the flood", detail=fair)
    import hardening as bench_hardening
    renders("hardening", bench_hardening.markdown, out, argparse.Namespace(clients=2, seconds=1))


def main():
    if not os.path.exists(os.path.join(BUILD, "deepmt")):
        tap.skip(f"{BUILD}/deepmt not built")
    elif not os.path.exists(shared_data("multi30k", "test_2016_flickr.en.gz")):
        tap.skip(f"no Multi30k under {shared_data('multi30k')} (the sections read their sentences there)")
    else:
        check_sched()
        check_models()
        check_hardening()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
