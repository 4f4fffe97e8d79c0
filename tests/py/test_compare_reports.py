#!/usr/bin/python3
"""scripts/compare_reports.py (TAP) on made-up reports over a made-up suite folder:
the change per direction and per set, the paired bootstrap (a clear gain is
significant, identical systems are not, the same seed gives the same p), a report
folder that was moved or copied (its own hypotheses are used where the original was
overwritten), directions in one report only, and refusals: a hypothesis
file changed since its report, a missing one, a malformed report, no shared
direction. Also bleu.segment_stats: its sums give corpus_bleu's score.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))
import tap  # noqa: E402
import bleu  # noqa: E402

SCRIPT = os.path.join(REPO, "scripts", "compare_reports.py")
WORDS = "der die das ein eine Mann Frau Hund Katze Haus Baum rot blau groß klein läuft spielt liest schnell heute".split()


def sentences(rng, n):
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) + "." for _ in range(n)]


def degrade(rng, lines, share):
    """Drop and swap words in `share` of the lines."""
    out = []
    for line in lines:
        words = line[:-1].split()
        if rng.random() < share:
            del words[rng.randrange(len(words))]
            words[rng.randrange(len(words))] = rng.choice(WORDS)
        out.append(" ".join(words) + ".")
    return out


def write_report(folder, hyps_by_key, refs_by_key):
    os.makedirs(folder, exist_ok=True)
    rows = []
    for (test_set, direction), hyps in hyps_by_key.items():
        path = os.path.join(folder, f"{test_set}.{direction}.hyp")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(hyps) + "\n")
        score = bleu.corpus_bleu(hyps, refs_by_key[(test_set, direction)])["score"]
        rows.append({"set": test_set, "direction": direction, "sentences": len(hyps), "bleu": score,
                     "hyp_file": path})
    with open(os.path.join(folder, "report.json"), "w") as f:
        json.dump({"bleu_signature": bleu.bleu_signature(), "directions": rows}, f)
    return os.path.join(folder, "report.json")


def run(*args):
    r = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def table(out):
    """-> {(set, direction): [cells after the direction]}"""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) >= 5 and cells[0] not in ("set",) and not cells[0].startswith("-"):
            rows[(cells[0], cells[1])] = cells[2:]
    return rows


def main():
    rng = random.Random(7)
    # segment_stats sums to corpus_bleu's score, on lines with punctuation and empties
    hyps = sentences(rng, 40) + ["", "Ein Hund, 3.5 km!"]
    refs = degrade(rng, hyps[:40], 0.7) + ["x", "Ein Hund, 3.5 km."]
    sums = [sum(col) for col in zip(*bleu.segment_stats(hyps, refs))]
    want = bleu.corpus_bleu(hyps, refs)["score"]
    tap.ok(abs(bleu.bleu_from_stats(sums) - want) < 1e-9, "segment_stats' sums give corpus_bleu's score",
           f"{bleu.bleu_from_stats(sums)} against {want}")
    try:
        import numpy  # noqa: F401
        have_numpy = True
    except ImportError:
        have_numpy = False

    tmp = tempfile.mkdtemp(prefix="deepmt-compare-")
    try:
        test_dir = os.path.join(tmp, "suite", "data", "general", "test")
        os.makedirs(test_dir)
        src, ref = sentences(rng, 300), sentences(rng, 300)
        for lang, lines in (("en", src), ("de", ref)):
            with open(os.path.join(test_dir, f"tatoeba.en-de.{lang}"), "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        ref_fr = sentences(rng, 50)
        for name, lines in (("flores101.devtest.en", src[:50]), ("flores101.devtest.fr", ref_fr)):
            with open(os.path.join(test_dir, name), "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        suite = os.path.join(tmp, "suite")
        refs_by_key = {("tatoeba", "en-de"): ref, ("flores101", "en-fr"): ref_fr}
        worse = degrade(rng, ref, 0.9)
        better = degrade(rng, ref, 0.1)
        fr = degrade(rng, ref_fr, 0.5)
        old = write_report(os.path.join(tmp, "old"), {("tatoeba", "en-de"): worse, ("flores101", "en-fr"): fr},
                           refs_by_key)
        new = write_report(os.path.join(tmp, "new"), {("tatoeba", "en-de"): better, ("flores101", "en-fr"): fr},
                           refs_by_key)
        old_bleu = bleu.corpus_bleu(worse, ref)["score"]
        new_bleu = bleu.corpus_bleu(better, ref)["score"]

        rc, out, err = run(old, new)
        rows = table(out)
        tap.ok(rc == 0 and set(rows) == {("tatoeba", "en-de"), ("flores101", "en-fr")},
               "without --suite: one row per shared direction", out + err)
        got = rows.get(("tatoeba", "en-de"), [])
        tap.ok(got[:3] == [f"{old_bleu:.2f}", f"{new_bleu:.2f}", f"{new_bleu - old_bleu:+.2f}"],
               "the row has OLD, NEW and the change", f"{got} against {old_bleu:.2f} {new_bleu:.2f}")
        mean = (new_bleu - old_bleu) / 2
        tap.ok(f"all: mean change {mean:+.2f} over 2 directions, 1 up, 0 down" in out,
               "the summary: the mean change, how many up and down", out)

        if not have_numpy:
            tap.skip("numpy not installed: the bootstrap checks")
        else:
            rc, out, err = run(old, new, "--suite", suite, "--json", os.path.join(tmp, "rows.json"))
            rows = table(out)
            gain, same = rows.get(("tatoeba", "en-de"), []), rows.get(("flores101", "en-fr"), [])
            tap.ok(rc == 0 and len(gain) == 5 and gain[4].endswith("*") and float(gain[4].split()[0]) < 0.01,
                   "a clear gain (90% of the lines degraded against 10%) is significant", out + err)
            lo, hi = (float(x) for x in gain[3].split(" to ")) if len(gain) == 5 else (0, 0)
            tap.ok(0 < lo < new_bleu - old_bleu < hi, "its 95% interval holds the change and not 0", gain)
            tap.ok(len(same) == 5 and same[2] == "+0.00" and same[4] == "1.0000",
                   "identical translations: change +0.00, p 1", same)
            tap.ok("p < 0.05: 1 up, 0 down" in out, "the summary counts the significant changes", out)
            with open(os.path.join(tmp, "rows.json")) as f:
                dumped = json.load(f)["rows"]
            tap.ok(len(dumped) == 2 and all("p" in r for r in dumped), "--json writes the rows with p", dumped)
            rc2, out2, _ = run(old, new, "--suite", suite)
            tap.ok(out2 == out, "the same seed gives the same p and interval")

            # a report folder moved elsewhere: the hypotheses are found beside its report.json
            moved = os.path.join(tmp, "moved")
            shutil.copytree(os.path.join(tmp, "old"), moved)
            os.rename(os.path.join(tmp, "old"), os.path.join(tmp, "old-away"))
            rc, out, err = run(os.path.join(moved, "report.json"), new, "--suite", suite)
            tap.ok(rc == 0 and len(table(out).get(("tatoeba", "en-de"), [])) == 5,
                   "a moved report folder: hypotheses read beside report.json", out + err)

            # a copied report folder whose hyp_file names an original overwritten since
            shutil.copytree(moved, os.path.join(tmp, "old"))
            with open(os.path.join(tmp, "old", "tatoeba.en-de.hyp"), "w", encoding="utf-8") as f:
                f.write("\n".join(better) + "\n")
            rc, out, err = run(os.path.join(moved, "report.json"), new, "--suite", suite)
            tap.ok(rc == 0 and table(out).get(("tatoeba", "en-de"), [])[:2] == [f"{old_bleu:.2f}", f"{new_bleu:.2f}"]
                   and "*" in table(out)[("tatoeba", "en-de")][4],
                   "a copied report folder: its own hypotheses are used where the original was overwritten",
                   out + err)

            # a hypothesis file changed after its report was written
            with open(os.path.join(moved, "tatoeba.en-de.hyp"), "w", encoding="utf-8") as f:
                f.write("\n".join(better) + "\n")
            rc, out, err = run(os.path.join(moved, "report.json"), new, "--suite", suite)
            tap.ok(rc == 2 and "changed since the report" in err, "a changed hypothesis file is refused", err)
            os.remove(os.path.join(moved, "tatoeba.en-de.hyp"))
            shutil.rmtree(os.path.join(tmp, "old"))
            rc, out, err = run(os.path.join(moved, "report.json"), new, "--suite", suite)
            tap.ok(rc == 2 and "no hypothesis file" in err, "a missing hypothesis file is refused", err)

        # a direction in one report only
        only = write_report(os.path.join(tmp, "only"), {("tatoeba", "en-de"): better}, refs_by_key)
        rc, out, err = run(only, new)
        tap.ok(rc == 0 and "only in NEW (left out): flores101 en-fr" in out and len(table(out)) == 1,
               "a direction in one report only is named and left out", out + err)

        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        rc, out, err = run(bad, new)
        tap.ok(rc == 2 and "not a JSON report" in err and "Traceback" not in err, "a malformed report is refused",
               err)
        with open(bad, "w") as f:
            json.dump({"directions": [{"set": "tatoeba", "direction": "cs-en", "bleu": 10}]}, f)
        rc, out, err = run(bad, new)
        tap.ok(rc == 2 and "share no direction" in err, "reports without a shared direction are refused", err)
        rc, out, err = run(old, new, "--suite", os.path.join(tmp, "nowhere"))
        tap.ok(rc == 2 and "no data folder" in err, "a --suite without data/ is refused", err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
