#!/usr/bin/python3
"""Compare decoding settings (beam size, length penalty) on a model's general sets:
each setting translates the same lines with `deepmt translate`, and gets
sacreBLEU-exact BLEU per direction (scripts/bleu.py), the mean over directions and
the translation time against the first setting's. Standard library only.

    # choose on the dev sets (the first 1,500 lines of each of the six directions)
    scripts/decoding_sweep.py --lines 1500 4:1.0 4:1.3 6:1.0
    # then check the choice on the whole test sets
    scripts/decoding_sweep.py --set tatoeba 4:1.0 6:1.0

A setting is BEAM:LENGTH_PENALTY. Sets are read from --general (the layout of
../shared/data/general, its README): `dev` (dev/en-XX.{en,XX}), `tatoeba`
(test/tatoeba.en-XX.{en,XX}) or `flores101` (test/flores101.devtest.LANG); the
directions are en<->de, en<->fr, en<->cs, those the files exist for. Lines are
translated whole (`--no-split`), with --threads threads, so times compare only within
one run on a quiet machine.

Exit status: 0 done; 1 a translation failed; 2 bad usage or missing data.
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bleu  # noqa: E402

PAIRS = ("de", "fr", "cs")  # each paired with English, both ways


def parse_setting(text):
    """'6:1.3' -> (6, 1.3); ValueError with a message otherwise."""
    beam, sep, penalty = text.partition(":")
    try:
        b, lp = int(beam), float(penalty)
    except ValueError:
        raise ValueError(f"setting {text!r}: expected BEAM:LENGTH_PENALTY, e.g. 4:1.0") from None
    if not sep or not 1 <= b <= 64 or not -10 <= lp <= 10:
        raise ValueError(f"setting {text!r}: beam 1-64 and length penalty -10..10, e.g. 4:1.0")
    return b, lp


def set_files(general, name, x):
    """-> {direction: (source file, reference file)} for English and language x."""
    if name == "dev":
        en, other = f"{general}/dev/en-{x}.en", f"{general}/dev/en-{x}.{x}"
    elif name == "tatoeba":
        en, other = f"{general}/test/tatoeba.en-{x}.en", f"{general}/test/tatoeba.en-{x}.{x}"
    else:
        en, other = f"{general}/test/flores101.devtest.en", f"{general}/test/flores101.devtest.{x}"
    if not (os.path.isfile(en) and os.path.isfile(other)):
        return {}
    return {f"en-{x}": (en, other), f"{x}-en": (other, en)}


def read_lines(path, limit):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines[:limit] if limit else lines


def translate(args, lines, target, beam, penalty):
    """-> (translations, seconds)."""
    cmd = [args.bin, "translate", "-m", args.model, "-t", target, "-b", str(beam), "--length-penalty",
           str(penalty), "--no-split", "--threads", str(args.threads), "-q"]
    start = time.monotonic()
    r = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, encoding="utf-8")
    seconds = time.monotonic() - start
    out = r.stdout.split("\n")[:len(lines)]
    if r.returncode != 0 or len(out) != len(lines):
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}, {len(out)} of {len(lines)} lines: "
                           f"{r.stderr.strip()[-500:]}")
    return out, seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("settings", nargs="+", help="BEAM:LENGTH_PENALTY, the first is the baseline")
    ap.add_argument("--model", default=os.path.join(REPO, "models", "default"))
    ap.add_argument("--general", default=os.environ.get("DEEPMT_GENERAL")
                    or os.path.join(REPO, "..", "shared", "data", "general"),
                    help="general-domain data folder (env DEEPMT_GENERAL)")
    ap.add_argument("--set", default="dev", choices=("dev", "tatoeba", "flores101"))
    ap.add_argument("--lines", type=int, default=0, help="the first N lines of each direction (0: all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bin", default=os.environ.get("DEEPMT_BIN") or os.path.join(REPO, "build", "deepmt"))
    args = ap.parse_args(argv)
    try:
        settings = [parse_setting(s) for s in args.settings]
    except ValueError as e:
        ap.error(str(e))
    if args.lines < 0 or args.threads < 1:
        ap.error("--lines must be 0 or more and --threads 1 or more")
    directions = {}
    for x in PAIRS:
        directions.update(set_files(args.general, args.set, x))
    if not directions:
        print(f"decoding_sweep: no {args.set} files for en-de, en-fr or en-cs in {args.general}", file=sys.stderr)
        return 2
    if not os.access(args.bin, os.X_OK):
        print(f"decoding_sweep: {args.bin} is not built (make)", file=sys.stderr)
        return 2
    data = {d: (read_lines(src, args.lines), read_lines(ref, args.lines)) for d, (src, ref) in directions.items()}
    names = list(data)
    print(f"# {args.set}, {', '.join(f'{d} {len(data[d][0])}' for d in names)} lines; model {args.model}")
    print("| setting | " + " | ".join(names) + " | mean | seconds | time vs the first |")
    print("|---" * (len(names) + 4) + "|")
    base_seconds = None
    for beam, penalty in settings:
        scores, seconds = [], 0.0
        for d in names:
            src, ref = data[d]
            try:
                hyps, took = translate(args, src, d.split("-")[1], beam, penalty)
            except RuntimeError as e:
                print(f"decoding_sweep: {e}", file=sys.stderr)
                return 1
            seconds += took
            scores.append(bleu.corpus_bleu(hyps, ref)["score"])
        base_seconds = base_seconds or max(seconds, 1e-6)
        mean = sum(scores) / len(scores)
        print(f"| beam {beam}, length penalty {penalty:g} | " + " | ".join(f"{s:.2f}" for s in scores)
              + f" | {mean:.3f} | {seconds:.1f} | {seconds / base_seconds:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
