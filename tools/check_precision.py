#!/usr/bin/python3
"""Measure what a faster precision costs a model in BLEU, and record it in the model's
config.json so that `--precision auto` (the default of `deepmt serve` and `deepmt
translate`) may run it (docs/decoding.md, "Precision by default").

    tools/check_precision.py models/default --sets multi30k/test_2016_flickr --write
    tools/check_precision.py MODEL --src test.en --ref test.de --direction en-de --write

Every direction the model serves in the chosen test sets (scripts/evaluate.py's suite:
multi30k/test_2016_flickr, flores101, tatoeba, newstest2014, newstest2020) is
translated by `deepmt translate --no-split` in F32 and in each precision asked for
(int8; bf16 where this CPU has AVX-512 BF16), with the model's own decoding defaults,
and scored with scripts/bleu.py (sacreBLEU's BLEU). The change against F32, per
direction, its mean and its worst, is printed; --write stores it as

    "precision_checks": {"int8": {"mean_bleu_change": -0.01, "worst_bleu_change": -0.27,
                                  "directions": 12, "test_set": "...", "lines": 12000,
                                  "measured": "2026-12-03, avx2"}}

`--precision auto` takes int8 (or bf16) when its mean change is at least -0.3 BLEU and
no direction lost more than 0.8 (model/model.h). A precision this CPU cannot run is
skipped with a message, and what config.json held for it is kept.

Exit status: 0 done, 1 a translation failed, 2 bad usage or missing data.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import bleu  # noqa: E402
import evaluate  # noqa: E402


def translate(binary, model, target, lines, precision, threads):
    """The translations of lines into target, or None with the error when this
    precision cannot run here (bf16 without AVX-512 BF16)."""
    cmd = [binary, "translate", "-m", model, "-t", target, "--precision", precision, "--no-split", "-q",
           "--no-shortlist"]  # the precision alone: tools/make_shortlist.py check measures the shortlist
    if threads:
        cmd += ["--threads", str(threads)]
    r = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    out = r.stdout.split("\n")[:-1] if r.stdout.endswith("\n") else r.stdout.split("\n")
    if len(out) != len(lines):
        return None, f"{len(out)} lines out for {len(lines)} in"
    return out, ""


def plan(args, served):
    """[(set name, direction, source lines, reference lines)] for the directions the
    model serves."""
    if args.src or args.ref or args.direction:
        if not (args.src and args.ref and args.direction):
            raise SystemExit("check_precision: --src, --ref and --direction go together")
        s, t = args.direction.split("-", 1)
        src, ref = evaluate.read_lines(args.src), evaluate.read_lines(args.ref)
        if len(src) != len(ref):
            raise SystemExit(f"check_precision: {args.src} has {len(src)} lines, {args.ref} {len(ref)}")
        return [(os.path.basename(args.src), f"{s}-{t}", src[:args.limit], ref[:args.limit])]
    sets = evaluate.suite_sets(os.path.join(args.shared, "data"))
    jobs = []
    for name in [n.strip() for n in args.sets.split(",") if n.strip()]:
        if name not in sets:
            raise SystemExit(f"check_precision: unknown test set {name} (known: {', '.join(sets)})")
        for direction, sp, rp in sets[name]:
            s, t = direction.split("-")
            if s not in served or t not in served:
                continue
            if not (os.path.isfile(sp) and os.path.isfile(rp)):
                print(f"check_precision: {name} {direction}: no {sp if not os.path.isfile(sp) else rp}, skipped",
                      file=sys.stderr)
                continue
            src, ref = evaluate.read_lines(sp), evaluate.read_lines(rp)
            jobs.append((name, direction, src[:args.limit], ref[:args.limit]))
    if not jobs:
        raise SystemExit(f"check_precision: no direction of {args.sets} that the model serves has its files "
                         f"under {args.shared}/data")
    return jobs


def write_config(path, checks):
    """config.json with precision_checks updated, key order kept, written atomically."""
    with open(path) as f:
        cfg = json.load(f)
    merged = dict(cfg.get("precision_checks") or {})
    merged.update(checks)
    cfg["precision_checks"] = merged
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".config.", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="model directory")
    p.add_argument("--sets", default="multi30k/test_2016_flickr",
                   help="comma-separated test sets of scripts/evaluate.py's suite [multi30k/test_2016_flickr]")
    p.add_argument("--shared", default=os.environ.get("DEEPMT_SHARED", os.path.join(REPO, "..", "shared")),
                   help="the folder holding data/ [$DEEPMT_SHARED or ../shared]")
    p.add_argument("--src", help="one source file instead of --sets (with --ref and --direction)")
    p.add_argument("--ref")
    p.add_argument("--direction", help="e.g. en-de")
    p.add_argument("--limit", type=int, default=None, help="the first N lines of each direction")
    p.add_argument("--precisions", default="int8,bf16", help="what to measure against F32 [int8,bf16]")
    p.add_argument("--threads", type=int, default=0, help="deepmt translate --threads [all cores]")
    p.add_argument("--binary", default=os.environ.get("DEEPMT_BIN", os.path.join(REPO, "build", "deepmt")))
    p.add_argument("--write", action="store_true", help="store the result in MODEL/config.json")
    args = p.parse_args(argv)
    config = os.path.join(args.model, "config.json")
    if not os.path.isfile(config):
        print(f"check_precision: {config}: no such file", file=sys.stderr)
        return 2
    if not os.access(args.binary, os.X_OK):
        print(f"check_precision: no deepmt binary at {args.binary} (make, or --binary)", file=sys.stderr)
        return 2
    precisions = [x.strip() for x in args.precisions.split(",") if x.strip()]
    if any(x not in ("int8", "bf16") for x in precisions):
        print("check_precision: --precisions takes int8 and bf16", file=sys.stderr)
        return 2
    with open(config) as f:
        served = {lang["code"] for lang in json.load(f).get("languages", [])}
    try:
        jobs = plan(args, served)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    scores = {}  # precision -> [bleu per job]
    refused = {}
    for prec in ["f32"] + precisions:
        for name, direction, src, ref in jobs:
            if prec in refused:
                break
            out, why = translate(args.binary, args.model, direction.split("-")[1], src, prec, args.threads)
            if out is None:
                if prec == "f32":
                    print(f"check_precision: {name} {direction} in f32 failed: {why}", file=sys.stderr)
                    return 1
                refused[prec] = why
                print(f"check_precision: {prec} skipped: {why}", file=sys.stderr)
                break
            score = bleu.corpus_bleu(out, [ref])["score"]
            scores.setdefault(prec, []).append(score)
            print(f"check_precision: {name} {direction} {prec}: BLEU {score:.2f}", file=sys.stderr, flush=True)
    sets = ", ".join(dict.fromkeys(j[0] for j in jobs))
    lines = sum(len(j[2]) for j in jobs)
    print(f"| test set | direction | F32 | " + " | ".join(f"{x} | change" for x in precisions if x in scores) + " |")
    print("|---|---|---|" + "---|---|" * sum(1 for x in precisions if x in scores))
    for i, (name, direction, _, _) in enumerate(jobs):
        row = [name, direction, f"{scores['f32'][i]:.2f}"]
        for x in precisions:
            if x in scores:
                row += [f"{scores[x][i]:.2f}", f"{scores[x][i] - scores['f32'][i]:+.2f}"]
        print("| " + " | ".join(row) + " |")
    checks = {}
    level = subprocess.run([args.binary, "inspect", args.model], capture_output=True, text=True).stdout
    level = next((ln.split(":", 1)[1].split("(")[0].strip() for ln in level.splitlines() if ln.startswith("kernels")),
                 "?")
    for x in precisions:
        if x not in scores:
            continue
        changes = [b - a for a, b in zip(scores["f32"], scores[x])]
        mean, worst = sum(changes) / len(changes), min(changes)
        checks[x] = {"mean_bleu_change": round(mean, 3), "worst_bleu_change": round(worst, 3),
                     "directions": len(changes), "test_set": sets[:95], "lines": lines,
                     "measured": f"{datetime.date.today().isoformat()}, {level}"}
        ok = mean >= -0.3 and worst >= -0.8
        print(f"{x}: BLEU {mean:+.3f} on average, {worst:+.2f} at worst over {len(changes)} directions "
              f"({'passes' if ok else 'misses'} the bar of -0.3 / -0.8: --precision auto "
              f"{'may run it' if ok else 'keeps f32'})")
    if args.write and checks:
        write_config(config, checks)
        print(f"check_precision: wrote precision_checks ({', '.join(checks)}) to {config}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
