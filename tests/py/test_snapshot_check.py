#!/usr/bin/python3
"""scripts/snapshot_check.sh and its verdict, scripts/snapshot_summary.py (TAP), on
made-up results: the shipping rule is met with a lower general dev NLL, more than
half of the 18 whole-set directions up and +0.10 or more on average, and not met with
half up, with most up by too little on average, or with a higher NLL however many
are up; an incomplete folder is named (exit 2). The check itself:
usage without arguments, a missing checkpoint named, both before any work.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import tap  # noqa: E402

SUMMARY = os.path.join(REPO, "scripts", "snapshot_summary.py")
CHECK = os.path.join(REPO, "scripts", "snapshot_check.sh")
WHOLE = {"ew": [(s, d) for s in ("tatoeba", "flores101") for d in ("en-de", "de-en", "en-fr", "fr-en", "en-cs",
                                                                   "cs-en")],
         "ewj": [("flores101", d) for d in ("de-fr", "fr-de", "de-cs", "cs-de", "fr-cs", "cs-fr")]}


def make(out, ups, nll_old, nll_new, gain=0.3):
    """OUT with `ups` of the 18 whole-set directions up by `gain`, the rest down by 0.1."""
    k = 0
    for part, dirs in WHOLE.items():
        for which in ("base", "cand"):
            rows = []
            for i, (s, d) in enumerate(dirs):
                change = gain if k + i < ups else -0.1
                rows.append({"set": s, "direction": d, "bleu": 20.0 + (change if which == "cand" else 0.0)})
            os.makedirs(os.path.join(out, f"{which}-{part}"), exist_ok=True)
            with open(os.path.join(out, f"{which}-{part}", "report.json"), "w") as f:
                json.dump({"directions": rows}, f)
        k += len(dirs)
    for part in ("ew", "ewj", "e"):
        with open(os.path.join(out, f"cand-{part}.log"), "w") as f:
            f.write("all: mean change +0.10 over 12 directions, 7 up, 5 down; p < 0.05: 0 up, 0 down\n")
    with open(os.path.join(out, "int8.log"), "w") as f:
        f.write("int8: BLEU -0.010 on average, -0.20 at worst over 30 directions\n")
    def per(g):
        return {"g:en-de": g, "g:de-en": g, "mean general": g, "mean multi30k": 1.3, "mean joined": 3.0}
    with open(os.path.join(out, "nll.json"), "w") as f:
        json.dump([{"nll": per(nll_old)}, {"nll": per(nll_new)}], f)


def summary(out):
    return subprocess.run([sys.executable, SUMMARY, out], capture_output=True, text=True, timeout=60)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        # 10 up by 0.3, 8 down by 0.1: +0.122 on average; 10 up by 0.15: +0.039
        cases = [(10, 2.50, 2.49, 0.3, 0, "10 of 18 up, +0.122, NLL lower: met", "+0.122 on average"),
                 (9, 2.50, 2.49, 0.3, 1, "9 of 18 up: not met", "9 of 18 up is not most"),
                 (18, 2.50, 2.51, 0.3, 1, "18 of 18 up but NLL higher: not met", "NLL is not lower"),
                 (10, 2.50, 2.49, 0.15, 1, "10 of 18 up by +0.039 on average: not met", "+0.039 on average is under")]
        for i, (ups, old, new, gain, want, what, says) in enumerate(cases):
            out = os.path.join(tmp, f"c{i}")
            make(out, ups, old, new, gain)
            r = summary(out)
            tap.ok(r.returncode == want and f"{ups} of 18 directions up" in r.stdout and says in r.stdout
                   and ("MET" in r.stdout) == (want == 0), f"snapshot_summary: {what}", r.stdout + r.stderr)
        # the user-interface strings (cand-eu, base-eu): printed, the verdict unchanged
        for i, want in ((0, 0), (1, 1)):
            out = os.path.join(tmp, f"c{i}")
            for which, bleu in (("base", 10.0), ("cand", 12.5)):
                os.makedirs(os.path.join(out, f"{which}-eu"))
                with open(os.path.join(out, f"{which}-eu", "report.json"), "w") as f:
                    json.dump({"directions": [{"set": "ui", "direction": d, "bleu": bleu + (d == "cs-en" and which == "cand")}
                                              for d in ("en-de", "de-en", "en-cs", "cs-en")]}, f)
            r = summary(out)
            tap.ok(r.returncode == want and "ui strings: 4 of 4 directions up, +2.750 on average" in r.stdout
                   and "cs-en +3.50" in r.stdout,
                   f"snapshot_summary: the UI strings' change printed beside the rule, whose verdict stays "
                   f"({'met' if want == 0 else 'not met'})", r.stdout + r.stderr)
        os.remove(os.path.join(tmp, "c1", "cand-eu", "report.json"))
        os.makedirs(os.path.join(tmp, "c1", "cand-eu"), exist_ok=True)
        with open(os.path.join(tmp, "c1", "cand-eu", "report.json"), "w") as f:
            f.write("{not json")
        r = summary(os.path.join(tmp, "c1"))
        tap.ok(r.returncode == 1 and "ui strings: no comparison" in r.stdout,
               "snapshot_summary: an unreadable UI report is named, the verdict still given", r.stdout + r.stderr)
        out = os.path.join(tmp, "c0")
        os.remove(os.path.join(out, "nll.json"))
        r = summary(out)
        tap.ok(r.returncode == 2 and "incomplete" in r.stderr and "nll.json" in r.stderr,
               "snapshot_summary: a folder without the NLL is named incomplete (exit 2)", r.stdout + r.stderr)
        r = subprocess.run(["sh", CHECK], capture_output=True, text=True, timeout=60)
        tap.ok(r.returncode == 2 and "snapshot_check.sh RUN_DIR" in r.stdout,
               "snapshot_check.sh without arguments: its usage, exit 2", r.stdout + r.stderr)
        missing = os.path.join(tmp, "no-run")
        r = subprocess.run(["sh", CHECK, missing], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, OUT=os.path.join(tmp, "out")))
        tap.ok(r.returncode == 2 and f"no checkpoint at {missing}/checkpoint.pt" in r.stderr
               and not os.path.exists(os.path.join(tmp, "out")),
               "snapshot_check.sh: a missing checkpoint named before any work", r.stdout + r.stderr)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
