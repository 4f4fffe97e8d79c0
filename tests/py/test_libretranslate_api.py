#!/usr/bin/python3
"""LibreTranslate's endpoints beyond /translate (TAP): /detect, source "auto",
/suggest, /frontend/settings and /spec, against LibreTranslate's documented
request and answer shapes; the spec is checked by a real OpenAPI validator
(npm @apidevtools/swagger-parser, installed into build/node; skipped with a
message when npm is unreachable). Uses the tiny test model: detection reads only
the model's language list.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tap  # noqa: E402
import test_server as ts  # noqa: E402  (Server, request, jreq)
from nodetools import node_modules  # noqa: E402
from testutil import repo_path  # noqa: E402

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def is_guess_list(j):
    return (isinstance(j, list) and j and all(isinstance(g, dict) and set(g) == {"confidence", "language"}
                                              and isinstance(g["confidence"], (int, float))
                                              and 0 <= g["confidence"] <= 100 for g in j))


def test_detect(p):
    for lang, texts in ts.TEXTS.items():
        for t in texts:
            st, h, j = ts.jreq(p, "POST", "/detect", {"q": t})
            tap.ok(st == 200 and is_guess_list(j) and j[0]["language"] == lang,
                   f"POST /detect {lang}: [{{confidence, language}}], best first", f"{t!r}: {st} {j}")
    st, h, j = ts.jreq(p, "POST", "/detect", {"q": "Zwei Hunde spielen im Schnee."})
    confs = [g["confidence"] for g in j] if is_guess_list(j) else None
    tap.ok(confs and confs == sorted(confs, reverse=True) and len({g["language"] for g in j}) == len(j),
           "/detect: candidates sorted by confidence, no language twice", f"{j}")
    st, h, data = ts.request(p, "POST", "/detect", "q=Deux%20chiens%20jouent%20dans%20la%20neige.", FORM)
    j = json.loads(data) if st == 200 else None
    tap.ok(is_guess_list(j) and j[0]["language"] == "fr", "/detect: a form body", f"{st} {data!r}")
    st, h, j = ts.jreq(p, "POST", "/detect", {"q": ["Der Hund.", "Die Katze schläft im Haus."]})
    tap.ok(st == 200 and is_guess_list(j) and j[0]["language"] == "de", "/detect: an array q is read as one text",
           f"{st} {j}")
    st, h, j = ts.jreq(p, "POST", "/detect", {"q": "12345 !!!"})
    tap.ok(st == 200 and is_guess_list(j) and j[0]["confidence"] == 0,
           "/detect: no letters -> a default guess with confidence 0", f"{st} {j}")
    for body in ({}, {"q": ""}, {"q": []}):
        st, h, j = ts.jreq(p, "POST", "/detect", body)
        tap.ok(st == 400 and ts.error_of(j) == "Invalid request: missing q parameter",
               f"/detect: missing or empty q -> 400 as LibreTranslate ({body})", f"{st} {j}")
    st, h, j = ts.jreq(p, "POST", "/detect", {"q": 5})
    tap.ok(st == 400 and "q must be" in ts.error_of(j), "/detect: q of the wrong type -> 400", f"{st} {j}")
    st, h, j = ts.jreq(p, "POST", "/detect", {"q": "x" * 20001})
    tap.ok(st == 413 and "limit 20000" in ts.error_of(j), "/detect: over --max-chars -> 413", f"{st} {j}")
    st, h, j = ts.jreq(p, "GET", "/detect")
    tap.ok(st == 405 and "POST" in h.get("allow", ""), "GET /detect -> 405 with Allow", f"{st} {h}")
    st, h, data = ts.request(p, "POST", "/detect", b"\xff\xfe", {"Content-Type": "application/json"})
    tap.ok(st == 400, "/detect: invalid UTF-8 -> 400", f"{st} {data!r}")


def test_auto(p):
    # detectedLanguage is always there for auto, even without evidence (clients read .language)
    st, h, j = ts.translate(p, "12345", source="auto", target="en")
    d = j.get("detectedLanguage") if isinstance(j, dict) else None
    tap.ok(st == 200 and isinstance(d, dict) and d.get("language") in ("en", "de", "fr", "cs")
           and d.get("confidence") == 0, "auto, no letters: detectedLanguage still present (confidence 0)",
           f"{st} {j}")
    st, h, j = ts.translate(p, ["Muž jede na kole.", "", "Zwei Hunde spielen im Schnee."], source="auto",
                            target="en")
    d = j.get("detectedLanguage") if isinstance(j, dict) else None
    tap.ok(st == 200 and isinstance(d, list) and len(d) == 3 and all(isinstance(x, dict) for x in d)
           and d[0]["language"] == "cs" and d[2]["language"] == "de",
           "auto, array q: a detectedLanguage object for every text (none null)", f"{st} {j}")


def test_suggest_settings(p):
    st, h, j = ts.jreq(p, "POST", "/suggest", {"q": "Hello", "s": "Hallo", "source": "en", "target": "de"})
    tap.ok(st == 403 and ts.error_of(j) == "Suggestions are disabled on this server.",
           "POST /suggest: 403 as LibreTranslate with suggestions off", f"{st} {j}")
    st, h, j = ts.jreq(p, "GET", "/frontend/settings")
    want = {"charLimit", "frontendTimeout", "apiKeys", "keyRequired", "suggestions", "filesTranslation",
            "supportedFilesFormat", "language"}
    tap.ok(st == 200 and want <= set(j) and j["suggestions"] is False and isinstance(j["frontendTimeout"], int)
           and isinstance(j["supportedFilesFormat"], list) and isinstance(j["filesTranslation"], bool),
           "/frontend/settings: every field LibreTranslate's page reads", f"{st} {j}")
    lang = j.get("language", {})
    tap.ok(lang.get("source") == {"code": "auto", "name": "Auto Detect"}
           and lang.get("target", {}).get("code") in ("de", "fr", "cs"),
           "/frontend/settings: language {source: auto, target: a model language}", f"{lang}")
    tap.ok(j.get("filesTranslation") is True and j.get("supportedFilesFormat") == [".txt", ".html", ".htm", ".srt",
                                                                                    ".docx", ".odt"],
           "/frontend/settings: filesTranslation and the supported extensions", f"{j}")


def test_keys():
    srv = ts.Server(env={"DEEPMT_API_KEYS": "k1"})
    p = srv.port
    st, h, j = ts.jreq(p, "POST", "/detect", {"q": "Hallo Welt"})
    st2, h, j2 = ts.jreq(p, "POST", "/detect", {"q": "Hallo Welt", "api_key": "k1"})
    tap.ok(st == 400 and "get an API key" in ts.error_of(j) and st2 == 200,
           "/detect with API keys: 400 without (as LibreTranslate), 200 with a key", f"{st} {j} {st2} {j2}")
    st, h, j = ts.jreq(p, "POST", "/suggest", {"q": "a", "s": "b", "source": "en", "target": "de", "api_key": "x"})
    tap.ok(st == 403 and ts.error_of(j) == "Invalid API key", "/suggest checks the key first", f"{st} {j}")
    st, h, j = ts.jreq(p, "GET", "/frontend/settings")
    tap.ok(j.get("apiKeys") is True and j.get("keyRequired") is True, "/frontend/settings: apiKeys, keyRequired",
           f"{j}")
    tap.ok(srv.stop() == 0, "the keyed server exits 0", srv.stderr()[-500:])


def test_spec(p):
    st, h, data = ts.request(p, "GET", "/spec")
    try:
        spec = json.loads(data)
    except ValueError:
        spec = {}
    tap.ok(st == 200 and h.get("content-type", "").startswith("application/json")
           and spec.get("openapi", "").startswith("3."), "GET /spec: an OpenAPI 3 document", f"{st} {data[:200]!r}")
    with open(repo_path("server/api/openapi.json"), "rb") as f:
        tap.ok(data == f.read(), "/spec serves server/api/openapi.json as built in", "")
    st, h, routes = ts.jreq(p, "GET", "/")
    paths = set(spec.get("paths", {}))
    want = {"/translate", "/detect", "/languages", "/suggest", "/frontend/settings", "/spec", "/health", "/ready",
            "/metrics", "/", "/translate_file", "/download_file/{id}/{name}"}
    tap.ok(want <= paths, "/spec describes every endpoint", f"missing {want - paths}")
    mods, why = node_modules()
    if not mods:
        tap.skip(f"OpenAPI validator: {why}")
        return
    tmp = tempfile.mkdtemp(prefix="deepmt-spec-")
    try:
        good = os.path.join(tmp, "spec.json")
        with open(good, "wb") as f:
            f.write(data)
        env = {**os.environ, "NODE_PATH": mods}
        js = repo_path("tests/js/validate_openapi.js")
        r = subprocess.run(["node", js, good], capture_output=True, timeout=120, env=env)
        tap.ok(r.returncode == 0, "/spec passes @apidevtools/swagger-parser validation",
               (r.stdout + r.stderr).decode(errors="replace")[-800:])
        bad = dict(spec)
        bad["paths"] = {**spec.get("paths", {}), "/detect": {"post": {"summary": "no responses"}}}
        badf = os.path.join(tmp, "bad.json")
        with open(badf, "w") as f:
            json.dump(bad, f)
        r = subprocess.run(["node", js, badf], capture_output=True, timeout=120, env=env)
        tap.ok(r.returncode == 1 and b"invalid" in r.stdout, "the validator refuses a broken copy (it can fail)",
               (r.stdout + r.stderr).decode(errors="replace")[-400:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_answers_match_spec(p):
    """Every answer's shape, successes and errors, against its schema in /spec (ajv
    over the dereferenced document, tests/js/validate_responses.js)."""
    mods, why = node_modules()
    if not mods:
        tap.skip(f"response shapes against /spec: {why}")
        return
    calls = [
        ("post", "/translate", {"q": "A dog.", "source": "en", "target": "de"}),
        ("post", "/translate", {"q": ["A dog.", "Two cats."], "source": "en", "target": "fr"}),
        ("post", "/translate", {"q": "A dog.", "source": "en", "target": "de", "alternatives": 2}),
        ("post", "/translate", {"q": ["A dog.", ""], "source": "en", "target": "de", "alternatives": 2}),
        ("post", "/translate", {"q": "A dog.", "source": "en", "target": "en", "alternatives": 2}),  # [] alternatives
        ("post", "/translate", {"q": "Ein Hund läuft.", "source": "auto", "target": "en"}),
        ("post", "/translate", {"q": ["Ein Hund.", "Un chat."], "source": "auto", "target": "en"}),
        ("post", "/translate", {"q": "<p>A <b>dog</b>.</p>", "source": "en", "target": "de", "format": "html",
                                "alternatives": 3}),
        ("post", "/translate", {"q": "A dog runs. Two cats.", "source": "en", "target": "de", "alignments": True}),
        ("post", "/translate", {"q": ["A dog.", "", "Two cats."], "source": "en", "target": "de", "alignments": True}),
        ("post", "/translate", {"q": "", "source": "en", "target": "de"}),
        ("post", "/translate", {"q": "A dog.", "source": "xx", "target": "de"}),
        ("post", "/translate", {"q": "x" * 30000, "source": "en", "target": "de"}),
        ("post", "/detect", {"q": "Ein Hund läuft im Park."}),
        ("post", "/detect", {"q": ""}),
        ("post", "/suggest", {"q": "a", "s": "b", "source": "en", "target": "de"}),
        ("get", "/languages", None),
        ("get", "/frontend/settings", None),
        ("get", "/health", None),
        ("get", "/ready", None),
        ("get", "/models", None),
        ("post", "/translate", {"q": "A dog.", "source": "en", "target": "de", "model": "nope"}),
    ]
    records = []
    for method, path, body in calls:
        st, h, j = ts.jreq(p, method.upper(), path, body)
        records.append({"method": method, "path": path, "status": st, "body": j})
    tmp = tempfile.mkdtemp(prefix="deepmt-shapes-")
    try:
        spec = os.path.join(tmp, "spec.json")
        with open(spec, "wb") as f:
            f.write(ts.request(p, "GET", "/spec")[2])
        rec = os.path.join(tmp, "records.json")
        with open(rec, "w") as f:
            json.dump(records, f)
        env = {**os.environ, "NODE_PATH": mods}
        r = subprocess.run(["node", repo_path("tests/js/validate_responses.js"), spec, rec], capture_output=True,
                           timeout=120, env=env)
        out = r.stdout.decode(errors="replace")
        tap.ok(r.returncode == 0 and out.count("\nok ") + out.startswith("ok ") == len(records),
               f"{len(records)} answers (successes and errors) match their schemas in /spec",
               "\n".join(l for l in out.splitlines() if l.startswith("FAIL"))[:1500])
        bad = [{"method": "post", "path": "/translate", "status": 200, "body": {"translatedText": 3}}]
        with open(rec, "w") as f:
            json.dump(bad, f)
        r = subprocess.run(["node", repo_path("tests/js/validate_responses.js"), spec, rec], capture_output=True,
                           timeout=120, env=env)
        tap.ok(r.returncode == 1 and b"FAIL" in r.stdout, "the shape check refuses a wrong answer (it can fail)",
               r.stdout.decode(errors="replace")[-300:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_alignments(p):
    """"alignments": true (beyond LibreTranslate): per text, [source word, target
    word] pairs in range, numbered over the whole text; identity where source ==
    target; a clear 400 for a non-boolean and for format html."""
    q = "A dog runs on the beach. Two cats sleep."
    st, h, j = ts.translate(p, q, source="en", target="de", alignments=True)
    pairs, out = (j.get("alignments"), j.get("translatedText", "")) if isinstance(j, dict) else (None, "")
    ns, nt = len(q.split()), len(out.split())
    tap.ok(st == 200 and isinstance(pairs, list) and pairs and
           all(isinstance(x, list) and len(x) == 2 and 0 <= x[0] < ns and 0 <= x[1] < nt for x in pairs),
           "alignments: [source word, target word] pairs within both texts' words", f"{st} {j}")
    st2, _, j2 = ts.translate(p, "Two cats sleep.", source="en", target="de", alignments=True)
    second = [x for x in pairs or [] if x[0] >= 6]
    tap.ok(st2 == 200 and second and len(second) == len(j2.get("alignments", [])) and
           all(x[0] - 6 == y[0] for x, y in zip(second, j2["alignments"])),
           "the second sentence's pairs are its own, numbered after the first's words", f"{pairs} {j2}")
    st, h, j = ts.translate(p, ["A dog.", "Two cats sleep."], source="en", target="en", alignments=True)
    tap.ok(st == 200 and j.get("alignments") == [[[0, 0], [1, 1]], [[0, 0], [1, 1], [2, 2]]],
           "source == target: each word with itself, one list a text for an array q", f"{j}")
    st, h, j = ts.translate(p, "A dog.", source="en", target="de")
    tap.ok(st == 200 and "alignments" not in j, "not asked: no alignments field", f"{j}")
    st, h, j = ts.translate(p, "A dog.", source="en", target="de", alignments=3)
    tap.ok(st == 400 and "alignments must be true or false" in ts.error_of(j), "alignments: 3 is a 400", f"{st} {j}")
    st, h, j = ts.translate(p, "<b>A dog.</b>", source="en", target="de", format="html", alignments=True)
    tap.ok(st == 400 and "format" in ts.error_of(j), "alignments with format html: a 400 that says why", f"{st} {j}")


def main():
    return ts.run_suite([test_detect, test_auto, test_suggest_settings, test_spec, test_answers_match_spec,
                         test_alignments], after=[test_keys])


if __name__ == "__main__":
    sys.exit(main())
