#!/usr/bin/python3
"""Numbers with several group separators ("1,500,000", "3.250.000,50") given to the
model as plain digits and put back as written (model/numbers.h, with
decoding.copy_numbers), end to end with the shipped model. TAP.

- into German, French and Czech (`deepmt translate`, both batching modes), every
  such number comes out once, exactly as written, and no other run of digits;
- with copy_numbers off the model changes most of them (mixed separators such as
  "1,500.000" change the value), so the rule is what keeps them;
- a number with a long run of zeros and no separators ("3250000000") is written
  whole: the repetition guard lets the source's own continuation through;
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
         ("Die Stadt hat 1.500.000 Einwohner.", "1.500.000")]


def kept(outputs):
    """Outputs holding their number exactly once and no run of digits it lacks."""
    return sum(o.count(n) == 1 and all(r in re.findall(r"\d+", n) for r in re.findall(r"\d+", o))
               for o, (_, n) in zip(outputs, LINES))


def main():
    binary, model = engine()
    if not binary:
        return tap.done()
    lines = [x for x, _ in LINES]
    for target in ("de", "fr", "cs"):
        for mode in ("whole", "continuous"):
            rc, got, err = translate_lines(binary, model, lines, "-t", target, "--batching", mode)
            k = kept(got)
            tap.ok(rc == 0 and k == len(LINES), f"into {target}, {mode} batches: every number as written ({k}/{len(LINES)})",
                   detail="\n".join(got) + err[-300:])
    with tempfile.TemporaryDirectory(prefix="deepmt-numbers-") as tmp:
        off = model_with_decoding(model, tmp, "off", copy_numbers=False)
        changed = 0
        for target in ("de", "fr", "cs"):
            rc, got, err = translate_lines(binary, off, lines, "-t", target)
            changed += len(LINES) - kept(got)
        tap.ok(changed >= len(LINES), f"copy_numbers false: {changed} of {3 * len(LINES)} outputs change their number",
               detail=str(changed))
    rc, got, err = translate_lines(binary, model, ["The company earned 3250000000 euros last year."])
    tap.ok(rc == 0 and "3250000000" in got[0], "a run of seven zeros comes out whole (the guard had cut it to 325000000)",
           detail=f"{got} {err[-300:]}")
    srv = ts.Server(model=model)
    try:
        st, _, j = ts.translate(srv.port, LINES[3][0], target="fr")
        text = j.get("translatedText", "") if isinstance(j, dict) else ""
        tap.ok(st == 200 and text.count("3,250,000,000") == 1, "serve: the number as written", detail=f"{st} {j}")
    finally:
        srv.stop()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
