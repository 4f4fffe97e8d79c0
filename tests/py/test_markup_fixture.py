#!/usr/bin/python3
"""tests/fixtures/markup/ (tools/make_markup_fixture.py): the inline-markup test set is
what the tool makes from the shared data (reproducible), holds >= 200 sentences a
direction, each with one balanced tag around a word whose lexicon translation is in
the reference, and the tags are varied. Skips when ../shared/data/multi30k is absent.

Then the set through the engine (text/html.h: a sentence with inline tags is
translated once and the tags put around the aligned target words), with the
shipped model and `deepmt translate --format html`, every sentence its own <p>:
- the output without its tags equals the sentence's plain translation (the tags
  change nothing else) in >= 95% of sentences;
- every tag comes back, once, well formed and balanced;
- the tag lands on the right target words in >= 80% of the sentences where the
  right words are known: the plain translation contains one of the tagged word's
  lexicon translations (the fixture's "lexicon", from the training data), and the
  tagged span contains it.
A <code> tag makes its word a literal (text/html.h: kept, not translated), so those
sentences are checked apart: the element comes back byte for byte, once, with no
other tag, in every one of them.
"""
import html
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import tap  # noqa: E402

DATA = os.environ.get("DEEPMT_SHARED", os.path.join(REPO, "..", "shared")) + "/data/multi30k"
FIX = os.path.join(REPO, "tests", "fixtures", "markup")


BIN = os.environ.get("DEEPMT_BIN", os.path.join(REPO, "build", "deepmt"))
LITERALS = ("code", "kbd", "samp", "var")
MODEL = os.environ.get("DEEPMT_MODEL", os.path.join(REPO, "models", "default"))


def run_cli(args, stdin):
    r = subprocess.run([BIN, "translate", "-m", MODEL, "-q"] + args, input=stdin.encode(), capture_output=True,
                       timeout=900)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def check_placement(pair, rows):
    target = pair.split("-")[1]
    rc, plain, err = run_cli(["-t", target], "".join(r["source"] + "\n" for r in rows))
    plain = plain.splitlines()
    check_docx_runs(pair, rows, plain)
    page = "".join(f"<p>{html.escape(r['tagged'], quote=False).replace('&lt;', '<').replace('&gt;', '>')}</p>\n"
                   for r in rows)
    rc2, out, err2 = run_cli(["-t", target, "--format", "html"], page)
    paras = re.findall(r"<p>(.*?)</p>", out, flags=re.S)
    if rc or rc2 or len(plain) != len(rows) or len(paras) != len(rows):
        tap.ok(False, f"{pair}: the tagged set translates", f"{rc} {rc2} {len(plain)} {len(paras)} {err[-300:]} "
                                                             f"{err2[-300:]}")
        return
    same = balanced = known = right = 0
    literal = literal_kept = 0
    misses = []
    for r, p, t in zip(rows, plain, paras):
        tag = r["tag"]
        if tag in LITERALS:
            element = re.search(rf"<{tag}\b[^>]*>.*?</{tag}>", r["tagged"]).group(0)
            literal += 1
            literal_kept += t.count(element) == 1 and len(re.findall(r"<[^>]+>", t)) == 2
            continue
        opens = re.findall(rf"<{tag}\b[^>]*>", t)
        closes = t.count(f"</{tag}>")
        m = re.fullmatch(rf"(.*?)<{tag}\b[^>]*>(.*?)</{tag}>(.*)", t, flags=re.S)
        balanced += len(opens) == 1 and closes == 1 and m is not None and len(re.findall(r"<[^>]+>", t)) == 2
        stripped = html.unescape(re.sub(r"<[^>]+>", "", t))
        same += stripped == p
        lex = [x for x in r["lexicon"] if x in p.lower()]
        if lex:
            known += 1
            inside = html.unescape(m.group(2)).lower() if m else ""
            hit = any(x in inside for x in lex)
            right += hit
            if not hit and len(misses) < 3:
                misses.append(f"{r['tagged']} -> {t}")
    n = len(rows) - literal
    tap.ok(literal > 0 and literal_kept == literal,
           f"{pair}: a <code> word comes back as it was, once, in {literal_kept}/{literal} sentences")
    tap.ok(same >= 0.95 * n, f"{pair}: without its tags the output is the plain translation in {same}/{n} "
                             f"({100 * same / n:.1f}%, >= 95%)")
    tap.ok(balanced == n, f"{pair}: every tag back once, well formed and balanced: {balanced}/{n}")
    tap.ok(known >= 100 and right >= 0.8 * known,
           f"{pair}: the tag on the right target words in {right}/{known} sentences where they are known "
           f"({100 * right / max(known, 1):.1f}%, >= 80%)", "\n".join(misses))


W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def check_docx_runs(pair, rows, plain_of):
    """The set as a .docx, the tagged word in a bold run between two plain ones:
    after `deepmt translate FILE`, the bold run holds the word's translation in
    >= 80% of the sentences where the plain translation has it (the runs keep their
    order, so a translation that moves the word past its neighbours may miss)."""
    import io
    import tempfile
    import xml.etree.ElementTree as ET
    import zipfile
    target = pair.split("-")[1]

    def run(text, bold=False):
        props = "<w:rPr><w:b/></w:rPr>" if bold else ""
        return f'<w:r>{props}<w:t xml:space="preserve">{html.escape(text, quote=False)}</w:t></w:r>'
    paras = []
    for r in rows:
        m = re.fullmatch(r"(.*?)<[a-z]+[^>]*>(.*?)</[a-z]+>(.*)", r["tagged"], flags=re.S)
        paras.append(f"<w:p>{run(m.group(1))}{run(m.group(2), True)}{run(m.group(3))}</w:p>")
    doc = f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{W}"><w:body>{"".join(paras)}</w:body></w:document>'
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "set.docx"), os.path.join(d, f"set.{target}.docx")
        with zipfile.ZipFile(src, "w") as z:
            z.writestr("[Content_Types].xml", "<Types/>")
            z.writestr("word/document.xml", doc)
        r = subprocess.run([BIN, "translate", "-m", MODEL, "-t", target, "-q", src, "-o", out], capture_output=True,
                           timeout=900)
        if r.returncode or not os.path.exists(out):
            tap.ok(False, f"{pair}: the .docx set translates", r.stderr.decode()[-300:])
            return
        got = zipfile.ZipFile(out).read("word/document.xml")
    ps = list(ET.fromstring(got).iter(f"{{{W}}}p"))
    known = right = 0
    for r, p, q in zip(rows, ps, plain_of):
        runs = [t.text or "" for t in p.iter(f"{{{W}}}t")]
        lex = [x for x in r["lexicon"] if x in q.lower()]
        if len(runs) == 3 and lex:
            known += 1
            right += any(x in runs[1].lower() for x in lex)
    tap.ok(len(ps) == len(rows) and known >= 100 and right >= 0.8 * known,
           f"{pair}: .docx bold run holds the bold word's translation in {right}/{known} sentences where it is known "
           f"({100 * right / max(known, 1):.1f}%, >= 80%)")


def main():
    for pair in ("en-de", "en-fr"):
        rows = [json.loads(l) for l in open(os.path.join(FIX, f"{pair}.jsonl"), encoding="utf-8")]
        ok_rows = 0
        for r in rows:
            tags = re.findall(r"</?([a-z]+)[^>]*>", r["tagged"])
            plain = re.sub(r"<[^>]+>", "", r["tagged"])
            ok_rows += (len(tags) == 2 and tags[0] == tags[1] == r["tag"] and plain == r["source"]
                        and any(x in r["reference"].lower() for x in r["lexicon"]))
        tap.ok(len(rows) >= 200 and ok_rows == len(rows) and len({r["tag"] for r in rows}) == 7,
               f"{pair}: {len(rows)} sentences, one balanced tag each, the word's translation in the reference, 7 tags",
               f"{ok_rows} of {len(rows)} well-formed")
    if os.access(BIN, os.X_OK) and os.path.exists(os.path.join(MODEL, "config.json")):
        for pair in ("en-de", "en-fr"):
            check_placement(pair, [json.loads(l) for l in open(os.path.join(FIX, f"{pair}.jsonl"), encoding="utf-8")])
    else:
        tap.skip(f"no {BIN} or {MODEL}: tag placement not measured")
    if not os.path.isdir(DATA):
        tap.skip(f"{DATA} absent: the fixture's reproducibility is not checked")
        return tap.done()
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, os.path.join(REPO, "tools", "make_markup_fixture.py"), "--data", DATA,
                            "--out", d], capture_output=True, timeout=300)
        same = r.returncode == 0 and all(
            open(os.path.join(d, f"{p}.jsonl"), "rb").read() == open(os.path.join(FIX, f"{p}.jsonl"), "rb").read()
            for p in ("en-de", "en-fr"))
        tap.ok(same, "tools/make_markup_fixture.py remakes the committed fixture byte for byte", r.stderr.decode()[-300:])
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
