#!/usr/bin/python3
"""scripts/bleu.py against sacreBLEU 2.6's own scores ($DEEPMT_SHARED/bleu-vectors),
plus the 13a tokenizer on hand-checked cases and the command line. TAP output."""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))

import tap  # noqa: E402
import bleu  # noqa: E402

BLEU_PY = os.path.join(REPO, "scripts", "bleu.py")


def close(a, b, tol):
    return a is not None and b is not None and abs(a - b) <= tol


def check_tokenizer():
    # Expected outputs follow from the mteval-v13a rules (sacreBLEU tokenizer_13a/re).
    cases = [
        ("Hello, world!", "Hello , world !"),
        ("The price is 1,000.50 dollars.", "The price is 1,000.50 dollars ."),
        ("3.14, x", "3.14 , x"),
        ("&quot;x&quot; &lt;b&gt; &amp; c", '" x " < b > & c'),
        ("&amp;quot;", "& quot ;"),            # one pass of unescaping only
        ("a<skipped>b", "ab"),
        ("2-3 well-known man-made", "2 - 3 well-known man-made"),
        ("end-\nline\nnext", "endline next"),
        ("it's (ok) [x] {y} a/b #1 $2 50% @me", "it's ( ok ) [ x ] { y } a / b # 1 $ 2 50 % @ me"),
        ("  Tabs\tand   spaces  ", "Tabs and spaces"),
        ("Zürich — schön.", "Zürich — schön ."),
        ("", ""),
    ]
    for src, want in cases:
        got = bleu.tokenize_13a(src)
        tap.ok(got == want, f"13a tokenizes {src!r}", f"got  {got!r}\nwant {want!r}")


def check_library():
    hyps = ["the cat sat on the mat", "a dog ran", ""]
    refs = ["the cat sat on a mat", "a dog ran away", "nothing"]
    r = bleu.corpus_bleu(hyps, refs)
    # totals follow from the token counts: 6 + 3 + 0 tokens
    tap.ok(r["totals"] == [9, 7, 5, 3] and r["sys_len"] == 9 and r["ref_len"] == 11,
           "corpus_bleu totals and lengths on a small corpus", json.dumps(r))
    same = bleu.corpus_bleu(refs, refs)
    tap.ok(close(same["score"], 100.0, 1e-9), "identical hypotheses score 100", same["score"])
    multi = bleu.corpus_bleu(hyps, [refs, hyps])
    tap.ok(close(multi["score"], 100.0, 1e-9) and multi["signature"].startswith("nrefs:2|"),
           "a second reference equal to the hypotheses gives 100 (multi-reference)",
           json.dumps(multi))
    c = bleu.corpus_chrf(refs, refs)
    tap.ok(close(c["score"], 100.0, 1e-9), "identical hypotheses get chrF 100", c["score"])
    try:
        bleu.corpus_bleu(hyps, refs[:2])
        raised = False
    except ValueError:
        raised = True
    tap.ok(raised, "corpus_bleu rejects streams of different lengths")
    short = bleu.corpus_bleu(["a b"], ["a b"])
    tap.ok(short["score"] == 0.0 and short["totals"] == [2, 1, 0, 0] and short["counts"] == [2, 1, 0, 0],
           "no 3-grams at all: BLEU 0 without effective order (as sacreBLEU)", json.dumps(short))
    empty = bleu.corpus_bleu([], [])
    tap.ok(empty["score"] == 0.0, "empty corpus scores 0 without crashing", json.dumps(empty))


def check_vectors(vdir):
    with open(os.path.join(vdir, "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)
    cases = expected["cases"]
    tap.ok(len(cases) > 0, f"expected.json lists cases ({len(cases)})")
    for name in sorted(cases):
        exp = cases[name]
        hyps = bleu.read_lines(os.path.join(vdir, name + ".hyp"))
        refs = bleu.read_lines(os.path.join(vdir, name + ".ref"))
        tap.ok(len(hyps) == exp["sentences"] == len(refs),
               f"{name}: {exp['sentences']} segments read",
               f"hyp {len(hyps)}, ref {len(refs)}, expected {exp['sentences']}")
        b = bleu.corpus_bleu(hyps, refs)
        tap.ok(close(b["score"], exp["bleu"], 0.01), f"{name}: BLEU {exp['bleu']}",
               f"got {b['score']:.4f}, sacreBLEU {exp['bleu']}")
        tap.ok(b["counts"] == exp["bleu_counts"], f"{name}: n-gram counts",
               f"got {b['counts']}, sacreBLEU {exp['bleu_counts']}")
        tap.ok(b["totals"] == exp["bleu_totals"], f"{name}: n-gram totals",
               f"got {b['totals']}, sacreBLEU {exp['bleu_totals']}")
        tap.ok(b["sys_len"] == exp["sys_len"] and b["ref_len"] == exp["ref_len"],
               f"{name}: hyp_len and ref_len",
               f"got {b['sys_len']}/{b['ref_len']}, sacreBLEU {exp['sys_len']}/{exp['ref_len']}")
        tap.ok(close(b["bp"], exp["bleu_bp"], 1e-5), f"{name}: brevity penalty",
               f"got {b['bp']:.6f}, sacreBLEU {exp['bleu_bp']}")
        c = bleu.corpus_chrf(hyps, refs)
        tap.ok(close(c["score"], exp["chrf"], 0.01), f"{name}: chrF2 {exp['chrf']}",
               f"got {c['score']:.4f}, sacreBLEU {exp['chrf']}")
    # signatures (ours add a version field; sacreBLEU's chrF one carries the name)
    ours_b = bleu.bleu_signature(1).rsplit("|version:", 1)[0]
    ours_c = "chrF2|" + bleu.chrf_signature(1).rsplit("|version:", 1)[0]
    tap.ok(ours_b == expected["bleu_signature"], "BLEU signature matches sacreBLEU's",
           f"got {ours_b}, sacreBLEU {expected['bleu_signature']}")
    tap.ok(ours_c == expected["chrf_signature"], "chrF signature matches sacreBLEU's",
           f"got {ours_c}, sacreBLEU {expected['chrf_signature']}")
    return cases


def check_cli(vdir, cases):
    name = sorted(cases)[0]
    exp = cases[name]
    p = subprocess.run([sys.executable, BLEU_PY, os.path.join(vdir, name + ".hyp"),
                        os.path.join(vdir, name + ".ref"), "--json"],
                       capture_output=True, text=True, timeout=120)
    try:
        out = json.loads(p.stdout)
        got_b, got_c = out["bleu"]["score"], out["chrf"]["score"]
    except (ValueError, KeyError, TypeError):
        got_b = got_c = None
    tap.ok(p.returncode == 0 and close(got_b, exp["bleu"], 0.01) and close(got_c, exp["chrf"], 0.01),
           f"bleu.py --json on {name}", f"rc {p.returncode}\n{p.stdout[-800:]}\n{p.stderr[-800:]}")
    p = subprocess.run([sys.executable, BLEU_PY, os.path.join(vdir, name + ".hyp"),
                        os.path.join(vdir, name + ".ref")],
                       capture_output=True, text=True, timeout=120)
    want = f"BLEU = {exp['bleu']:.2f}"
    tap.ok(p.returncode == 0 and want in p.stdout
           and "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in p.stdout
           and "chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:" in p.stdout,
           "bleu.py text output: score line and both signatures", p.stdout + p.stderr)


def check_cli_errors():
    with tempfile.TemporaryDirectory() as tmp:
        h, r = os.path.join(tmp, "h"), os.path.join(tmp, "r")
        with open(h, "w", encoding="utf-8") as f:
            f.write("a b c\nd e f\n")
        with open(r, "w", encoding="utf-8") as f:
            f.write("a b c\n")
        p = subprocess.run([sys.executable, BLEU_PY, h, r], capture_output=True, text=True, timeout=60)
        tap.ok(p.returncode == 2 and "different lengths" in p.stderr and "Traceback" not in p.stderr,
               "bleu.py: mismatched line counts -> message and exit 2", f"rc {p.returncode}\n{p.stderr}")
        p = subprocess.run([sys.executable, BLEU_PY, h, os.path.join(tmp, "missing")],
                           capture_output=True, text=True, timeout=60)
        tap.ok(p.returncode == 2 and "missing" in p.stderr and "Traceback" not in p.stderr,
               "bleu.py: missing file -> message and exit 2", f"rc {p.returncode}\n{p.stderr}")
        with open(r, "a", encoding="utf-8") as f:
            f.write("d e g\n")
        # the reader is gone before bleu.py writes (`bleu.py ... | head -1`): no traceback
        p = subprocess.Popen([sys.executable, BLEU_PY, h, r], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()
        err = p.stderr.read().decode()
        p.wait(timeout=60)
        tap.ok("Traceback" not in err and p.returncode != 0, "bleu.py: a closed output pipe ends it without a traceback",
               f"rc {p.returncode}\n{err}")


def main():
    check_tokenizer()
    check_library()
    check_cli_errors()
    shared = os.environ.get("DEEPMT_SHARED") or os.path.join(REPO, "..", "shared")
    vdir = os.path.join(shared, "bleu-vectors")
    if not os.path.isfile(os.path.join(vdir, "expected.json")):
        tap.skip(f"no sacreBLEU vectors at {vdir} (set DEEPMT_SHARED)")
    else:
        cases = check_vectors(vdir)
        check_cli(vdir, cases)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
