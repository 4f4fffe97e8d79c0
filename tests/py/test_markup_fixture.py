#!/usr/bin/python3
"""tests/fixtures/markup/ (tools/make_markup_fixture.py): the inline-markup test set is
what the tool makes from the shared data (reproducible), holds >= 200 sentences a
direction, each with one balanced tag around a word whose lexicon translation is in
the reference, and the tags are varied. Skips when ../shared/data/multi30k is absent.
"""
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
