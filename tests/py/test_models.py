#!/usr/bin/python3
"""Several models in one server (TAP): routing, pivoting, /languages, /models, reload.

Makes small random models (tools/make_random_model.py, the tiny fixture's
tokenizer) with different language sets: "main" (en, de, fr), "esp" (en, es),
"ita" (it, en), "asia" (ja, ko: no English, so nothing pivots to it). Their
language codes are just names for the tokenizer's language tokens, so each random
model gives its own, deterministic output for a language.

Checks: each pair goes to the model that has it (its answers equal those of a
server with that model alone); a pair no model has is served through English
and gives exactly what the two requests by hand give (text, alternatives,
several texts); "model" picks one; /languages is the union with the targets
routes reach; an unreachable pair is a 400 naming what is served; source auto
routes each text by its own language; per-model metrics; then, with --models
FOLDER, a SIGHUP under a client loop that adds a model, replaces one and removes
one: zero failed requests, each answer from the version current when it was
sent, /ready 200 throughout; a corrupt replacement leaves the old one serving and
says why in /models; POST /admin/reload with the admin key.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import tap  # noqa: E402
import test_server as ts  # noqa: E402
from nodetools import node_modules, repo_path  # noqa: E402
from testutil import free_port  # noqa: E402

SPM = os.path.join(REPO, "tests", "fixtures", "tiny-model", "sentencepiece.model")
TOKENS = {"en": ("__en__", 4), "x1": ("__de__", 5), "x2": ("__fr__", 6), "x3": ("__cs__", 7)}
NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian", "ja": "Japanese",
         "ko": "Korean", "pt": "Portuguese"}
TMP = tempfile.mkdtemp(prefix="deepmt-test-models-")
PYTHON = "/usr/bin/python3"  # Debian's, with numpy (tools/)


def make_model(path, seed, langs):
    """A random 2+2-layer model at path whose languages are langs (code -> token slot)."""
    r = subprocess.run([PYTHON, os.path.join(REPO, "tools", "make_random_model.py"), "--out", path,
                        "--encoder-layers", "2", "--decoder-layers", "2", "--d-model", "32", "--heads", "2",
                        "--ffn", "64", "--vocab", "400", "--max-positions", "256", "--seed", str(seed),
                        "--spm", SPM], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-800:])
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    cfg["languages"] = [{"code": code, "name": NAMES[code], "token": TOKENS[slot][0], "id": TOKENS[slot][1]}
                        for code, slot in langs]
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(path, "README.md"), "w") as f:
        f.write(f"# random test model {os.path.basename(path)} (seed {seed})\n")


MAIN = [("en", "en"), ("de", "x1"), ("fr", "x2")]
ESP = [("en", "en"), ("es", "x3")]
ITA = [("it", "x1"), ("en", "en")]
ASIA = [("ja", "x1"), ("ko", "x2")]
POR = [("en", "en"), ("pt", "x2")]


class Serve:
    """deepmt serve with the given arguments (no default --model)."""

    def __init__(self, *args, env=None):
        self.port = free_port()
        self.log_path = os.path.join(TMP, f"server-{self.port}.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([ts.BIN, "serve", "--host", "127.0.0.1", "--port", str(self.port),
                                      "--workers", "2", *args], stdout=subprocess.DEVNULL, stderr=self.log,
                                     env={**os.environ, **(env or {})})
        end = time.time() + 30 * ts.SLOW
        while time.time() < end and self.proc.poll() is None:
            try:
                if ts.request(self.port, "GET", "/ready", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30 * ts.SLOW)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        err = self.stderr()
        for needle in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "WARNING: ThreadSanitizer"):
            if needle in err:
                i = err.index(needle)
                ts.SANITIZER_REPORTS.append(f"{self.log_path}: {err[max(0, i - 200):i + 1500]}")
        return rc

    def stderr(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


def tr(port, q, source, target, **extra):
    st, h, j = ts.jreq(port, "POST", "/translate", {"q": q, "source": source, "target": target, **extra})
    return st, h, j


# --------------------------------------------------------------------------- routing and pivots


def test_routing(d):
    alone = {}
    for name in ("main", "esp", "ita"):
        s = Serve("--model", os.path.join(d, name))
        alone[name] = {pair: tr(s.port, "A dog runs in the park.", *pair)[2] for pair in
                       [("en", "de"), ("de", "en"), ("en", "es"), ("es", "en"), ("it", "en"), ("en", "it")]
                       if all(c in [l for l, _ in {"main": MAIN, "esp": ESP, "ita": ITA}[name]] for c in pair)}
        s.stop()
    srv = Serve("--model", os.path.join(d, "main"), "--model", os.path.join(d, "esp"),
                "--model", os.path.join(d, "ita"), "--model", os.path.join(d, "asia"))
    p = srv.port
    try:
        tap.ok(srv.proc.poll() is None, "a server with four models starts", srv.stderr()[-800:])
        st, h, langs = ts.jreq(p, "GET", "/languages")
        by = {l["code"]: l for l in langs} if st == 200 else {}
        tap.ok(set(by) == {"en", "de", "fr", "es", "it", "ja", "ko"}, "/languages is the union of the models'",
               f"{st} {langs}")
        tap.ok(sorted(by.get("de", {}).get("targets", [])) == ["en", "es", "fr", "it"],
               "de's targets: its model's and, through English, es and it", f"{by.get('de')}")
        tap.ok(sorted(by.get("ja", {}).get("targets", [])) == ["ko"], "ja reaches only ko (no English there)",
               f"{by.get('ja')}")
        tap.ok(by.get("es", {}).get("name") == "Spanish", "a language keeps its name", f"{by.get('es')}")
        for name, answers in alone.items():
            for (src, tgt), want in answers.items():
                st, h, j = tr(p, "A dog runs in the park.", src, tgt)
                tap.ok(st == 200 and j == want and h.get("x-deepmt-model") == name and "x-deepmt-pivot" not in h,
                       f"{src}->{tgt} goes to {name}: the same answer as {name} alone",
                       f"{st} {h.get('x-deepmt-model')} {j} want {want}")
        # the model field
        st, h, j = tr(p, "A dog.", "en", "de", model="main")
        tap.ok(st == 200 and h.get("x-deepmt-model") == "main", "\"model\": \"main\" is used", f"{st} {h} {j}")
        st, h, j = tr(p, "A dog.", "en", "de", model="esp")
        tap.ok(st == 400 and "model 'esp' does not translate 'en' into 'de'" in ts.error_of(j)
               and "en, es" in ts.error_of(j), "a model without the pair: 400 saying what it has", f"{st} {j}")
        st, h, j = tr(p, "A dog.", "en", "de", model="nope")
        tap.ok(st == 400 and "model 'nope' is not served" in ts.error_of(j) and "main: en, de, fr" in ts.error_of(j),
               "an unknown model: 400 listing the models", f"{st} {j}")
        st, h, j = tr(p, "A dog.", "en", "de", model=3)
        tap.ok(st == 400 and "model must be a string" in ts.error_of(j), "a non-string model: 400", f"{st} {j}")
        # an unreachable pair
        st, h, j = tr(p, "A dog.", "ja", "de")
        e = ts.error_of(j)
        tap.ok(st == 400 and "no model translates 'ja' into 'de'" in e and "asia: ja, ko" in e and "esp: en, es" in e,
               "a pair nothing reaches: 400 naming what is served", f"{st} {j}")
        st, h, j = tr(p, "A dog.", "ja", "ko")
        tap.ok(st == 200 and h.get("x-deepmt-model") == "asia", "ja->ko on the model without English", f"{st} {h}")
        # pivots
        # a pivot goes sentence by sentence: each sentence's English is translated as a
        # text of its own (docs/server.md), so by hand is sentence by sentence too
        for sentences in (["Der Mann liest."], ["Ein Hund läuft im Park.", "Zwei Katzen schlafen."]):
            st, h, j = tr(p, " ".join(sentences), "de", "es")
            by_hand = []
            for sentence in sentences:
                st1, _, en = tr(p, sentence, "de", "en")
                st2, _, es = tr(p, en.get("translatedText", ""), "en", "es") if st1 == 200 else (0, {}, {})
                by_hand.append(es.get("translatedText") if st2 == 200 else None)
            tap.ok(st == 200 and j.get("translatedText") == " ".join(map(str, by_hand)),
                   f"de->es through English = de->en then en->es by hand ({len(sentences)} sentence(s))",
                   f"pivot {st} {j}; by hand {by_hand}")
            tap.ok(h.get("x-deepmt-pivot") == "en" and h.get("x-deepmt-model") == "main,esp",
                   "the answer says it was pivoted, and by which models", f"{h}")
        st, h, j = tr(p, "Ein Hund läuft im Park.", "de", "es", alternatives=2)
        _, _, en = tr(p, "Ein Hund läuft im Park.", "de", "en")
        _, _, es = tr(p, en.get("translatedText", ""), "en", "es", alternatives=2)
        tap.ok(st == 200 and j.get("alternatives") == es.get("alternatives") and "alternatives" in j,
               "a pivot's alternatives: the second leg's n-best from the first leg's best", f"{j} vs {es}")
        q = ["Ein Hund.", "", "Drei Kinder spielen im Garten."]
        st, h, j = tr(p, q, "de", "it", alignments=True)
        _, _, en = tr(p, q, "de", "en")
        _, _, it = tr(p, en.get("translatedText", []), "en", "it")
        tap.ok(st == 200 and j.get("translatedText") == it.get("translatedText") and len(j.get("alignments", [])) == 3,
               "an array through English, with alignments", f"{j} vs {it}")
        st, h, j = tr(p, "Ein Hund läuft.", "de", "it", format="html")
        tap.ok(st == 200 and isinstance(j.get("translatedText"), str), "html through English", f"{st} {j}")
        # source auto: each text by its language
        q = ["Das ist ein kleiner Hund, der im Park spielt.", "Questo è un piccolo cane che gioca nel parco."]
        st, h, j = tr(p, q, "auto", "en")
        det = [x.get("language") for x in j.get("detectedLanguage", [])] if st == 200 else []
        _, _, one = tr(p, q[0], "de", "en")
        _, _, two = tr(p, q[1], "it", "en")
        tap.ok(st == 200 and det == ["de", "it"] and j["translatedText"] == [one.get("translatedText"),
                                                                            two.get("translatedText")]
               and set(h.get("x-deepmt-model", "").split(",")) == {"main", "ita"},
               "source auto: each text detected among all languages and routed by it", f"{st} {h} {j}")
        # the npm libretranslate client, unchanged
        mods, why = node_modules()
        if not mods:
            tap.skip(f"npm libretranslate client: {why}")
        else:
            outs = []
            for src, tgt, text in (("en", "es", "A small dog."), ("de", "es", "Ein kleiner Hund.")):
                r = subprocess.run(["node", repo_path("tests/js/lt_client.js"), f"http://127.0.0.1:{p}", src, tgt,
                                    "text", text], capture_output=True, timeout=120, env={**os.environ, "NODE_PATH": mods})
                try:
                    got = json.loads(r.stdout).get("result")
                except ValueError:
                    got = r.stdout
                outs.append((got, tr(p, text, src, tgt)[2].get("translatedText")))
            tap.ok(all(a == b and isinstance(a, str) for a, b in outs),
                   "the npm libretranslate client, unchanged: a direct pair and a pivot", str(outs))
        # /models and metrics
        st, h, j = ts.jreq(p, "GET", "/models")
        names = [m["name"] for m in j.get("models", [])] if st == 200 else []
        tap.ok(names == ["main", "esp", "ita", "asia"] and j["models"][1]["languages"] == ["en", "es"]
               and j["models"][0]["parameters"] > 0 and j["models"][0]["preferred"] and j["generation"] == 1
               and j["models"][0]["summary"].startswith("random test model main"),
               "/models: names, languages, size, preference and card summary", f"{st} {j}")
        st, h, body = ts.request(p, "GET", "/metrics")
        text = body.decode()
        esp_requests = [line for line in text.splitlines() if line.startswith('deepmt_model_requests_total{model="esp"}')]
        piv = [line for line in text.splitlines()
               if line.startswith('deepmt_model_pivot_requests_total{model="main"}')]
        tap.ok(esp_requests and int(esp_requests[0].split()[-1]) >= 5 and piv and int(piv[0].split()[-1]) >= 4,
               "per-model request and pivot counters in /metrics", "\n".join(esp_requests + piv))
    finally:
        rc = srv.stop()
    tap.ok(rc == 0, "the server stops cleanly (exit 0)", srv.stderr()[-800:])


def test_whole_batches(d):
    """--batching whole: a worker's states per model, the same answers."""
    cont = Serve("--model", os.path.join(d, "main"), "--model", os.path.join(d, "esp"))
    whole = Serve("--model", os.path.join(d, "main"), "--model", os.path.join(d, "esp"), "--batching", "whole")
    try:
        same = []
        for src, tgt, text in (("en", "de", "A dog runs."), ("en", "es", "A cat sleeps."), ("de", "es", "Ein Hund."),
                               ("en", "de", "Two men."), ("es", "de", "Un perro.")):
            a, b = tr(cont.port, text, src, tgt), tr(whole.port, text, src, tgt)
            same.append(a[0] == b[0] == 200 and a[2] == b[2])
        tap.ok(all(same), "whole batches: models alternating, pivots included, answer as continuous batching does",
               str(same))
    finally:
        rc = cont.stop() | whole.stop()
    tap.ok(rc == 0, "both stop cleanly", whole.stderr()[-600:])


def test_no_starving(d):
    """One worker with room for 4 sentences, one request of 300 sentences (beam 8, of
    1 to 9 words: they finish at different steps, so main's session never empties)
    on main: a one-sentence request for esp, sent once main's is running, is answered
    long before main's ends. (It waited for main's last sentence before the worker
    took the fairest request first, whatever its model.)"""
    srv = Serve("--model", os.path.join(d, "main"), "--model", os.path.join(d, "esp"), "--workers", "1",
                "--threads", "1", "--max-batch-sentences", "4")
    heavy_q = [" ".join(f"word{i * 7 + k}" for k in range(1 + i % 9)) + "." for i in range(300)]
    done = {}

    def heavy():
        done["heavy_status"] = tr(srv.port, heavy_q, "en", "de", beam_size=8)[0]
        done["heavy"] = time.time()
    try:
        t = threading.Thread(target=heavy)
        t.start()
        end = time.time() + 10 * ts.SLOW
        while time.time() < end:  # until the heavy request holds the worker
            st, _, body = ts.request(srv.port, "GET", "/metrics")
            if b"deepmt_busy_workers 1" in body:
                break
            time.sleep(0.01)
        t0 = time.time()
        st, h, j = tr(srv.port, "A cat.", "en", "es")
        light = time.time()
        t.join(120)
        tap.ok(st == 200 and h.get("x-deepmt-model") == "esp" and done.get("heavy_status") == 200
               and light < done.get("heavy", 0) - 0.5 * (done.get("heavy", 0) - t0),
               "a model with one short request is served while another model's long request runs (no starving)",
               f"light {light - t0:.2f} s, heavy {done.get('heavy', 0) - t0:.2f} s after the light one was sent, "
               f"heavy status {done.get('heavy_status')}")
    finally:
        srv.stop()


def test_bad_lists(d):
    r = subprocess.run([ts.BIN, "serve", "--model", os.path.join(d, "main"), "--model", os.path.join(d, "main"),
                        "--port", "0"], capture_output=True, text=True, timeout=30)
    tap.ok(r.returncode != 0 and "two models named 'main'" in r.stderr, "a name twice: refused at start",
           r.stderr[-400:])
    r = subprocess.run([ts.BIN, "serve", "--model", "bad/name=" + os.path.join(d, "main"), "--port", "0"],
                       capture_output=True, text=True, timeout=30)
    tap.ok(r.returncode != 0 and "model name" in r.stderr, "a bad name: refused", r.stderr[-400:])
    empty = os.path.join(TMP, "empty")
    os.makedirs(empty, exist_ok=True)
    r = subprocess.run([ts.BIN, "serve", "--models", empty, "--port", "0"], capture_output=True, text=True, timeout=30)
    tap.ok(r.returncode != 0 and "no model directories" in r.stderr, "an empty --models folder: refused",
           r.stderr[-400:])


# --------------------------------------------------------------------------- reload


def write_list(folder, entries):
    with open(os.path.join(folder, "models.json.tmp"), "w") as f:
        json.dump({"models": [{"name": n, "dir": d} for n, d in entries]}, f)
    os.replace(os.path.join(folder, "models.json.tmp"), os.path.join(folder, "models.json"))


def generation(port):
    st, _, j = ts.jreq(port, "GET", "/models")
    return j.get("generation", 0) if st == 200 else 0, j


def wait_generation(port, g, timeout=30):
    end = time.time() + timeout * ts.SLOW
    while time.time() < end:
        got, j = generation(port)
        if got >= g:
            return j
        time.sleep(0.05)
    return None


def wait_log(srv, *texts, timeout=10):
    """Whether the server's log shows every one of texts within timeout seconds: a
    reload publishes its models before the main thread logs them, so a client can
    see the new generation first."""
    end = time.time() + timeout * ts.SLOW
    while not all(t in srv.stderr() for t in texts) and time.time() < end:
        time.sleep(0.05)
    return all(t in srv.stderr() for t in texts)


def test_reload(d):
    folder = os.path.join(TMP, "served")
    os.makedirs(folder)
    for name, src in (("main", "main"), ("esp-v1", "esp"), ("por", "por")):
        shutil.copytree(os.path.join(d, src), os.path.join(folder, name))
    make_model(os.path.join(folder, "esp-v2"), 77, ESP)
    shutil.copytree(os.path.join(d, "ita"), os.path.join(folder, "ita"))
    write_list(folder, [("main", "main"), ("esp", "esp-v1"), ("por", "por")])
    text = "A man reads a book."
    want = {}
    for v in ("esp-v1", "esp-v2"):
        s = Serve("--model", os.path.join(folder, v))
        want[v] = tr(s.port, text, "en", "es")[2].get("translatedText")
        s.stop()
    tap.ok(want["esp-v1"] != want["esp-v2"], "the two versions of esp translate differently (the check can fail)",
           str(want))
    srv = Serve("--models", folder, "--admin-key", "sesame", env={"DEEPMT_MODEL": os.path.join(d, "asia")})
    p = srv.port
    results, ready_fail, stop = [], [], threading.Event()
    marks = {}

    def client(pair):
        while not stop.is_set():
            t0 = time.time()
            try:
                st, h, j = tr(p, text, *pair)
                results.append((t0, pair, st, j.get("translatedText") if isinstance(j, dict) else None, time.time()))
            except OSError as e:
                results.append((t0, pair, -1, str(e), time.time()))

    def ready_poll():
        while not stop.is_set():
            try:
                if ts.request(p, "GET", "/ready", timeout=5)[0] != 200:
                    ready_fail.append(time.time())
            except OSError:
                ready_fail.append(time.time())
            time.sleep(0.02)

    threads = [threading.Thread(target=client, args=(pair,)) for pair in (("en", "es"), ("en", "es"), ("en", "de"))]
    threads.append(threading.Thread(target=ready_poll))
    try:
        g, j = generation(p)
        tap.ok(g == 1 and [m["name"] for m in j["models"]] == ["main", "esp", "por"],
               "--models FOLDER serves models.json's list (DEEPMT_MODEL, an image's default, left out)",
               f"{j} {srv.stderr()[-600:]}")
        for t in threads:
            t.start()
        time.sleep(0.5)
        write_list(folder, [("main", "main"), ("esp", "esp-v2"), ("ita", "ita")])  # + ita, esp replaced, - por
        marks["hup"] = time.time()
        srv.proc.send_signal(signal.SIGHUP)
        j = wait_generation(p, 2)
        marks["installed"] = time.time()
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(60)
        tap.ok(j is not None and [m["name"] for m in j["models"]] == ["main", "esp", "ita"] and not j["failures"],
               "SIGHUP: the new list is served (ita added, por removed)", f"{j}")
        failed = [r for r in results if r[2] != 200]
        tap.ok(len(results) > 20 and not failed, f"{len(results)} requests across the reload, none failed",
               f"{failed[:5]}")
        es = [r for r in results if r[1] == ("en", "es")]
        before = [r for r in es if r[4] < marks["hup"]]  # answered before the signal
        after = [r for r in es if r[0] > marks["installed"]]  # sent after the new set was seen
        between = [r for r in es if r not in before and r not in after]
        tap.ok(before and all(r[3] == want["esp-v1"] for r in before),
               f"the {len(before)} en->es requests answered before the reload: the old esp's answers",
               f"{[r[3] for r in before if r[3] != want['esp-v1']][:3]}")
        tap.ok(after and all(r[3] == want["esp-v2"] for r in after),
               f"the {len(after)} sent once the new set was installed: the new esp's answers",
               f"{[r[3] for r in after if r[3] != want['esp-v2']][:3]}")
        tap.ok(all(r[3] in (want["esp-v1"], want["esp-v2"]) for r in between),
               f"the {len(between)} sent during the load: one version or the other, never a mix", "")
        tap.ok(not ready_fail, "/ready stayed 200 throughout", f"{len(ready_fail)} failures")
        st, h, j = tr(p, "Un uomo legge.", "it", "en")
        tap.ok(st == 200 and h.get("x-deepmt-model") == "ita", "the added model serves", f"{st} {h} {j}")
        st, h, j = tr(p, "A man.", "en", "pt")
        tap.ok(st == 400 and "not supported" in ts.error_of(j), "the removed model's language is gone", f"{st} {j}")
        tap.ok(wait_log(srv, "reload: 3 models"), "the log says what the reload served", srv.stderr()[-800:])
        # a corrupt replacement leaves the old one serving
        bad = os.path.join(folder, "esp-bad")
        shutil.copytree(os.path.join(folder, "esp-v2"), bad)
        with open(os.path.join(bad, "model.safetensors"), "r+b") as f:
            f.truncate(1000)
        write_list(folder, [("main", "main"), ("esp", "esp-bad"), ("ita", "ita")])
        srv.proc.send_signal(signal.SIGHUP)
        j = wait_generation(p, 3)
        fail = (j or {}).get("failures", [])
        tap.ok(j is not None and len(fail) == 1 and fail[0]["name"] == "esp" and fail[0]["serving_previous"]
               and "model.safetensors" in fail[0]["error"], "a corrupt new version: /models says why", f"{j}")
        st, h, jj = tr(p, text, "en", "es")
        tap.ok(st == 200 and jj.get("translatedText") == want["esp-v2"], "... and the previous version serves on",
               f"{st} {jj}")
        tap.ok(wait_log(srv, "failed to load", "previous version serves on"),
               "... and the log says so", srv.stderr()[-800:])
        # POST /admin/reload
        write_list(folder, [("main", "main"), ("esp", "esp-v1")])
        st, h, jj = ts.jreq(p, "POST", "/admin/reload")
        tap.ok(st == 401, "POST /admin/reload without the key: 401", f"{st} {jj}")
        st, h, jj = ts.jreq(p, "POST", "/admin/reload", headers={"X-Admin-Key": "wrong"})
        tap.ok(st == 403, "... with a wrong key: 403", f"{st} {jj}")
        st, h, jj = ts.jreq(p, "POST", "/admin/reload", headers={"X-Admin-Key": "sesame"})
        j = wait_generation(p, 4)
        st2, h2, jt = tr(p, text, "en", "es")
        tap.ok(st == 202 and j is not None and [m["name"] for m in j["models"]] == ["main", "esp"]
               and jt.get("translatedText") == want["esp-v1"], "... with the key: 202, and the list is read again",
               f"{st} {jj} {j}")
        st, h, jj = ts.jreq(p, "GET", "/admin/reload")
        tap.ok(st == 405, "GET /admin/reload: 405", f"{st}")
    finally:
        stop.set()
        rc = srv.stop()
    tap.ok(rc == 0, "the server stops cleanly after reloads (exit 0)", srv.stderr()[-800:])
    srv = Serve("--model", os.path.join(d, "main"))
    st, _, jj = ts.jreq(srv.port, "POST", "/admin/reload", headers={"X-Admin-Key": "x"})
    tap.ok(st == 404, "no --admin-key: no /admin/reload (404)", f"{st} {jj}")
    srv.stop()


def main():
    if not os.access(ts.BIN, os.X_OK):
        tap.skip(f"{ts.BIN} not built")
        return tap.done()
    d = os.path.join(TMP, "models")
    try:
        try:
            for name, seed, langs in (("main", 1, MAIN), ("esp", 2, ESP), ("ita", 3, ITA), ("asia", 4, ASIA),
                                      ("por", 5, POR)):
                make_model(os.path.join(d, name), seed, langs)
        except (RuntimeError, OSError) as e:
            tap.ok(False, "tools/make_random_model.py makes the test models", str(e))
            return tap.done()
        test_routing(d)
        test_whole_batches(d)
        test_no_starving(d)
        test_bad_lists(d)
        test_reload(d)
        tap.ok(not ts.SANITIZER_REPORTS, "no sanitizer reports", "\n".join(ts.SANITIZER_REPORTS[:2]))
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
