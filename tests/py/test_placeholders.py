#!/usr/bin/python3
"""Format placeholders ("Delete %d files?", "Hello {name}") given to the model as
numbers and put back whole (model/placeholders.h, with decoding.placeholders), end to
end with the shipped model. TAP.

- into German, French and Czech and back into English (`deepmt translate`, both
  batching modes), every string's translation has exactly its placeholders;
- with decoding.placeholders off the model loses or changes most of them, so the
  rule is what keeps them;
- a value other than true or false is refused at load, named;
- the server (LibreTranslate's POST /translate, a list of strings as a localisation
  tool sends them) gives the same.
"""
import collections
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tap  # noqa: E402
import test_server as ts  # noqa: E402
from testutil import engine, model_with_decoding, translate_lines  # noqa: E402

# program strings of the kinds localisation catalogues hold (written for this test)
STRINGS = ["Delete %d files?",
           "Could not open %s: %s",
           "Saved %1$s to %2$s.",
           "Hello {name}, you have {count} new messages.",
           "Copy %(count)d items to the folder.",
           "Welcome, {{user}}!",
           "Open the file ${filename} now.",
           "Downloading %s (%d%%)",
           "Page %1 of %2",
           "The image is %dx%d pixels.",
           "%PRODUCTNAME could not save the document.",
           "The dictionary $(ARG1) cannot be created.",
           "Are you sure you want to delete \"%s\"?",
           "%s"]
PLACEHOLDER = re.compile(r"%\d\$[a-z]|%\([a-z]+\)d|%[ds]%%|%[dsx]|%\d|%[A-Z]{2,}|\$\([A-Z0-9]+\)|\$\{\w+\}|\{\{\w+\}\}|\{\w+\}")
GERMAN = ["Möchten Sie %d Dateien löschen?", "Hallo {name}, Sie haben {count} neue Nachrichten.",
          "%1$s wurde nach %2$s kopiert.", "Seite %1 von %2"]


def found(text):
    return collections.Counter(PLACEHOLDER.findall(text))


def kept(sources, outputs):
    """Outputs with exactly their source's placeholders."""
    return sum(found(s) == found(o) for s, o in zip(sources, outputs))


def main():
    binary, model = engine()
    if not binary:
        return tap.done()
    tap.ok(all(found(s) for s in STRINGS + GERMAN), "the test's own pattern sees a placeholder in every string",
           detail=str([s for s in STRINGS + GERMAN if not found(s)]))
    for target in ("de", "fr", "cs"):
        for mode in ("whole", "continuous"):
            rc, got, err = translate_lines(binary, model, STRINGS, "-t", target, "--batching", mode)
            k = kept(STRINGS, got)
            tap.ok(rc == 0 and k == len(STRINGS),
                   f"into {target}, {mode} batches: every string keeps its placeholders ({k}/{len(STRINGS)})",
                   detail="\n".join(f"{s} -> {o}" for s, o in zip(STRINGS, got) if found(s) != found(o)) + err[-300:])
    rc, got, err = translate_lines(binary, model, GERMAN, "-t", "en")
    k = kept(GERMAN, got)
    tap.ok(rc == 0 and k == len(GERMAN), f"from German: every string keeps its placeholders ({k}/{len(GERMAN)})",
           detail="\n".join(got) + err[-300:])
    rc, got, err = translate_lines(binary, model, ["I bought %d apples."], "-t", "de")
    tap.ok(rc == 0 and re.search(r"%d\s+Äpfel", got[0]) is not None,
           "the placeholder stands where the model put its number, before the noun it counts "
           "(not after the word before it: German puts the verb last)",
           detail=f"{got} {err[-300:]}")
    with tempfile.TemporaryDirectory(prefix="deepmt-placeholders-") as tmp:
        off = model_with_decoding(model, tmp, "off", placeholders=False)
        lost = 0
        for target in ("de", "fr", "cs"):
            rc, got, err = translate_lines(binary, off, STRINGS, "-t", target)
            lost += len(STRINGS) - kept(STRINGS, got)
        tap.ok(lost >= len(STRINGS), f"placeholders false: {lost} of {3 * len(STRINGS)} outputs lose or change one",
               detail=str(lost))
        bad = model_with_decoding(model, tmp, "bad", placeholders="yes")
        rc, _, err = translate_lines(binary, bad, ["Hello."])
        tap.ok(rc != 0 and "decoding.placeholders must be true or false" in err,
               "decoding.placeholders \"yes\" is refused, named", detail=err)
    srv = ts.Server(model=model)
    try:
        st, _, j = ts.translate(srv.port, STRINGS[:6], target="de")
        texts = j.get("translatedText", []) if isinstance(j, dict) else []
        tap.ok(st == 200 and len(texts) == 6 and kept(STRINGS[:6], texts) == 6,
               "serve: a list of strings, each with its placeholders", detail=f"{st} {j}")
    finally:
        srv.stop()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
