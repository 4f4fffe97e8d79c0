#!/usr/bin/python3
"""Numbers with several group separators ("1,500,000", "3.250.000,50") given to the
model as plain digits and put back as the target language writes them
(model/numbers.h, with decoding.copy_numbers), end to end with the shipped model. TAP.

- into German, French and Czech (`deepmt translate`, both batching modes), every
  such number comes out once, written as the target writes numbers ("1.500.000",
  "1 500 000" with U+202F, with U+00A0), and no other run of digits; with
  decoding.number_format "source", exactly as the source wrote it;
- with copy_numbers off the model changes most of them (mixed separators such as
  "1,500.000" change the value), so the rule is what keeps them;
- a number with a long run of zeros and no separators ("3250000000") is written
  whole: the repetition guard lets the source's own continuation through;
- grouped with plain spaces, as French and Czech are typed ("3 250 000 000"), the
  same into English, German and French (the model had read them as several numbers:
  "3,250,000 euros. 000 euros.", "1,500 000"), and the word alignment counts the
  number's words on both sides, group by group;
- the server gives the same.
"""
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tap  # noqa: E402
import test_server as ts  # noqa: E402
from testutil import engine, model_with_decoding, translate_lines  # noqa: E402

LINES = [("The city has 1,500,000 inhabitants.", "1,500,000"),
         ("The project cost 2,345,678 dollars.", "2,345,678"),
         ("About 12,000,000 people voted.", "12,000,000"),
         ("The company earned 3,250,000,000 euros last year.", "3,250,000,000"),
         ("It weighs 1,234,567.89 kilograms.", "1,234,567.89"),
         ("Die Stadt hat 1.500.000 Einwohner.", "1.500.000"),
         ("It costs 2,500.50 euros.", "2,500.50")]
STYLE = {"en": (",", "."), "de": (".", ","), "fr": ("\u202f", ","), "cs": ("\u00a0", ",")}


def styled(number, lang):
    """number as lang writes it (as written when grouped with plain spaces or lang is None)."""
    if lang is None or " " in number:
        return number
    whole, decimals = re.fullmatch(r"(\d{1,3}(?:[,.'\u00a0\u202f\u2009]\d{3})+)(?:[.,](\d+))?", number).groups()
    digits = re.sub(r"\D", "", whole)
    head = len(digits) % 3 or 3
    group, point = STYLE[lang]
    out = group.join([digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)])
    return out + (point + decimals if decimals else "")


SPACED = [("Le budget est de 3 250 000 000 euros.", "3 250 000 000"),
          ("La ville compte 1 500 000 habitants.", "1 500 000"),
          ("Rozpočet je 3 250 000 000 korun.", "3 250 000 000"),
          ("Město má 1 500 000 obyvatel.", "1 500 000"),
          ("Die Stadt hat 12 500 000 Einwohner.", "12 500 000")]


def kept(outputs, lines=LINES, lang=None):
    """Outputs holding their number (in lang's style) exactly once and no run of digits it lacks."""
    return sum(o.count(styled(n, lang)) == 1 and all(r in re.findall(r"\d+", n) for r in re.findall(r"\d+", o))
               for o, (_, n) in zip(outputs, lines))


def check_alignment(binary, model):
    """The number's three words in the source pair with its three words in the translation, in order."""
    source = "La ville compte 1 500 000 habitants."
    rc, got, err = translate_lines(binary, model, [source], "-t", "en", "--alignments")
    text, _, pairs = got[0].partition("\t")
    pairs = {tuple(map(int, p.split("-"))) for p in pairs.split()}
    words = text.split()
    at = next((j for j in range(len(words) - 2) if words[j:j + 3] == ["1", "500", "000"]), -1)
    in_range = all(0 <= s < len(source.split()) and 0 <= t < len(words) for s, t in pairs)
    tap.ok(rc == 0 and at >= 0 and in_range and {(3, at), (4, at + 1), (5, at + 2)} <= pairs,
           "--alignments: the number's words pair group by group, every pair within the words",
           detail=f"{got} {err[-300:]}")


def main():
    binary, model = engine()
    if not binary:
        return tap.done()
    lines = [x for x, _ in LINES]
    for target in ("de", "fr", "cs"):
        for mode in ("whole", "continuous"):
            rc, got, err = translate_lines(binary, model, lines, "-t", target, "--batching", mode)
            k = kept(got, lang=target)
            tap.ok(rc == 0 and k == len(LINES),
                   f"into {target}, {mode} batches: every number as {target} writes it ({k}/{len(LINES)})",
                   detail="\n".join(got) + err[-300:])
    spaced = [x for x, _ in SPACED]
    for target in ("en", "de", "fr"):
        rc, got, err = translate_lines(binary, model, spaced, "-t", target)
        k = kept(got, SPACED)
        tap.ok(rc == 0 and k == len(SPACED), f"plain spaces, into {target}: every number as written ({k}/{len(SPACED)})",
               detail="\n".join(got) + err[-300:])
    check_alignment(binary, model)
    with tempfile.TemporaryDirectory(prefix="deepmt-numbers-") as tmp:
        source = model_with_decoding(model, tmp, "source", number_format="source")
        rc, got, err = translate_lines(binary, source, lines, "-t", "fr")
        k = kept(got)
        tap.ok(rc == 0 and k == len(LINES), f"number_format \"source\": every number as written ({k}/{len(LINES)})",
               detail="\n".join(got) + err[-300:])
        bad = model_with_decoding(model, tmp, "bad", number_format="local")
        rc, _, err = translate_lines(binary, bad, ["Hello."])
        tap.ok(rc != 0 and "number_format" in err and "\"target\" or \"source\"" in err,
               "decoding.number_format \"local\" is refused, named, with the values it takes", detail=err)
        off = model_with_decoding(model, tmp, "off", copy_numbers=False)
        changed = 0
        for target in ("de", "fr", "cs"):
            rc, got, err = translate_lines(binary, off, lines, "-t", target)
            changed += len(LINES) - kept(got, lang=target)
        tap.ok(changed >= len(LINES), f"copy_numbers false: {changed} of {3 * len(LINES)} outputs differ",
               detail=str(changed))
    rc, got, err = translate_lines(binary, model, ["The company earned 3250000000 euros last year."])
    tap.ok(rc == 0 and "3250000000" in got[0], "a run of seven zeros comes out whole (the guard had cut it to 325000000)",
           detail=f"{got} {err[-300:]}")
    srv = ts.Server(model=model)
    try:
        st, _, j = ts.translate(srv.port, LINES[3][0], target="fr")
        text = j.get("translatedText", "") if isinstance(j, dict) else ""
        tap.ok(st == 200 and text.count("3\u202f250\u202f000\u202f000") == 1, "serve: the number as French writes it",
               detail=f"{st} {j}")
    finally:
        srv.stop()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
