#!/usr/bin/python3
"""Measure which ASCII punctuation and symbols a model loses, and record them in its
config.json, so that the pass-through copies the words that hold them (docs/decoding.md,
"Characters the model loses").

    tools/check_characters.py models/default            # the table
    tools/check_characters.py models/default --write    # and decoding.pass_through_characters

A small model has seen some characters too rarely to copy them: the default model wrote
"Type ~x to go on." as "Type öffnungsmittel, um zu gehen." and "C:\\Users\\anna" as
invented letters. Each printable ASCII character that is neither a letter nor a digit
nor punctuation or a sign a translation may rightly change (. , ; : ! ? ' " ( ) -
become other marks or spacing in German or French; $ % & may become words) is put into 8 English sentences (alone, at a
word's start, inside a word, at its end, around a word, before and after a number) and
translated into each other language of the model by `deepmt translate --no-split`, with
decoding.pass_through off: the model alone. An output loses the character when it holds
it fewer times than its source. The characters lost in at least --min-loss of the
outputs (0.2) are what --write stores as "decoding": {"pass_through_characters": ...};
with "pass_through": true the engine then keeps every word with one of them out of the
model and copies it.

Exit status: 0 done, 1 a translation failed, 2 bad usage.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_FILES = ("model.safetensors", "sentencepiece.model", "vocab.txt", "shortlist.bin")
# what a translation may rightly write otherwise: quotes, spacing, full stops, brackets,
# and signs it may write as words or after the number ("$100" -> "100 $", "100 dollars":
# copying "$" words cost the default model 2.1 BLEU on newstest2014's 67 en-fr lines with one)
CHANGEABLE = set(".,;:!?'\"()-$%&")
CANDIDATES = "".join(c for c in map(chr, range(0x21, 0x7F)) if not c.isalnum() and c not in CHANGEABLE)
TEMPLATES = ["Type {c}x to go on.", "The file is called a{c}b.txt now.", "We paid 5{c} for the tickets.",
             "Use the key {c} twice.", "Write x{c} in the box.", "The code {c}42 is wrong.",
             "She wrote {c}hello{c} on the wall.", "Look at page {c}3 of the book."]


def model_alone(src, tmp):
    """A model directory in tmp with src's files and pass_through off."""
    d = os.path.join(tmp, "alone")
    os.makedirs(d)
    for f in MODEL_FILES:
        if os.path.exists(os.path.join(src, f)):
            os.symlink(os.path.abspath(os.path.join(src, f)), os.path.join(d, f))
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg.setdefault("decoding", {})["pass_through"] = False
    cfg["decoding"].pop("pass_through_characters", None)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d


def translate(binary, model, target, lines, threads):
    cmd = [binary, "translate", "-m", model, "-t", target, "--no-split", "-q"]
    if threads:
        cmd += ["--threads", str(threads)]
    r = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True)
    out = r.stdout.split("\n")[:len(lines)]
    if r.returncode != 0 or len(out) != len(lines):
        raise RuntimeError(f"deepmt translate -t {target} failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    return out


def measure(binary, model, targets, threads, show):
    """{character: (outputs that lost it, outputs)}"""
    lines = [t.format(c=c) for c in CANDIDATES for t in TEMPLATES]
    chars = [c for c in CANDIDATES for _ in TEMPLATES]
    lost = {c: [0, 0] for c in CANDIDATES}
    for target in targets:
        for line, out, c in zip(lines, translate(binary, model, target, lines, threads), chars):
            lost[c][1] += 1
            if out.count(c) < line.count(c):
                lost[c][0] += 1
                if show:
                    print(f"  {target}: {line!r} -> {out!r}")
    return {c: tuple(v) for c, v in lost.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="model directory")
    p.add_argument("--min-loss", type=float, default=0.2,
                   help="the share of outputs a character must be lost in to be passed through [0.2]")
    p.add_argument("--threads", type=int, default=0, help="deepmt translate --threads [all cores]")
    p.add_argument("--binary", default=os.environ.get("DEEPMT_BIN", os.path.join(REPO, "build", "deepmt")))
    p.add_argument("--show", action="store_true", help="print every output that lost its character")
    p.add_argument("--write", action="store_true", help="store the result in MODEL/config.json")
    args = p.parse_args(argv)
    config = os.path.join(args.model, "config.json")
    try:
        with open(config) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        print(f"check_characters: {config}: {e}", file=sys.stderr)
        return 2
    codes = [lang.get("code") for lang in cfg.get("languages", [])]
    if "en" not in codes:
        print(f"check_characters: the sentences are English, and {args.model} has no \"en\" (it has "
              f"{', '.join(map(str, codes)) or 'no languages'})", file=sys.stderr)
        return 2
    if not 0 < args.min_loss <= 1:
        print("check_characters: --min-loss must be in (0, 1]", file=sys.stderr)
        return 2
    if not os.access(args.binary, os.X_OK):
        print(f"check_characters: {args.binary} missing: run make", file=sys.stderr)
        return 2
    targets = [c for c in codes if c != "en"]
    tmp = tempfile.mkdtemp(prefix="deepmt-chars-")
    try:
        lost = measure(args.binary, model_alone(args.model, tmp), targets, args.threads, args.show)
    except RuntimeError as e:
        print(f"check_characters: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"lost by {args.model} alone, of {len(TEMPLATES)} sentences x {len(targets)} targets "
          f"({', '.join(targets)}):")
    print("  " + "  ".join(f"{c} {n}/{total}" for c, (n, total) in lost.items()))
    chosen = "".join(c for c, (n, total) in lost.items() if total and n / total >= args.min_loss)
    print(f"pass_through_characters (lost in at least {args.min_loss:.0%}): {json.dumps(chosen)}")
    if args.write:
        cfg.setdefault("decoding", {})["pass_through_characters"] = chosen
        with open(config, "w") as f:
            json.dump(cfg, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print(f"written to {config}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
