#!/usr/bin/python3
"""A sentence's final run of marks ("!!!", "?!", "...") kept whole (model/marks.h), end
to end with the shipped model. TAP.

- through `deepmt translate` in both batching modes and through `deepmt serve`, each
  output ends with its source's run, and the rest is exactly the translation of the
  sentence with one mark ('?', else '!', else '.');
- the model alone collapses most runs to one mark (so the rule is what keeps them);
- a run one space apart from its word comes back with the space;
- runs inside a sentence, lone marks and lines of marks alone are left as they were.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tap  # noqa: E402
import test_server as ts  # noqa: E402
from testutil import engine, translate_lines  # noqa: E402

RUNS = [("What is this???", "???"), ("This is amazing!!!", "!!!"), ("Are you serious?!", "?!"),
        ("Wait for me...", "..."), ("Stop it now!!", "!!"), ("I cannot believe it!?", "!?"),
        ("That was a great game !!!", " !!!")]


def one_mark(line, run):
    single = "?" if "?" in run else "!" if "!" in run else "."
    return line[: len(line) - len(run)] + single


def main():
    binary, model = engine()
    if not binary:
        return tap.done()
    lines = [line for line, _ in RUNS]
    rc, single, err = translate_lines(binary, model, [one_mark(line, run) for line, run in RUNS])
    tap.ok(rc == 0 and all(single), "the sentences with one mark translate", detail=err[-300:])
    collapsed = sum(not s.rstrip().endswith(run) for s, (_, run) in zip(single, RUNS))
    for mode in ("whole", "continuous"):
        rc, got, err = translate_lines(binary, model, lines, "--batching", mode)
        kept = sum(g.endswith(run) for g, (_, run) in zip(got, RUNS))
        same = sum(g[: len(g) - len(run)].rstrip(" !?.") == s.rstrip(" !?.") for g, s, (_, run) in zip(got, single, RUNS))
        tap.ok(rc == 0 and kept == same == len(RUNS),
               f"{mode} batches: every run comes back ({kept}/{len(RUNS)}), the rest is the translation with one "
               f"mark ({same}/{len(RUNS)}); without the rule {collapsed}/{len(RUNS)} would have lost it",
               detail="\n".join(f"{a!r} -> {b!r} / {c!r}" for a, b, c in zip(lines, got, single)) + err[-300:])
    tap.ok(collapsed >= len(RUNS) // 2, f"the model itself collapses {collapsed}/{len(RUNS)} runs to one mark",
           detail="\n".join(single))
    untouched = ["Hi!!! How are you?", "Hello.", "!!!", "?!"]
    rc, got, err = translate_lines(binary, model, untouched, split=True)
    tap.ok(rc == 0 and got[2:] == untouched[2:] and got[0].endswith("?") and got[1].endswith("."),
           "a run inside the text, a lone mark and lines of marks alone are left to the other rules",
           detail=f"{got} {err[-300:]}")
    srv = ts.Server(model=model)
    try:
        st, _, j = ts.translate(srv.port, "What is this???")
        text = j.get("translatedText", "") if isinstance(j, dict) else ""
        tap.ok(st == 200 and text.endswith("???") and not text.endswith("????"), "serve: the run comes back once",
               detail=f"{st} {j}")
    finally:
        srv.stop()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
