#!/usr/bin/python3
"""scripts/evaluate.py against a fake LibreTranslate server started here (http.server
in a thread): scores, hypothesis files, batching, retries, error messages and exit
codes. TAP output."""

import gzip
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))

import tap  # noqa: E402
from testutil import free_port  # noqa: E402
import bleu  # noqa: E402

EVALUATE = os.path.join(REPO, "scripts", "evaluate.py")
LANGS = ["en", "de", "fr", "cs"]


# --------------------------------------------------------------------------- fake server

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, status, obj, headers=None):
        body = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        srv = self.server
        if self.path == "/languages" and srv.languages is not None:
            self._send(200, [{"code": c, "name": c, "targets": [t for t in srv.languages if t != c]}
                             for c in srv.languages])
        else:
            self._send(404, {"error": "Not Found"})

    def do_POST(self):
        srv = self.server
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        if self.path != "/translate":
            return self._send(404, {"error": "Not Found"})
        req = json.loads(raw)
        with srv.lock:
            srv.requests.append(req)
            scripted = srv.script.pop(0) if srv.script else None
        if scripted is not None:
            status, obj, headers = scripted
            return self._send(status, obj, headers)
        out = [srv.translate(q, req["source"], req["target"]) for q in req["q"]]
        if srv.drop_one and len(out) > 1:
            out = out[:-1]
        self._send(200, {"translatedText": out})


class FakeServer:
    """LibreTranslate look-alike. translate(text, src, tgt): table lookup, else upper."""

    def __init__(self):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        h = self.httpd
        h.lock = threading.Lock()
        h.requests, h.script, h.table = [], [], {}
        h.languages = list(LANGS)
        h.drop_one = False
        h.translate = lambda q, s, t: h.table.get(q, q.upper())
        self.url = f"http://127.0.0.1:{h.server_address[1]}"
        self.thread = threading.Thread(target=h.serve_forever, daemon=True)
        self.thread.start()

    def reset(self):
        h = self.httpd
        with h.lock:
            h.requests.clear()
            h.script.clear()
            h.drop_one = False
            h.languages = list(LANGS)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# --------------------------------------------------------------------------- helpers

def run_eval(*args, timeout=120):
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, EVALUATE, *args], capture_output=True, text=True,
                       timeout=timeout)
    p.elapsed = time.monotonic() - t0
    return p


def show(p):
    return f"rc {p.returncode}\n--- stdout\n{p.stdout[-1500:]}\n--- stderr\n{p.stderr[-1500:]}"


def write(path, lines, gz=False):
    opener = gzip.open if gz else open
    with opener(path, "wt", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)


def corpus(n, seed):
    """n source sentences, references, and a degraded "translation" of each reference."""
    rng = random.Random(seed)
    words = ("Ein Mann fährt mit dem Fahrrad durch die Stadt . Zwei Hunde spielen im "
             "Schnee , während Kinder lachen und ein Mädchen singt").split()
    src, ref, hyp = [], [], []
    for i in range(n):
        r = " ".join(rng.choice(words) for _ in range(rng.randint(4, 14)))
        toks = r.split()
        h = " ".join(t for j, t in enumerate(toks) if j % 4 != 3 or rng.random() < 0.3)
        src.append(f"source sentence {i}: " + " ".join(rng.choice(words).lower() for _ in range(5)))
        ref.append(r)
        hyp.append(h)
    return src, ref, hyp


def no_traceback(p):
    return "Traceback" not in p.stderr and "Traceback" not in p.stdout


# --------------------------------------------------------------------------- checks

def check_scores(srv, tmp):
    src, ref, expect = corpus(50, 1)
    src[7] = ""                               # an empty source line is never sent
    expect[7] = ""
    srv.httpd.table = dict(zip(src, expect))
    write(os.path.join(tmp, "s.en"), src)
    write(os.path.join(tmp, "r.de"), ref)
    rep, hyp_dir = os.path.join(tmp, "rep.json"), os.path.join(tmp, "hyps")
    srv.reset()
    p = run_eval("--src", os.path.join(tmp, "s.en"), "--ref", os.path.join(tmp, "r.de"),
                 "--direction", "en-de", "--url", srv.url, "--batch-size", "3",
                 "--concurrency", "4", "--json", rep, "--hyp-dir", hyp_dir, "--api-key", "k123")
    tap.ok(p.returncode == 0 and no_traceback(p), "files mode runs against the fake server", show(p))
    try:
        with open(rep, encoding="utf-8") as f:
            report = json.load(f)
        row = report["directions"][0]
    except (OSError, ValueError, KeyError, IndexError) as e:
        tap.ok(False, "report is readable JSON with one direction", f"{e}\n{show(p)}")
        return
    want_b = bleu.corpus_bleu(expect, ref)
    want_c = bleu.corpus_chrf(expect, ref)
    tap.ok(0 < want_b["score"] < 100, "the fake translations give a non-trivial BLEU", want_b["score"])
    tap.ok(abs(row["bleu"] - want_b["score"]) < 1e-9, "report BLEU equals bleu.py's for the same hyps",
           f"report {row['bleu']}, bleu.py {want_b['score']}")
    tap.ok(abs(row["chrf"] - want_c["score"]) < 1e-9, "report chrF equals bleu.py's",
           f"report {row['chrf']}, bleu.py {want_c['score']}")
    tap.ok(row["bleu_counts"] == want_b["counts"] and row["sentences"] == 50
           and row["direction"] == "en-de", "report counts, sentences and direction", json.dumps(row))
    hyp_file = os.path.join(hyp_dir, "en-de.hyp")
    got = bleu.read_lines(hyp_file) if os.path.isfile(hyp_file) else None
    tap.ok(got == expect, "hypothesis file is line-aligned and in order", f"{hyp_file}: {got and got[:3]}")
    reqs = srv.httpd.requests
    sizes = [len(r["q"]) for r in reqs]
    sent = [q for r in reqs for q in r["q"]]
    tap.ok(max(sizes) <= 3 and len(reqs) == 17 and "" not in sent and sorted(sent) == sorted(s for s in src if s),
           "49 non-empty sentences sent in batches of at most 3", f"sizes {sizes}")
    tap.ok(all(r.get("api_key") == "k123" and r["source"] == "en" and r["target"] == "de"
               and r["format"] == "text" for r in reqs), "request body: source, target, format, api_key",
           json.dumps(reqs[0])[:300] if reqs else "no request")
    tap.ok(f"{want_b['score']:.2f}" in p.stdout and "en-de" in p.stdout and "sent/s" in p.stdout
           and "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in p.stdout,
           "table and signature printed", p.stdout)
    tap.ok("50/50 sentences" in p.stderr and "ETA" in p.stderr, "progress on stderr", p.stderr[-500:])


def check_retries(srv, tmp):
    src, ref, _ = corpus(10, 2)
    srv.httpd.table = {}
    write(os.path.join(tmp, "s2.en"), src)
    write(os.path.join(tmp, "r2.de"), ref)
    base = ["--src", os.path.join(tmp, "s2.en"), "--ref", os.path.join(tmp, "r2.de"),
            "--direction", "en-de", "--url", srv.url, "--batch-size", "10", "--quiet"]
    rep = os.path.join(tmp, "rep2.json")
    srv.reset()
    srv.httpd.script = [(503, {"error": "queue full"}, {"Retry-After": "1"})]
    p = run_eval(*base, "--json", rep)
    try:
        with open(rep, encoding="utf-8") as f:
            row = json.load(f)["directions"][0]
    except (OSError, ValueError, KeyError, IndexError):
        row = {}
    want = bleu.corpus_bleu([s.upper() for s in src], ref)["score"]
    tap.ok(p.returncode == 0 and len(srv.httpd.requests) == 2 and row.get("retries") == 1
           and abs(row.get("bleu", -1) - want) < 1e-9,
           "503 then 200: retried once, scored", f"{show(p)}\nrequests {len(srv.httpd.requests)} row {row}")
    tap.ok(p.elapsed >= 0.9, "Retry-After: 1 honoured", f"took {p.elapsed:.2f}s")

    srv.reset()
    srv.httpd.script = [(429, {"error": "slow down"}, {"Retry-After": "0"}),
                        (502, {"error": "bad gateway"}, {})]
    p = run_eval(*base)
    tap.ok(p.returncode == 0 and len(srv.httpd.requests) == 3, "429 and 502 retried, then success",
           f"{show(p)}\nrequests {len(srv.httpd.requests)}")

    srv.reset()
    srv.httpd.script = [(500, {"error": "model exploded"}, {"Retry-After": "0"})] * 10
    p = run_eval(*base, "--retries", "2")
    tap.ok(p.returncode == 1 and "model exploded" in p.stderr and "after 3 attempts" in p.stderr
           and len(srv.httpd.requests) == 3 and no_traceback(p),
           "persistent 500: bounded retries, error field shown, exit 1",
           f"{show(p)}\nrequests {len(srv.httpd.requests)}")

    srv.reset()
    srv.httpd.script = [(400, {"error": "Invalid request: unsupported format"}, {})]
    p = run_eval(*base)
    tap.ok(p.returncode == 1 and "unsupported format" in p.stderr and "400" in p.stderr
           and len(srv.httpd.requests) == 1 and no_traceback(p),
           "400 error response: not retried, error field shown, exit 1", show(p))

    srv.reset()
    srv.httpd.drop_one = True
    p = run_eval(*base)
    tap.ok(p.returncode == 1 and "9 translations for 10 sentences" in p.stderr and no_traceback(p),
           "wrong number of translations: clear error, exit 1", show(p))


def check_errors(srv, tmp):
    src, ref, _ = corpus(10, 3)
    s, r = os.path.join(tmp, "s3.en"), os.path.join(tmp, "r3.de")
    write(s, src)
    write(r, ref[:9])
    p = run_eval("--src", s, "--ref", r, "--direction", "en-de", "--url", srv.url)
    tap.ok(p.returncode == 2 and "line counts differ" in p.stderr and "10" in p.stderr
           and "9" in p.stderr and no_traceback(p), "mismatched line counts: message, exit 2", show(p))
    write(r, ref)
    p = run_eval("--src", s, "--ref", r, "--direction", "en-de", "--url",
                 f"http://127.0.0.1:{free_port()}")
    tap.ok(p.returncode == 3 and "cannot reach the server" in p.stderr and no_traceback(p),
           "unreachable server: message, exit 3", show(p))
    p = run_eval("--src", s, "--ref", r, "--direction", "english-german", "--url", srv.url)
    tap.ok(p.returncode == 2 and "unknown direction" in p.stderr and no_traceback(p),
           "malformed direction: message, exit 2", show(p))
    srv.reset()
    p = run_eval("--src", s, "--ref", r, "--direction", "en-ja", "--url", srv.url)
    tap.ok(p.returncode == 2 and "en-ja" in p.stderr and "does not offer" in p.stderr
           and not srv.httpd.requests and no_traceback(p),
           "direction the server lacks (per /languages): message, exit 2", show(p))
    p = run_eval("--multi30k", tmp, "--directions", "en-xx", "--url", srv.url)
    tap.ok(p.returncode == 2 and "unknown language 'xx'" in p.stderr and no_traceback(p),
           "unknown Multi30k language: message, exit 2", show(p))
    p = run_eval("--src", os.path.join(tmp, "nope.en"), "--ref", r, "--direction", "en-de",
                 "--url", srv.url)
    tap.ok(p.returncode == 2 and "nope.en" in p.stderr and no_traceback(p),
           "missing source file: message, exit 2", show(p))


def check_multi30k(srv, tmp):
    d = os.path.join(tmp, "m30k")
    os.makedirs(d)
    n = 12
    data = {lang: [f"{lang} line {i} with some words" for i in range(n)] for lang in ("en", "de", "fr")}
    for lang, lines in data.items():
        write(os.path.join(d, f"test_x.{lang}.gz"), lines, gz=True)
    # the fake "translates" a line of one language into the same line of the other
    table = {}
    for s in data:
        for i in range(n):
            table[data[s][i]] = f"translated {i}"
    srv.httpd.table = table
    rep, hyps = os.path.join(tmp, "m.json"), os.path.join(tmp, "mh")
    srv.reset()
    p = run_eval("--multi30k", d, "--split", "test_x", "--directions", "all", "--limit", "5",
                 "--url", srv.url, "--json", rep, "--hyp-dir", hyps, "--quiet")
    try:
        with open(rep, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError):
        report = {"directions": [], "skipped": []}
    dirs = sorted(r["direction"] for r in report["directions"])
    want = sorted(f"{a}-{b}" for a in data for b in data if a != b)
    tap.ok(p.returncode == 0 and dirs == want, "Multi30k all: the 6 directions without cs run",
           f"{dirs}\n{show(p)}")
    skipped = sorted(x["direction"] for x in report["skipped"])
    tap.ok(len(skipped) == 6 and all("cs" in x for x in skipped) and "skipping en-cs" in p.stderr,
           "directions needing the absent cs file are skipped with a message", f"{skipped}\n{p.stderr}")
    tap.ok(all(r["sentences"] == 5 for r in report["directions"])
           and len(srv.httpd.requests) == 6, "--limit 5: five sentences a direction, one request each",
           f"{[r['sentences'] for r in report['directions']]} requests {len(srv.httpd.requests)}")
    rows = report["directions"]
    mean = report.get("mean", {}).get("bleu")
    tap.ok(rows and mean is not None and abs(mean - sum(r["bleu"] for r in rows) / len(rows)) < 1e-9
           and "mean" in p.stdout, "mean BLEU over directions in report and table", f"{mean}\n{p.stdout}")
    f = os.path.join(hyps, "test_x.de-fr.hyp")
    got = bleu.read_lines(f) if os.path.isfile(f) else None
    tap.ok(got == [f"translated {i}" for i in range(5)] and len(os.listdir(hyps)) == 6,
           "one hypothesis file a direction", f"{got} {os.listdir(hyps) if os.path.isdir(hyps) else ''}")
    srv.reset()
    p = run_eval("--multi30k", d, "--split", "test_x", "--directions", "en-de,de-en", "--quiet",
                 "--url", srv.url)
    rows = [ln.split()[0] for ln in p.stdout.splitlines() if ln[:5] in ("en-de", "de-en")]
    tap.ok(p.returncode == 0 and rows == ["en-de", "de-en"], "explicit directions in order", show(p))
    p = run_eval("--multi30k", d, "--split", "nosuch", "--directions", "all", "--url", srv.url)
    tap.ok(p.returncode == 2 and "nothing to evaluate" in p.stderr and no_traceback(p),
           "split with no files: message, exit 2", show(p))


def check_suite(srv, tmp):
    """--suite: every test set whose files exist, one table a set; and the robustness
    report (scripts/robustness.py) on the same fake data, whose 'translation' keeps
    digits, spans and case-insensitive text (upper-casing) but one sentence loops."""
    root = os.path.join(tmp, "shared")
    m30k, gen = os.path.join(root, "data", "multi30k"), os.path.join(root, "data", "general", "test")
    os.makedirs(m30k)
    os.makedirs(gen)
    for lang in LANGS:
        write(os.path.join(m30k, f"test_2016_flickr.{lang}.gz"), [f"{lang} caption {i}" for i in range(4)], gz=True)
        write(os.path.join(gen, f"flores101.devtest.{lang}"), [f"{lang} wiki {i} in 2024" for i in range(3)])
    for a, b in (("en", "de"), ("en", "fr")):
        for lang in (a, b):
            write(os.path.join(gen, f"tatoeba.{a}-{b}.{lang}"),
                  [f"{lang} everyday {i}." for i in range(5)] + ["loop here."])
    srv.reset()
    srv.httpd.table = {}
    # French sources: the first plain space between digits becomes a comma ("1,234 567": the value changes)
    srv.httpd.translate = lambda q, s_, t_: ("LOOOOOP" if q.lower().startswith("loop") else
                                             re.sub(r"(\d) (\d)", r"\1,\2", q.upper(), count=1) if s_ == "fr" else
                                             q.upper())
    rep, hyps = os.path.join(tmp, "suite.json"), os.path.join(tmp, "suite-hyp")
    p = run_eval("--suite", root, "--url", srv.url, "--json", rep, "--hyp-dir", hyps, "--quiet")
    try:
        with open(rep, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError):
        report = {"directions": []}
    sets = {}
    for r in report["directions"]:
        sets.setdefault(r["set"], []).append(r["direction"])
    tap.ok(p.returncode == 0 and len(sets.get("multi30k/test_2016_flickr", [])) == 12
           and len(sets.get("flores101", [])) == 12 and sorted(sets.get("tatoeba", [])) == ["de-en", "en-de", "en-fr", "fr-en"],
           "--suite: every direction of every set present (Multi30k 12, FLORES 12, Tatoeba 4)", f"{sets}\n{show(p)}")
    tap.ok("== flores101" in p.stdout and "tatoeba" in p.stdout.split("== tatoeba")[-1],
           "--suite prints a table a set and the per-set means", p.stdout[-800:])
    tap.ok(os.path.isfile(os.path.join(hyps, "multi30k.test_2016_flickr.en-de.hyp"))
           and os.path.isfile(os.path.join(hyps, "flores101.cs-fr.hyp")), "--suite: hypothesis files named by set")
    p = run_eval("--suite", root, "--sets", "tatoeba,nosuch", "--url", srv.url)
    tap.ok(p.returncode == 2 and "unknown test set" in p.stderr and no_traceback(p), "unknown set: message, exit 2", show(p))
    # --ui: the user-interface strings' test set (tools/ui_strings.py's folder)
    ui = os.path.join(tmp, "ui")
    os.makedirs(os.path.join(ui, "test"))
    for lang in ("de", "cs"):
        write(os.path.join(ui, "test", f"ui.en-{lang}.en"), ["Cancel the print job now", "Save the file as a new one"])
        write(os.path.join(ui, "test", f"ui.en-{lang}.{lang}"), ["CANCEL THE PRINT JOB NOW", "SAVE THE FILE AS A NEW ONE"])
    rep_ui = os.path.join(tmp, "suite-ui.json")
    p = run_eval("--suite", root, "--ui", ui, "--sets", "ui", "--url", srv.url, "--json", rep_ui, "--quiet")
    try:
        with open(rep_ui, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError):
        report = {"directions": []}
    got = sorted((r["set"], r["direction"], r["bleu"]) for r in report["directions"])
    tap.ok(p.returncode == 0 and [g[:2] for g in got] == [("ui", "cs-en"), ("ui", "de-en"), ("ui", "en-cs"), ("ui", "en-de")]
           and abs(got[2][2] - 100.0) < 1e-6 and report.get("ui") == os.path.abspath(ui)
           and any(x.get("direction") == "ui en-fr" for x in report.get("skipped", [])),
           "--suite --ui: the UI strings' directions present scored (en-fr skipped: no files), the folder recorded",
           f"{got} {report.get('skipped')}\n{show(p)}")
    p = run_eval("--suite", root, "--sets", "ui", "--url", srv.url)
    tap.ok(p.returncode == 2 and "unknown test set" in p.stderr, "--sets ui without --ui: unknown set, exit 2", show(p))
    p = run_eval("--suite", root, "--ui", os.path.join(tmp, "no-ui"), "--url", srv.url)
    tap.ok(p.returncode == 2 and "no test folder" in p.stderr and no_traceback(p),
           "--ui naming a folder without test/: message, exit 2", show(p))
    rj = os.path.join(tmp, "rob.json")
    r = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "robustness.py"), "--url", srv.url,
                        "--suite", root, "--json", rj, "--quiet"], capture_output=True, text=True, timeout=120)
    try:
        with open(rj, encoding="utf-8") as f:
            rob = json.load(f)
    except (OSError, ValueError):
        rob = None
    tap.ok(r.returncode == 0 and rob is not None, "robustness report runs", r.stdout + r.stderr)
    if rob:
        tap.ok(rob["digits"]["sentences"] == 18 and rob["digits"]["share"] == 1.0,
               "robustness: digit runs kept in every FLORES sentence with digits", str(rob["digits"]))
        tap.ok(rob["runs"]["outputs"] == 24 and rob["runs"]["with_new_run"] == 4,
               "robustness: a looping output (a run the source lacks) is counted, once a direction", str(rob["runs"]))
        tap.ok(rob["all_caps"]["share"] == 1.0 and rob["url"]["share"] == 0 and rob["email"]["share"] == 0
               and 0.75 <= rob["emoji"]["share"] < 1.0,
               "robustness: ALL-CAPS compared case-insensitively; a span counts only when unchanged "
               "(upper-cased URLs and e-mails do not, emoji do except in the looping sentence)",
               json.dumps({k: rob[k] for k in ("all_caps", "url", "email", "emoji")}))
        tap.ok(rob["code"]["spans"] == rob["url"]["spans"] > 0 and rob["code"]["share"] == 0
               and 0.5 <= rob["scripts"]["share"] < 1.0,
               "robustness: technical words and words in other scripts, one a sentence; upper-cased ones count as "
               "changed (code has letters everywhere, Cyrillic and Greek words have case, the rest do not)",
               json.dumps({k: rob[k] for k in ("url", "code", "scripts")}))
        tap.ok(rob["rules"]["spans"] == rob["url"]["spans"] and 0.75 <= rob["rules"]["share"] < 1.0,
               "robustness: rules and blanks have no case: kept except in the looping sentence",
               json.dumps(rob["rules"]))
        tap.ok(rob["placeholders"]["spans"] == rob["url"]["spans"] and 0 < rob["placeholders"]["share"] < 0.5
               and "placeholders" in r.stdout,
               "robustness: format placeholders, one a sentence; upper-cased ones count as changed ({0} and "
               "$(ARG1) have no case)", json.dumps(rob["placeholders"]))
        num = rob.get("numbers", {})
        tap.ok(num.get("sentences") == 24 and num.get("share") == 0.75 and num["per_direction"]["fr-de"]["kept"] == 0
               and num["per_direction"]["en-fr"]["kept"] == 3,
               "robustness: a large number grouped as the source language writes it (8 directions); a translation "
               "whose separators change its value does not keep it", json.dumps(num))
    r = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "robustness.py"), "--url", srv.url,
                        "--suite", root, "--json", rj, "--quiet", "--checks", "numbers"], capture_output=True, text=True,
                       timeout=120)
    try:
        with open(rj, encoding="utf-8") as f:
            only = json.load(f)
    except (OSError, ValueError):
        only = {}
    tap.ok(r.returncode == 0 and "numbers" in only and "digits" not in only and "runs" not in only
           and "numbers" in r.stdout, "robustness --checks numbers: that check alone", r.stdout + r.stderr)
    r = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "robustness.py"), "--url", srv.url,
                        "--suite", root, "--checks", "digits,nosuch"], capture_output=True, text=True, timeout=120)
    tap.ok(r.returncode == 2 and "--checks" in r.stderr and "Traceback" not in r.stderr,
           "robustness --checks with an unknown check: message, exit 2", r.stderr)
    srv.httpd.translate = lambda q, s_, t_: srv.httpd.table.get(q, q.upper())


def main():
    srv = FakeServer()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            check_scores(srv, tmp)
            check_retries(srv, tmp)
            check_errors(srv, tmp)
            check_multi30k(srv, tmp)
            check_suite(srv, tmp)
    finally:
        srv.close()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
