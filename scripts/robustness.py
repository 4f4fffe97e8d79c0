#!/usr/bin/python3
"""Robustness report for a LibreTranslate-compatible server (run by `make eval`).

    scripts/robustness.py --url http://127.0.0.1:5000 --suite ../shared [--limit 300] [--checks LIST] [--json FILE]

What a user notices first, measured on the general-domain test sets (data/general/test):

  digits      share of source sentences with digits whose every digit run ("2024",
              "49", "99" in "49.99"; separators may change between languages) appears
              in the translation -- FLORES devtest and newstest, every direction listed
  passthrough share of inserted URLs, e-mail addresses and emoji that come out
              unchanged: one span inserted into each of N Tatoeba sentences (spans made
              here, with their own generator, not the training recipe's)
  code        the same for technical words: a Windows or home path, a[3], {name},
              x^2, `word`, <word>, a->b (characters a small model loses)
  scripts     the same for a word in another script: Russian, Greek, Arabic, Hebrew,
              Hindi, Chinese, Japanese, Korean (copied by a model of Latin-script
              languages, not translated)
  rules       the same for a rule, a blank or a row of stars: 3-12 of one of - _ * = ~ #
              (a model shortens or lengthens them)
  placeholders the same for a format placeholder (%s, %d, %1$s, {name}, {{user}},
              ${file}, %(count)d, $(ARG1)) put after a word inside the sentence, where
              program strings have them (kept exactly, the case included)
  numbers     share of large numbers whose value the translation keeps: the first
              number of 1-4 digits in N FLORES devtest sentences becomes one of 7-10
              digits grouped as the source language writes it (1,234,567 in English,
              1.234.567 in German, 1 234 567 in French and Czech); kept when the
              translation has those digits as one number, plain or grouped with one
              separator throughout -- English <-> German, French, Czech and German <-> French
  all-caps    share of Tatoeba sentences whose ALL-CAPS form translates to the same
              text as the normal form, compared case-insensitively
  runs        share of Tatoeba translations holding a run of 4+ identical characters
              that the source does not hold ("Dammmmme")

Targets (docs/evaluation.md): digits >= 95%, numbers >= 95%, each pass-through kind
(code, scripts, rules and placeholders too) >= 95%,
all-caps >= 80%, runs < 0.5%. Standard library only; exit 0 when measured (the
targets are reported, not enforced), 1-3 as scripts/evaluate.py.
"""

import argparse
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evaluate as ev  # noqa: E402

TARGETS = {"digits": 0.95, "url": 0.95, "email": 0.95, "emoji": 0.95, "code": 0.95, "scripts": 0.95, "rules": 0.95,
           "placeholders": 0.95, "numbers": 0.95, "all_caps": 0.80, "runs": 0.005}
DIGIT_DIRECTIONS = [("flores101.devtest", s, t) for s, t in
                    (("en", "de"), ("en", "fr"), ("en", "cs"), ("de", "en"), ("fr", "en"), ("cs", "en"))] + \
                   [("newstest2014.en-fr", "en", "fr"), ("newstest2020.en-de", "en", "de"),
                    ("newstest2020.de-en", "de", "en")]
NUMBER_DIRECTIONS = [("en", "de"), ("en", "fr"), ("en", "cs"), ("de", "en"), ("fr", "en"), ("cs", "en"), ("de", "fr"),
                     ("fr", "de")]
GROUP_SEPARATOR = {"en": ",", "de": ".", "fr": " ", "cs": " "}
# a number of 1-4 digits alone: not part of a grouped one ("4 000 000", "330 000")
SMALL_NUMBER = re.compile(r"(?<![\d.,'\w])(?<!\d[ \u00a0\u2009\u202f])\d{1,4}(?![\d\w]|[.,']\d|[ \u00a0\u2009\u202f]\d{3}(?!\d))")
# a number in a translation: digits in groups of three after one of these, or a plain run
WRITTEN_NUMBER = re.compile(r"\d{1,3}(?:([,. '\u00a0\u2009\u202f])\d{3})(?:\1\d{3})*(?!\d)|\d+")
TATOEBA = [("en", "de"), ("en", "fr"), ("en", "cs"), ("de", "en"), ("fr", "en"), ("cs", "en")]
RUN4 = re.compile(r"(.)\1{3,}", re.S)
EMOJI = ["😀", "😂", "👍", "🎉", "🙂", "🚀", "🔥", "✅", "🌍", "☕", "😢", "🙏", "⚽", "🐶", "🍕"]
FOREIGN = ["Москва", "спасибо", "Αθήνα", "καλημέρα", "القاهرة", "شكرا", "ירושלים", "שלום", "नमस्ते", "दिल्ली",
           "北京", "谢谢", "東京", "ありがとう", "서울", "감사합니다"]
PLACEHOLDERS = ["%s", "%d", "%1$s", "%2$d", "{NAME}", "{0}", "{{NAME}}", "${NAME}", "%(NAME)d", "$(ARG1)", "%.2f"]
WORDS = ["alpha", "nordic", "blue", "river", "data", "kontakt", "prague", "berlin", "lyon", "shop", "news", "team"]


def test_path(root, name, lang):
    """data/general/test file for a set name: tatoeba.en-de + en, flores101.devtest + en."""
    return os.path.join(root, "general", "test", f"{name}.{lang}")


def digit_runs(text):
    return re.findall(r"\d+", text)


def large_number(lang, rng):
    """7-10 digits grouped in threes the way lang writes them: the text and its digits."""
    digits = str(rng.randint(1_000_000, 9_999_999_999))
    head = len(digits) % 3 or 3
    groups = [digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)]
    return GROUP_SEPARATOR[lang].join(groups), digits


def keeps_number(translation, digits):
    """Whether the translation writes digits as one number (plain, or one separator throughout)."""
    return any(re.sub(r"\D", "", m.group(0)) == digits for m in WRITTEN_NUMBER.finditer(translation))


def make_span(kind, rng):
    w = lambda: rng.choice(WORDS)  # noqa: E731
    if kind == "url":
        path = "/".join(w() for _ in range(rng.randint(0, 2)))
        return (rng.choice(["https://", "http://", "https://www."]) + f"{w()}-{w()}.{rng.choice(['com', 'org', 'eu'])}"
                + (f"/{path}" if path else "") + (f"?page={rng.randint(1, 99)}" if rng.random() < 0.3 else ""))
    if kind == "code":
        n = rng.randint(0, 20)
        return rng.choice([f"C:\\Users\\{w()}\\{w()}.docx", f"~/{w()}/{w()}", f"{w()}[{n}]", "{" + w() + "}",
                           f"{w()}^{n}", f"`{w()}`", f"<{w()}>", f"{w()}->{w()}"])
    if kind == "scripts":
        return rng.choice(FOREIGN)
    if kind == "rules":
        return rng.choice("-_*=~#") * rng.randint(3, 12)
    if kind == "placeholders":
        return rng.choice(PLACEHOLDERS).replace("NAME", w())
    if kind == "email":
        return f"{w()}{rng.choice(['.', '_', ''])}{w()}{rng.randint(1, 99) if rng.random() < 0.5 else ''}@{w()}.{rng.choice(['com', 'de', 'fr', 'cz'])}"
    return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 2)))


def with_placeholder(sentence, placeholder, rng):
    """The placeholder after a word inside the sentence (not the last), where program
    strings have them ("Delete %d files?"); at the end of a sentence of one or two words."""
    words = sentence.split()
    if len(words) < 3:
        return with_span(sentence, placeholder, rng)
    at = rng.randint(1, len(words) - 1)
    return " ".join(words[:at] + [placeholder] + words[at:])


def with_span(sentence, span, rng):
    """The span at the end (before the final punctuation) or at the start."""
    s = sentence.rstrip()
    if rng.random() < 0.5:
        end = s[-1] if s and s[-1] in ".!?" else ""
        body = s[:-1].rstrip() if end else s
        return f"{body} {span}{end}"
    return f"{span} {s}"


CHECKS = ("digits", "numbers", "tatoeba")  # tatoeba: the pass-through kinds, ALL-CAPS and runs


def run_checks(client, root, limit, batch_size, log, checks=CHECKS):
    out = {"targets": TARGETS}

    def translate(texts, s, t):
        res = []
        for i in range(0, len(texts), batch_size):
            res += client.translate(texts[i:i + batch_size], s, t)
        return res

    # digits
    total = kept = 0
    per = {}
    for name, s, t in DIGIT_DIRECTIONS if "digits" in checks else ():
        p = test_path(root, name, s)
        if not os.path.isfile(p):
            continue
        src = [x for x in ev.read_lines(p) if digit_runs(x)][:limit]
        hyp = translate(src, s, t)
        ok = sum(all(r in digit_runs(h) for r in digit_runs(x)) for x, h in zip(src, hyp))
        per[f"{name} {s}-{t}"] = {"sentences": len(src), "all_digits_kept": ok}
        total, kept = total + len(src), kept + ok
        log(f"digits {name} {s}-{t}: {ok}/{len(src)}")
    if "digits" in checks:
        out["digits"] = {"share": kept / total if total else None, "sentences": total, "per_set": per}

    # large numbers, on FLORES (its sentences are the same in every language)
    rng_numbers = random.Random(20261209)
    total = kept = 0
    per, number_examples = {}, []
    for s, t in NUMBER_DIRECTIONS if "numbers" in checks else ():
        p = test_path(root, "flores101.devtest", s)
        if not os.path.isfile(p):
            continue
        src, want = [], []
        for x in ev.read_lines(p):
            m = SMALL_NUMBER.search(x)
            if m and len(src) < limit:
                text, digits = large_number(s, rng_numbers)
                src.append(x[:m.start()] + text + x[m.end():])
                want.append(digits)
        hyp = translate(src, s, t)
        ok = 0
        for x, d, h in zip(src, want, hyp):
            ok += keeps_number(h, d)
            if not keeps_number(h, d) and len(number_examples) < 5:
                number_examples.append({"source": x, "output": h})
        per[f"{s}-{t}"] = {"sentences": len(src), "kept": ok}
        total, kept = total + len(src), kept + ok
        log(f"numbers {s}-{t}: {ok}/{len(src)}")
    if "numbers" in checks:
        out["numbers"] = {"share": kept / total if total else None, "sentences": total, "per_direction": per}

    # pass-through spans and ALL-CAPS and runs, on Tatoeba
    rng = random.Random(20261201)
    caps_total = caps_same = 0
    runs_total = runs_bad = 0
    spans = {k: [0, 0] for k in ("url", "email", "emoji", "code", "scripts", "rules", "placeholders")}
    rng_new = random.Random(20261207)  # code and scripts: their own, so the older kinds' spans stay as they were
    rng_rules = random.Random(20261208)  # and rules theirs
    rng_placeholders = random.Random(20261210)  # and placeholders theirs
    examples = {"runs": [], "all_caps": [], "passthrough": []}
    for s, t in TATOEBA if "tatoeba" in checks else ():
        pair = f"tatoeba.{'-'.join(sorted((s, t), key=lambda x: x != 'en'))}"
        p = test_path(root, pair, s)
        if not os.path.isfile(p):
            continue
        src = [x for x in ev.read_lines(p) if x.strip()][:limit]
        hyp = translate(src, s, t)
        for x, h in zip(src, hyp):
            runs_total += 1
            bad = [m.group(0) for m in RUN4.finditer(h) if m.group(0)[:4] not in x]
            if bad:
                runs_bad += 1
                if len(examples["runs"]) < 5:
                    examples["runs"].append({"source": x, "output": h})
        upper = translate([x.upper() for x in src], s, t)
        for x, h, u in zip(src, hyp, upper):
            caps_total += 1
            same = " ".join(h.casefold().split()) == " ".join(u.casefold().split())
            caps_same += same
            if not same and len(examples["all_caps"]) < 5:
                examples["all_caps"].append({"source": x.upper(), "output": u, "normal_case_output": h})
        for kind in spans:
            r = rng if kind in ("url", "email", "emoji") else rng_rules if kind == "rules" else \
                rng_placeholders if kind == "placeholders" else rng_new
            made = [make_span(kind, r) for _ in src]
            place = with_placeholder if kind == "placeholders" else with_span
            texts = [place(x, sp, r) for x, sp in zip(src, made)]
            outs = translate(texts, s, t)
            for sp, x, o in zip(made, texts, outs):
                spans[kind][0] += 1
                spans[kind][1] += sp in o
                if sp not in o and len(examples["passthrough"]) < 6:
                    examples["passthrough"].append({"kind": kind, "source": x, "output": o})
        log(f"tatoeba {s}-{t}: {len(src)} sentences")
    if "tatoeba" in checks:
        out["runs"] = {"share": runs_bad / runs_total if runs_total else None, "outputs": runs_total,
                       "with_new_run": runs_bad}
        out["all_caps"] = {"share": caps_same / caps_total if caps_total else None, "sentences": caps_total}
        for kind, (n, k) in spans.items():
            out[kind] = {"share": k / n if n else None, "spans": n, "kept": k}
    examples["numbers"] = number_examples
    out["examples"] = examples
    return out


def print_report(r, out=sys.stdout):
    out.write(f"{'check':<12} {'measured':>9} {'target':>8}  count\n")
    for key, label, cmp in (("digits", "digits", ">="), ("numbers", "numbers", ">="), ("url", "URLs", ">="), ("email", "e-mails", ">="),
                            ("emoji", "emoji", ">="), ("code", "code", ">="), ("scripts", "scripts", ">="),
                            ("rules", "rules", ">="), ("placeholders", "placeholders", ">="),
                            ("all_caps", "ALL-CAPS", ">="), ("runs", "runs 4+", "<")):
        if key not in r:  # a report from before the kind was measured
            continue
        v = r[key]["share"]
        n = r[key].get("sentences") or r[key].get("spans") or r[key].get("outputs")
        shown = "n/a" if v is None else f"{100 * v:8.1f}%"
        met = "" if v is None else ("  met" if (v >= TARGETS[key] if cmp == ">=" else v < TARGETS[key]) else "  NOT met")
        out.write(f"{label:<12} {shown:>9} {cmp}{100 * TARGETS[key]:5.1f}%  {n}{met}\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:5000")
    ap.add_argument("--suite", required=True, help="the shared folder holding data/general")
    ap.add_argument("--limit", type=int, default=300, help="sentences per direction and check (default 300)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--checks", default=",".join(CHECKS),
                    help=f"comma-separated, of {', '.join(CHECKS)} (tatoeba: the pass-through kinds, ALL-CAPS and "
                         "runs; default: all)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    checks = [c for c in args.checks.split(",") if c]
    if not checks or any(c not in CHECKS for c in checks):
        ap.error(f"--checks: a comma-separated list of {', '.join(CHECKS)}")
    root = os.path.join(args.suite, "data")
    if not os.path.isdir(os.path.join(root, "general", "test")):
        print(f"robustness.py: no general test sets under {root}/general/test", file=sys.stderr)
        return ev.EXIT_USAGE
    log = (lambda m: None) if args.quiet else (lambda m: print(f"robustness: {m}", file=sys.stderr, flush=True))
    try:
        client = ev.Client(args.url, None, args.timeout, 5)
        client.languages()
        report = run_checks(client, root, args.limit, args.batch_size, log, checks)
    except ev.EvalError as e:
        print(f"robustness.py: error: {e}", file=sys.stderr)
        return e.code
    print_report(report)
    if args.json:
        ev.write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
