#!/usr/bin/python3
"""End to end: the real server (build/deepmt serve) evaluated by scripts/evaluate.py on
2 directions x 20 sentences of Multi30k test_2016_flickr. TAP output.

Environment: DEEPMT_BIN (default build/deepmt), DEEPMT_MODEL (default models/default),
DEEPMT_SHARED (default ../shared), DEEPMT_EVAL_DIRECTIONS (default en-de,en-fr).
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import tap  # noqa: E402
from testutil import free_port, repo_path  # noqa: E402

EVALUATE = os.path.join(REPO, "scripts", "evaluate.py")
READY_TIMEOUT = 60.0
SENTENCES = 20


def tail(path, n=2000):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return "(no log)"


def wait_ready(url, proc, timeout):
    """True once GET /ready answers 200; False on timeout or if the server exits."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with opener.open(url + "/ready", timeout=2) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    return False


def check_report(path, directions, hyp_dir, split):
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        rows = report["directions"]
    except (OSError, ValueError, KeyError) as e:
        tap.ok(False, "report is readable JSON", str(e))
        return
    got = [r.get("direction") for r in rows]
    tap.ok(got == directions, f"report lists {','.join(directions)}", f"got {got}")
    for r in rows:
        d = r.get("direction")
        well_formed = (r.get("sentences") == SENTENCES
                       and all(isinstance(r.get(k), (int, float)) for k in
                               ("bleu", "chrf", "seconds", "sentences_per_second", "bleu_bp"))
                       and 0 <= r["bleu"] <= 100 and 0 <= r["chrf"] <= 100
                       and len(r.get("bleu_counts", [])) == 4 and len(r.get("bleu_totals", [])) == 4)
        tap.ok(well_formed, f"{d}: scores, counts and timings well-formed", json.dumps(r))
        hyp_file = os.path.join(hyp_dir, f"{split}.{d}.hyp")
        try:
            with open(hyp_file, encoding="utf-8") as f:
                hyps = f.read().split("\n")[:-1]
        except OSError as e:
            hyps = []
            tap.diag(str(e))
        empty = [i + 1 for i, h in enumerate(hyps) if not h.strip()]
        tap.ok(len(hyps) == SENTENCES and not empty,
               f"{d}: {SENTENCES} hypotheses, none empty",
               f"{len(hyps)} lines, empty at {empty}")
        tap.diag(f"{d}: BLEU {r.get('bleu', 0):.2f} chrF {r.get('chrf', 0):.2f} "
                 f"({r.get('sentences_per_second', 0):.1f} sent/s)")


def main():
    binary = repo_path(os.environ.get("DEEPMT_BIN") or "build/deepmt")
    model = repo_path(os.environ.get("DEEPMT_MODEL") or "models/default")
    shared = os.environ.get("DEEPMT_SHARED") or os.path.join(REPO, "..", "shared")
    data = os.path.join(shared, "data", "multi30k")
    split = "test_2016_flickr"
    directions = (os.environ.get("DEEPMT_EVAL_DIRECTIONS") or "en-de,en-fr").split(",")
    langs = {lang for d in directions for lang in d.split("-")}
    if not os.path.isdir(model):
        tap.skip(f"no model directory at {model}")
        return tap.done()
    missing = [lang for lang in sorted(langs)
               if not os.path.isfile(os.path.join(data, f"{split}.{lang}.gz"))]
    if missing:
        tap.skip(f"no Multi30k {split} data for {','.join(missing)} in {data} (set DEEPMT_SHARED)")
        return tap.done()
    if not tap.ok(os.access(binary, os.X_OK), f"server binary {binary} exists", "run make first"):
        return tap.done()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        log_path = os.path.join(tmp, "server.log")
        with open(log_path, "w") as log:
            proc = subprocess.Popen([binary, "serve", "--model", model, "--host", "127.0.0.1",
                                     "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
        try:
            ready = wait_ready(url, proc, READY_TIMEOUT)
            tap.ok(ready, f"GET /ready answers 200 within {READY_TIMEOUT:.0f} s",
                   f"exit status {proc.poll()}\n{tail(log_path)}")
            if ready:
                report = os.path.join(tmp, "report.json")
                p = subprocess.run([sys.executable, EVALUATE, "--multi30k", data, "--split", split,
                                    "--directions", ",".join(directions), "--limit", str(SENTENCES),
                                    "--url", url, "--json", report, "--hyp-dir", tmp, "--quiet"],
                                   capture_output=True, text=True, timeout=600)
                tap.ok(p.returncode == 0, "evaluate.py exits 0",
                       f"rc {p.returncode}\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
                tap.diag(p.stdout)
                check_report(report, directions, tmp, split)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                rc = "still running 30 s after SIGTERM"
            tap.ok(rc == 0, "server exits 0 on SIGTERM", f"exit {rc}\n{tail(log_path)}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
