#!/usr/bin/python3
"""Compare two evaluation reports (scripts/evaluate.py --json, `make eval`'s
report.json): BLEU per direction, the change, the mean change per test set and how
many directions went up; with --suite, a paired bootstrap test per direction says
which changes are larger than the test set's sampling noise.

    scripts/compare_reports.py OLD/report.json NEW/report.json
    scripts/compare_reports.py OLD/report.json NEW/report.json --suite ../shared

The bootstrap (Koehn, 2004; sacreBLEU's --paired-bs): both systems' translations are
scored on the same --bootstrap resamples of the test set's sentences; p is the share
of resamples whose change, shifted to mean 0, is at least as large as the observed
one (two-sided, add-one smoothed), and the 95% interval is the resampled changes'
2.5th to 97.5th percentile. It reads each report's hypothesis files (hyp_file) and
the references from --suite (the folder holding data/), and refuses a hypothesis
file whose BLEU is no longer the report's (a file changed or overwritten since).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bleu  # noqa: E402
import evaluate  # noqa: E402

EXIT_USAGE = 2


class CompareError(Exception):
    pass


def load_report(path):
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        raise CompareError(f"{path}: {e.strerror or e}")
    except ValueError as e:
        raise CompareError(f"{path}: not a JSON report: {e}")
    rows = report.get("directions") if isinstance(report, dict) else None
    if not isinstance(rows, list):
        raise CompareError(f"{path}: no \"directions\" list (write reports with scripts/evaluate.py --json)")
    out = {}
    for row in rows:
        try:
            key = (row.get("set") or "", row["direction"])
            float(row["bleu"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise CompareError(f"{path}: a direction without \"direction\" and \"bleu\": {str(row)[:120]}")
        out[key] = row
    return report, out


def hyp_candidates(row, report_path):
    """Where the report's hypotheses may be: hyp_file as written, then the same name
    beside the report (a report folder that was moved or copied: its hyp_file may
    name the old place, which a later run may have overwritten)."""
    path = row.get("hyp_file") or ""
    beside = os.path.join(os.path.dirname(os.path.abspath(report_path)), os.path.basename(path))
    found = [p for p in dict.fromkeys((path, beside)) if path and os.path.isfile(p)]
    if not found:
        raise CompareError(f"{report_path}: {row.get('set')} {row['direction']}: no hypothesis file "
                           f"{path or '(hyp_file not recorded)'}")
    return found


def references(sets, test_set, direction, count):
    """The first `count` reference lines of a direction of evaluate.suite_sets' `sets`."""
    for d, _, ref_path in sets.get(test_set, []):
        if d == direction:
            if not os.path.isfile(ref_path):
                raise CompareError(f"no reference file {ref_path}")
            refs = bleu.read_lines(ref_path)
            if len(refs) < count:
                raise CompareError(f"{ref_path} has {len(refs)} lines, the report {count}")
            return refs[:count]
    raise CompareError(f"--suite has no test set {test_set!r} direction {direction}")


def checked_stats(row, report_path, refs):
    """The segment statistics of the first candidate file that still scores the report's BLEU."""
    problems = []
    for path in hyp_candidates(row, report_path):
        hyps = bleu.read_lines(path)
        if len(hyps) != len(refs):
            problems.append(f"{path}: {len(hyps)} lines, the report scored {len(refs)}")
            continue
        stats = bleu.segment_stats(hyps, refs)
        score = bleu.bleu_from_stats([sum(col) for col in zip(*stats)])
        if abs(score - float(row["bleu"])) <= 0.01:
            return stats
        problems.append(f"{path}: BLEU {score:.2f} now, {float(row['bleu']):.2f} in {report_path} "
                        "(the file changed since the report was written)")
    raise CompareError("; ".join(problems))


def paired_bootstrap(old_stats, new_stats, samples, seed):
    """-> (p, low, high) of the change in BLEU over `samples` paired resamples."""
    try:
        import numpy as np
    except ImportError:
        raise CompareError("--suite's bootstrap needs numpy (apt-get install python3-numpy)")
    old, new = np.array(old_stats, dtype=np.float64), np.array(new_stats, dtype=np.float64)
    n = len(old)
    rng = np.random.default_rng(seed)
    # each resample as how often it draws each sentence: its statistics are one product
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=samples)
    old_sums, new_sums = weights @ old, weights @ new
    deltas = np.array([bleu.bleu_from_stats(b) - bleu.bleu_from_stats(a) for a, b in zip(old_sums, new_sums)])
    observed = bleu.bleu_from_stats(new.sum(0)) - bleu.bleu_from_stats(old.sum(0))
    p = (np.sum(np.abs(deltas - deltas.mean()) >= abs(observed) - 1e-9) + 1) / (samples + 1)
    low, high = np.percentile(deltas, [2.5, 97.5])
    return float(p), float(low), float(high)


def compare(args):
    old_report, old = load_report(args.old)
    new_report, new = load_report(args.new)
    sig_old, sig_new = old_report.get("bleu_signature"), new_report.get("bleu_signature")
    notes = []
    if sig_old and sig_new and sig_old != sig_new:
        notes.append(f"the reports' BLEU signatures differ: {sig_old} / {sig_new}")
    common = [k for k in new if k in old]
    for name, only in (("OLD", [k for k in old if k not in new]), ("NEW", [k for k in new if k not in old])):
        if only:
            notes.append(f"only in {name} (left out): " + ", ".join(f"{s} {d}".strip() for s, d in only))
    if not common:
        raise CompareError("the reports share no direction")
    # the user-interface strings' folder, where a report scored them (evaluate.py --ui)
    ui = new_report.get("ui") or old_report.get("ui")
    sets = evaluate.suite_sets(os.path.join(args.suite, "data"), ui) if args.suite else {}
    rows = []
    for key in common:
        a, b = old[key], new[key]
        if a.get("sentences") != b.get("sentences"):
            notes.append(f"{key[0]} {key[1]}: {a.get('sentences')} sentences in OLD, {b.get('sentences')} in NEW")
        row = {"set": key[0], "direction": key[1], "old": float(a["bleu"]), "new": float(b["bleu"])}
        row["change"] = row["new"] - row["old"]
        if args.suite and a.get("sentences") == b.get("sentences"):
            refs = references(sets, key[0], key[1], int(b["sentences"]))
            p, low, high = paired_bootstrap(checked_stats(a, args.old, refs), checked_stats(b, args.new, refs),
                                            args.bootstrap, args.seed)
            row.update(p=p, low=low, high=high)
        rows.append(row)
    return rows, notes


def print_rows(rows, notes, alpha, out=sys.stdout):
    tested = any("p" in r for r in rows)
    head = "| set | direction | OLD | NEW | change |" + (" 95% interval | p |" if tested else "")
    print(head, file=out)
    print("|" + "---|" * head.count(" |"), file=out)
    for r in rows:
        line = f"| {r['set']} | {r['direction']} | {r['old']:.2f} | {r['new']:.2f} | {r['change']:+.2f} |"
        if tested:
            line += (f" {r['low']:+.2f} to {r['high']:+.2f} | {r['p']:.4f}{' *' if r['p'] < alpha else ''} |"
                     if "p" in r else " | |")
        print(line, file=out)
    print(file=out)
    by_set = {}
    for r in rows:
        by_set.setdefault(r["set"], []).append(r)
    for name, group in list(by_set.items()) + [("all", rows)]:
        up = sum(r["change"] > 0 for r in group)
        down = sum(r["change"] < 0 for r in group)
        mean = sum(r["change"] for r in group) / len(group)
        line = f"{name or '(no set)'}: mean change {mean:+.2f} over {len(group)} directions, {up} up, {down} down"
        if tested:
            sig_up = sum(1 for r in group if r.get("p", 1) < alpha and r["change"] > 0)
            sig_down = sum(1 for r in group if r.get("p", 1) < alpha and r["change"] < 0)
            line += f"; p < {alpha:g}: {sig_up} up, {sig_down} down"
        print(line, file=out)
    for note in notes:
        print(f"note: {note}", file=out)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", metavar="OLD", help="the baseline's report.json")
    ap.add_argument("new", metavar="NEW", help="the report to compare with it")
    ap.add_argument("--suite", help="the folder holding data/ (../shared): references for the bootstrap test")
    ap.add_argument("--bootstrap", type=evaluate.positive, default=1000, help="resamples (default 1000)")
    ap.add_argument("--seed", type=int, default=12345, help="the resampling seed (default 12345)")
    ap.add_argument("--alpha", type=float, default=0.05, help="the p-value marked with * (default 0.05)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON to FILE")
    args = ap.parse_args(argv)
    if args.suite and not os.path.isdir(os.path.join(args.suite, "data")):
        ap.error(f"no data folder at {os.path.join(args.suite, 'data')} (--suite takes the folder holding data/)")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        rows, notes = compare(args)
    except CompareError as e:
        print(f"compare_reports.py: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (UnicodeDecodeError, ValueError) as e:
        print(f"compare_reports.py: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    print_rows(rows, notes, args.alpha)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "notes": notes}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
