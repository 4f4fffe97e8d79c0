#!/usr/bin/python3
"""Language detection accuracy of `deepmt serve` (POST /detect), by length and by
confidence band (standard library only).

    scripts/detect_accuracy.py                      # starts build/deepmt on the test model
    scripts/detect_accuracy.py --url http://127.0.0.1:5000
    scripts/detect_accuracy.py --calibrate          # band accuracies on even lines only

Sentences: the Tatoeba test sets in SHARED/data/general/test (en, de, fr, cs
sides) and the Multi30k test sets in SHARED/data/multi30k (2016 flickr for all four
languages, 2017 flickr for en, de, fr). Detection reads only the model's language
list, so any model with these four languages gives the same figures
(tests/fixtures/tiny-model loads in a moment). Each sentence is sent alone, as a
`source: "auto"` request would be. Reports accuracy for 1-10 and 11+ words, per
language, and per confidence value (the server's confidence is its band's
measured accuracy, so the two columns should agree). The band accuracies in
text/detect.c come from --calibrate (even-numbered lines); the held-out
(odd-numbered) lines are reported separately to check them.
"""

import argparse
import gzip
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def corpora(shared):
    t = os.path.join(shared, "data", "general", "test")
    m = os.path.join(shared, "data", "multi30k")
    out = [("tatoeba", "en", f"{t}/tatoeba.en-de.en"), ("tatoeba", "de", f"{t}/tatoeba.en-de.de"),
           ("tatoeba", "fr", f"{t}/tatoeba.en-fr.fr"), ("tatoeba", "cs", f"{t}/tatoeba.en-cs.cs")]
    for y, langs in (("2016", "en de fr cs"), ("2017", "en de fr")):
        out += [("multi30k", l, f"{m}/test_{y}_flickr.{l}.gz") for l in langs.split()]
    return [c for c in out if os.path.exists(c[2])]


def lines(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as f:
        return [s.strip() for s in f if s.strip()]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running server (else build/deepmt is started)")
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "deepmt"))
    ap.add_argument("--model", default=os.path.join(REPO, "tests", "fixtures", "tiny-model"))
    ap.add_argument("--shared", default=os.path.join(REPO, "..", "shared"))
    ap.add_argument("--calibrate", action="store_true", help="even-numbered lines only")
    ap.add_argument("--errors", type=int, default=0, help="print this many wrong guesses")
    a = ap.parse_args()

    proc = None
    if a.url:
        host, port = a.url.split("//")[-1].rstrip("/").split(":")
        port = int(port)
    else:
        host, port = "127.0.0.1", free_port()
        proc = subprocess.Popen([a.bin, "serve", "--model", a.model, "--host", host, "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conn = None
    try:
        for _ in range(200):
            try:
                conn = http.client.HTTPConnection(host, port, timeout=30)
                conn.request("GET", "/health")
                conn.getresponse().read()
                break
            except OSError:
                conn = None
                time.sleep(0.05)
        if conn is None:
            sys.exit("detect_accuracy: the server did not come up")
        # (length band, split) -> [right, total]; confidence -> [right, total]
        by_len = defaultdict(lambda: [0, 0])
        by_conf = defaultdict(lambda: [0, 0])
        by_lang = defaultdict(lambda: [0, 0])
        errors = []
        t0 = time.time()
        n = 0
        for corpus, lang, path in corpora(a.shared):
            for i, s in enumerate(lines(path)):
                split = "calibration" if i % 2 == 0 else "held-out"
                if a.calibrate and split != "calibration":
                    continue
                conn.request("POST", "/detect", json.dumps({"q": s}), {"Content-Type": "application/json"})
                r = conn.getresponse()
                ans = json.loads(r.read())
                if r.status != 200:
                    sys.exit(f"detect_accuracy: {r.status} {ans}")
                guess, conf = ans[0]["language"], ans[0]["confidence"]
                ok = guess == lang
                words = len(s.split())
                band = "1-10 words" if words <= 10 else "11+ words"
                for key in ((band, corpus), (band, "all")):
                    by_len[key][0] += ok
                    by_len[key][1] += 1
                by_lang[(corpus, lang)][0] += ok
                by_lang[(corpus, lang)][1] += 1
                by_conf[(split, conf)][0] += ok
                by_conf[(split, conf)][1] += 1
                if not ok and len(errors) < a.errors:
                    errors.append(f"{lang} -> {guess} ({conf}): {s}")
                n += 1
        dt = time.time() - t0
    finally:
        if conn:
            conn.close()
        if proc:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)

    pct = lambda rt: f"{100.0 * rt[0] / rt[1]:6.2f}% ({rt[0]}/{rt[1]})" if rt[1] else "-"
    print(f"{n} sentences, {dt:.1f} s ({1000 * dt / max(n, 1):.2f} ms a request)")
    print("\naccuracy by length")
    for key in sorted(by_len):
        print(f"  {key[0]:<11} {key[1]:<9} {pct(by_len[key])}")
    print("\naccuracy by language")
    for key in sorted(by_lang):
        print(f"  {key[0]:<9} {key[1]}  {pct(by_lang[key])}")
    print("\naccuracy by reported confidence")
    for key in sorted(by_conf, key=lambda k: (k[0], -k[1])):
        print(f"  {key[0]:<12} confidence {key[1]:5.1f}: {pct(by_conf[key])}")
    for e in errors:
        print("  wrong:", e)


if __name__ == "__main__":
    main()
