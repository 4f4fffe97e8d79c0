#!/usr/bin/python3
"""The verdict of scripts/snapshot_check.sh from what it left in OUT: each
comparison's summary line (OUT/cand-ew.log, cand-ewj.log, cand-e.log, written by
scripts/compare_reports.py through eval_default.sh), the whole sets' BLEU of both
(OUT/base-ew*/report.json, cand-ew*/report.json), int8 against F32 (int8.log),
the dev NLL of the shipped model and the candidate (nll.json, tools/train.py nll
--out), and whether the shipping rule is met: a lower mean general dev NLL, ahead
on most of the whole-set directions (cand-ew and cand-ewj together), and ahead by
at least MIN_MEAN_GAIN BLEU on their average. Where the check scored the
user-interface strings too (OUT/cand-eu), their change is printed beside the rule.

    scripts/snapshot_summary.py OUT      exit 0: rule met, 1: not met, 2: OUT incomplete
"""
import json
import os
import sys

# Each shipped snapshot adds ~22 MB to the repository for good, and a change of a few
# hundredths on average is within the noise of one snapshot (step 57,735: dev NLL
# lower everywhere, 11 of 18 up, +0.03, Tatoeba en-de and fr-en down). Of the
# snapshots shipped before, only step 44,910 gained less (+0.08 on the twelve English
# directions, then the only ones measured); the others gained +0.13 to +0.8 over
# the directions measured (step 47,223: -0.08 in English, +1.21 without, +0.35).
MIN_MEAN_GAIN = 0.10


def changes(out, part):
    """(set, direction, BLEU change) of the candidate against the shipped model, from
    their report.json files (OUT/cand-PART, OUT/base-PART)."""
    def bleu(which):
        with open(os.path.join(out, f"{which}-{part}", "report.json")) as f:
            return {(d["set"], d["direction"]): d["bleu"] for d in json.load(f)["directions"]}
    old, new = bleu("base"), bleu("cand")
    return [(k[0], k[1], new[k] - old[k]) for k in new if k in old]


def ui_line(out):
    """The user-interface strings' change (OUT/cand-eu against OUT/base-eu), one line."""
    try:
        ui = changes(out, "eu")
    except (OSError, ValueError, KeyError) as e:
        return f"ui strings: no comparison ({e})"
    if not ui:
        return "ui strings: no direction in both base-eu and cand-eu"
    return (f"ui strings: {sum(c > 0 for _, _, c in ui)} of {len(ui)} directions up, "
            f"{sum(c for _, _, c in ui) / len(ui):+.3f} on average ("
            + ", ".join(f"{d} {c:+.2f}" for _, d, c in ui) + "; beside the rule, not part of it)")


def last_line(path, prefix):
    with open(path) as f:
        lines = [line.strip() for line in f if line.startswith(prefix)]
    return lines[-1] if lines else "(none)"


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out = argv[1]
    try:
        whole = changes(out, "ew") + changes(out, "ewj")
        with open(os.path.join(out, "nll.json")) as f:
            nll = json.load(f)
        old, new = nll[0]["nll"], nll[1]["nll"]
        summaries = {part: last_line(os.path.join(out, f"cand-{part}.log"), "all: mean change")
                     for part in ("ew", "ewj", "e")}
        int8 = last_line(os.path.join(out, "int8.log"), "int8:")
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"snapshot_summary: {out} is incomplete: {e}", file=sys.stderr)
        return 2
    if not whole:
        print(f"snapshot_summary: no whole-set direction in both {out}/base-ew* and cand-ew*", file=sys.stderr)
        return 2
    for part, line in summaries.items():
        print(f"{part:4} {line}")
    print(f"int8 {int8}")
    general = [k for k in old if k.startswith("g:")]
    lower = sum(new[k] < old[k] for k in general)
    print(f"general dev NLL {old['mean general']:.4f} -> {new['mean general']:.4f} ({lower} of {len(general)} "
          f"directions lower); joined {old.get('mean joined', float('nan')):.4f} -> "
          f"{new.get('mean joined', float('nan')):.4f}; Multi30k {old['mean multi30k']:.4f} -> "
          f"{new['mean multi30k']:.4f}")
    if os.path.isfile(os.path.join(out, "cand-eu", "report.json")):
        print(ui_line(out))
    up = sum(c > 0 for _, _, c in whole)
    mean = sum(c for _, _, c in whole) / len(whole)
    print(f"whole sets: {up} of {len(whole)} directions up, {mean:+.3f} on average")
    why = [what for what, ok in (("the general dev NLL is not lower", new["mean general"] < old["mean general"]),
                                 (f"{up} of {len(whole)} up is not most", 2 * up > len(whole)),
                                 (f"{mean:+.3f} on average is under +{MIN_MEAN_GAIN:.2f}", mean >= MIN_MEAN_GAIN))
           if not ok]
    print(f"ship rule (a lower general dev NLL, ahead on most whole-set directions, by +{MIN_MEAN_GAIN:.2f} "
          f"or more on average):", "MET" if not why else "not met: " + "; ".join(why))
    return 0 if not why else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
