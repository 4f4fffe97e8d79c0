#!/usr/bin/python3
"""What the repetition guard (decoding.max_repeats) changes, per test set and direction.

    tools/repeat_guard_report.py --model models/default --suite ../shared [--limit 500] [--repeats 3]

Translates each set twice with the C engine (`deepmt translate`, beam 4 as configured):
guard off (--max-repeats 0) and on (--max-repeats N), then reports how many outputs
differ, how many outputs hold a run of 4+ identical characters the source lacks
(with the guard off and on), and BLEU both ways (scripts/bleu.py, sacreBLEU-exact).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bleu  # noqa: E402
import evaluate as ev  # noqa: E402

RUN4 = re.compile(r"(.)\1{3,}", re.S)


def translate(binary, model, lines, tgt, repeats, threads):
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        f.writelines(x.replace("\n", " ") + "\n" for x in lines)
        path = f.name
    try:
        r = subprocess.run([binary, "translate", "-m", model, "-t", tgt, "-q", "--max-repeats", str(repeats),
                            "--threads", str(threads), "-i", path], capture_output=True, text=True, check=True)
    finally:
        os.unlink(path)
    return r.stdout.split("\n")[:len(lines)]


def new_runs(src, hyp):
    return sum(1 for s, h in zip(src, hyp) if any(m.group(0)[:4] not in s for m in RUN4.finditer(h)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default"))
    ap.add_argument("--suite", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "deepmt"))
    ap.add_argument("--sets", default="multi30k/test_2016_flickr,tatoeba,flores101")
    ap.add_argument("--directions", default="en-de,en-fr,de-en,fr-en,en-cs,cs-en")
    ap.add_argument("--limit", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    sets = ev.suite_sets(os.path.join(args.suite, "data"))
    wanted = set(args.directions.split(","))
    print(f"{'set':<28} {'dir':<6} {'lines':>5} {'changed':>7} {'runs off':>8} {'runs on':>7} {'BLEU off':>8} {'BLEU on':>7}")
    tot = [0, 0, 0, 0]
    for name in args.sets.split(","):
        for direction, sp, rp in sets[name]:
            if direction not in wanted or not (os.path.isfile(sp) and os.path.isfile(rp)):
                continue
            src, ref = ev.read_lines(sp)[:args.limit], ev.read_lines(rp)[:args.limit]
            tgt = direction.split("-")[1]
            off = translate(args.binary, args.model, src, tgt, 0, args.threads)
            on = translate(args.binary, args.model, src, tgt, args.repeats, args.threads)
            changed = sum(a != b for a, b in zip(off, on))
            r_off, r_on = new_runs(src, off), new_runs(src, on)
            b_off, b_on = bleu.corpus_bleu(off, ref)["score"], bleu.corpus_bleu(on, ref)["score"]
            print(f"{name:<28} {direction:<6} {len(src):5d} {changed:7d} {r_off:8d} {r_on:7d} {b_off:8.2f} {b_on:7.2f}",
                  flush=True)
            tot = [tot[0] + len(src), tot[1] + changed, tot[2] + r_off, tot[3] + r_on]
    print(f"{'all':<35} {tot[0]:5d} {tot[1]:7d} {tot[2]:8d} {tot[3]:7d}")


if __name__ == "__main__":
    main()
