#!/usr/bin/python3
"""A line's list markers ("- ", "• ", "2) ", "(a) ", "> ", "## ") kept out of the
model (text/sentences.h), end to end with the shipped model. TAP.

- through `deepmt translate`, each line comes back as its marker, as it was, and the
  translation of the line without it;
- the model itself, given the marker, changes the translation of most of them
  (it had left first words in English: "- Check your e-mail" -> "- Check deine E-Mail");
- the server gives the same, with the marker aligned to itself in "alignments";
- HTML: an inline tag around a marker stays around it.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tap  # noqa: E402
import test_server as ts  # noqa: E402
from testutil import engine, translate_lines  # noqa: E402

ITEMS = [("- ", "Check your e-mail every morning."), ("\u2022 ", "Buy milk, eggs and bread."),
         ("2) ", "Click the button and close the window."), ("(a) ", "Read the letter before the meeting."),
         ("> ", "Please send me the photos."), ("* ", "Ask the teacher if you have questions."),
         ("  + ", "Open the door."), ("\u2014 ", "Come here, he said.")]


def main():
    binary, model = engine()
    if not binary:
        return tap.done()
    bare = [s for _, s in ITEMS]
    lines = [m + s for m, s in ITEMS]
    rc0, plain, err0 = translate_lines(binary, model, bare, split=True)
    tap.ok(rc0 == 0 and all(plain), "the sentences without markers translate", detail=err0[-300:])
    rc, got, err = translate_lines(binary, model, lines, split=True)
    same = sum(g == m + p for g, (m, _), p in zip(got, ITEMS, plain))
    tap.ok(rc == 0 and same == len(ITEMS), f"each line: its marker as it was, then the sentence's own translation "
           f"({same}/{len(ITEMS)})", detail="\n".join(f"{a!r} -> {b!r} / {c!r}" for a, b, c in zip(lines, got, plain)))
    rc, whole, err = translate_lines(binary, model, lines)  # --no-split: the model gets the marker
    changed = sum(w != m + p for w, (m, _), p in zip(whole, ITEMS, plain))
    tap.ok(rc == 0 and changed >= 3, f"given the marker, the model translates {changed}/{len(ITEMS)} of them otherwise",
           detail="\n".join(whole))

    srv = ts.Server(model=model)
    try:
        st, _, j = ts.translate(srv.port, "- Check your e-mail every morning.", alignments=True)
        text = j.get("translatedText", "") if isinstance(j, dict) else ""
        pairs = j.get("alignments", []) if isinstance(j, dict) else []
        tap.ok(st == 200 and text == "- " + plain[0] and [0, 0] in pairs and not any(p[0] == 0 and p[1] != 0 for p in pairs)
               and not any(p[1] == 0 and p[0] != 0 for p in pairs),
               "serve: the marker kept, and aligned to itself only", detail=f"{st} {j}")
        st, _, j = ts.translate(srv.port, "<p><b>2)</b> Click the button and close the window.</p>", format="html")
        text = j.get("translatedText", "") if isinstance(j, dict) else ""
        tap.ok(st == 200 and text.startswith("<p><b>2)</b> ") and text.count("<b>") == 1,
               "serve, HTML: the tag around the marker stays around it", detail=f"{st} {j}")
    finally:
        srv.stop()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
