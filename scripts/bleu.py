#!/usr/bin/python3
"""Corpus BLEU and chrF, identical to sacreBLEU 2.6's defaults (standard library only).

    BLEU  nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp
    chrF2 nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no

As a library:
    from bleu import corpus_bleu, corpus_chrf
    corpus_bleu(hyps, refs)  -> {"score", "counts", "totals", "precisions", "bp",
                                 "sys_len", "ref_len", "signature", ...}
    corpus_chrf(hyps, refs)  -> {"score", "signature", "stats", ...}
    segment_stats(hyps, refs) -> per-segment BLEU statistics; bleu_from_stats(sums)
`refs` is either one reference stream (a list of strings, one per hypothesis) or a
list of reference streams (multi-reference; None marks a missing reference).

As a command:
    scripts/bleu.py HYP REF [REF ...] [--json]
Files are UTF-8, one segment a line (an empty line is an empty segment), split on
"\\n" only and right-stripped the way the sacrebleu command line reads them.

This follows sacreBLEU's code (metrics/bleu.py, metrics/chrf.py, metrics/helpers.py,
tokenizers/tokenizer_13a.py, tokenizers/tokenizer_re.py) step by step; the comments
say where a detail matters for identical scores.
"""

import argparse
import gzip
import json
import math
import re
import signal
import sys
from collections import Counter

VERSION = "2.6.0-compatible"
MAX_NGRAM_ORDER = 4
CHAR_ORDER = 6
WORD_ORDER = 0
BETA = 2

# --------------------------------------------------------------------------- 13a

# sacrebleu.tokenizers.tokenizer_re.TokenizerRegexp, the same patterns in the same order.
_13A_RULES = [
    # language-dependent part (assuming Western languages): split off punctuation
    # and symbols: { | } ~  [ \ ] ^ _ `  space ! " # $ % &  ( ) * +  : ; < = > ? @  /
    (re.compile(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])'), r' \1 '),
    # tokenize period and comma unless preceded by a digit
    (re.compile(r'([^0-9])([\.,])'), r'\1 \2 '),
    # tokenize period and comma unless followed by a digit
    (re.compile(r'([\.,])([^0-9])'), r' \1 \2'),
    # tokenize dash when preceded by a digit
    (re.compile(r'([0-9])(-)'), r'\1 \2 '),
]


def tokenize_13a(line):
    """mteval-v13a tokenization as sacreBLEU's Tokenizer13a does it."""
    # language-independent part
    line = line.replace('<skipped>', '')
    line = line.replace('-\n', '')
    line = line.replace('\n', ' ')
    if '&' in line:
        line = line.replace('&quot;', '"')
        line = line.replace('&amp;', '&')
        line = line.replace('&lt;', '<')
        line = line.replace('&gt;', '>')
    line = f' {line} '
    for pattern, repl in _13A_RULES:
        line = pattern.sub(repl, line)
    # no leading or trailing spaces, single space within words (str.split: any
    # Unicode whitespace, exactly like sacreBLEU)
    return ' '.join(line.strip().split())


# --------------------------------------------------------------------------- inputs

def _ref_streams(hyps, refs):
    """Normalise `refs` to a list of streams and check lengths; returns the streams."""
    hyps = list(hyps)
    refs = list(refs)
    if not refs or isinstance(refs[0], str) or refs[0] is None:
        streams = [refs]  # one stream (an empty one for an empty corpus)
    else:
        streams = [list(s) for s in refs]
    for i, stream in enumerate(streams):
        if len(stream) != len(hyps):
            raise ValueError(f"hypothesis and reference streams have different lengths "
                             f"({len(hyps)} hypotheses, {len(stream)} references in stream {i + 1})")
    for h in hyps:
        if not isinstance(h, str):
            raise TypeError("each hypothesis must be a string")
    return hyps, streams


def _segment_refs(streams, i):
    """The defined references of segment i (None = missing, as in sacreBLEU)."""
    lines = [s[i] for s in streams if s[i] is not None]
    if not lines:
        raise ValueError(f"segment {i + 1} has no defined reference")
    return lines


def _nrefs(streams, n):
    counts = {len(_segment_refs(streams, i)) for i in range(n)} or {len(streams)}
    return counts.pop() if len(counts) == 1 else 'var'


# --------------------------------------------------------------------------- BLEU

def _word_ngrams(line, max_order):
    """All n-grams 1..max_order of a tokenized line, and its length in tokens."""
    tokens = line.split()
    grams = []
    for n in range(1, max_order + 1):
        for i in range(0, len(tokens) - n + 1):
            grams.append(tuple(tokens[i:i + n]))
    return Counter(grams), len(tokens)


def _closest_ref_len(hyp_len, ref_lens):
    """The reference length closest to the hypothesis; ties go to the shorter one."""
    closest_diff, closest_len = -1, -1
    for ref_len in ref_lens:
        diff = abs(hyp_len - ref_len)
        if closest_diff == -1 or diff < closest_diff:
            closest_diff, closest_len = diff, ref_len
        elif diff == closest_diff and ref_len < closest_len:
            closest_len = ref_len
    return closest_len


def _my_log(x):
    return -9999999999 if x == 0.0 else math.log(x)


def compute_bleu(correct, total, sys_len, ref_len, max_order=MAX_NGRAM_ORDER):
    """BLEU from sufficient statistics with 'exp' smoothing, effective order off
    (sacreBLEU's BLEU.compute_bleu with its default arguments)."""
    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    else:
        bp = 1.0
    precisions = [0.0] * max_order
    # early stop if there are no matches at all (sacreBLEU #141)
    if not any(correct):
        return 0.0, precisions, bp
    smooth_mteval = 1.0
    for n in range(1, max_order + 1):
        if total[n - 1] == 0:
            break  # leaves the remaining precisions at 0 (log floored below)
        if correct[n - 1] == 0:
            smooth_mteval *= 2
            precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1])
        else:
            precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1]
    score = bp * math.exp(sum(_my_log(p) for p in precisions) / max_order)
    return score, precisions, bp


def bleu_signature(nrefs=1):
    return f"nrefs:{nrefs}|case:mixed|eff:no|tok:13a|smooth:exp|version:{VERSION}"


def _segment_stats(hyp, seg_refs, order=MAX_NGRAM_ORDER):
    """(correct n-grams per order, total n-grams per order, hyp length, closest
    reference length) of one segment against its defined references (every one,
    preprocessed like the hypothesis)."""
    ref_ngrams = None
    ref_lens = []
    for ref in seg_refs:
        grams, length = _word_ngrams(tokenize_13a(ref.rstrip()), order)
        ref_lens.append(length)
        if ref_ngrams is None:
            ref_ngrams = grams
        else:
            for gram, count in grams.items():
                ref_ngrams[gram] = max(ref_ngrams[gram], count)
    hyp_ngrams, hyp_len = _word_ngrams(tokenize_13a(hyp.rstrip()), order)
    correct = [0] * order
    total = [0] * order
    for gram, count in hyp_ngrams.items():
        n = len(gram) - 1
        total[n] += count
        if gram in ref_ngrams:
            correct[n] += min(count, ref_ngrams[gram])
    return correct, total, hyp_len, _closest_ref_len(hyp_len, ref_lens)


def segment_stats(hyps, refs):
    """BLEU's sufficient statistics of every segment, as rows of 2 * 4 + 2 integers
    (correct 1-4, total 1-4, hyp length, reference length): their column sums give
    the corpus score (bleu_from_stats), which is what resampling tests need."""
    hyps, streams = _ref_streams(hyps, refs)
    rows = []
    for i, hyp in enumerate(hyps):
        correct, total, hyp_len, ref_len = _segment_stats(hyp, _segment_refs(streams, i))
        rows.append(correct + total + [hyp_len, ref_len])
    return rows


def bleu_from_stats(sums, order=MAX_NGRAM_ORDER):
    """Corpus BLEU from summed segment_stats rows."""
    return compute_bleu(list(sums[:order]), list(sums[order:2 * order]), sums[2 * order], sums[2 * order + 1],
                        order)[0]


def corpus_bleu(hyps, refs):
    """Corpus BLEU of hypotheses against one reference stream or a list of streams."""
    hyps, streams = _ref_streams(hyps, refs)
    order = MAX_NGRAM_ORDER
    correct = [0] * order
    total = [0] * order
    sys_len = ref_len = 0
    for i, hyp in enumerate(hyps):
        seg_correct, seg_total, hyp_len, seg_ref_len = _segment_stats(hyp, _segment_refs(streams, i), order)
        sys_len += hyp_len
        ref_len += seg_ref_len
        for n in range(order):
            correct[n] += seg_correct[n]
            total[n] += seg_total[n]
    score, precisions, bp = compute_bleu(correct, total, sys_len, ref_len, order)
    nrefs = _nrefs(streams, len(hyps))
    return {
        "name": "BLEU",
        "score": score,
        "counts": correct,
        "totals": total,
        "precisions": precisions,
        "bp": bp,
        "sys_len": sys_len,
        "ref_len": ref_len,
        "ratio": sys_len / ref_len if ref_len else 0,
        "signature": bleu_signature(nrefs),
    }


def format_bleu(res, width=2):
    """sacreBLEU's verbose one-line form: BLEU = 75.19 89.2/.../... (BP = ...)."""
    prec = "/".join(f"{p:.1f}" for p in res["precisions"])
    return (f"BLEU = {res['score']:.{width}f} {prec} (BP = {res['bp']:.3f} "
            f"ratio = {res['ratio']:.3f} hyp_len = {res['sys_len']:d} "
            f"ref_len = {res['ref_len']:d})")


# --------------------------------------------------------------------------- chrF

def _char_ngrams(line, max_order):
    """Character n-gram counters 1..max_order with all whitespace removed."""
    line = ''.join(line.split())
    return [Counter(line[i:i + n] for i in range(len(line) - n + 1))
            for n in range(1, max_order + 1)]


def _match_stats(hyp_ngrams, ref_ngrams):
    """[hyp count, ref count, matches] for one order, as sacreBLEU counts them:
    hypothesis n-grams are not counted when the reference has none of that order."""
    match = hyp_count = 0
    for gram, count in hyp_ngrams.items():
        hyp_count += count
        if gram in ref_ngrams:
            match += min(count, ref_ngrams[gram])
    return [hyp_count if ref_ngrams else 0, sum(ref_ngrams.values()), match]


def chrf_f_score(stats, order=CHAR_ORDER + WORD_ORDER, beta=BETA):
    """chrF in [0, 100] from flattened [hyp, ref, match] triplets, with sacreBLEU's
    default effective-order averaging (eps_smoothing=False)."""
    factor = beta ** 2
    avg_prec = avg_rec = 0.0
    effective_order = 0
    for i in range(order):
        n_hyp, n_ref, n_match = stats[3 * i:3 * i + 3]
        if n_hyp > 0 and n_ref > 0:
            avg_prec += n_match / n_hyp
            avg_rec += n_match / n_ref
            effective_order += 1
    if effective_order == 0:
        return 0.0
    avg_prec /= effective_order
    avg_rec /= effective_order
    if avg_prec + avg_rec:
        return 100 * (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec)
    return 0.0


def chrf_signature(nrefs=1):
    return (f"nrefs:{nrefs}|case:mixed|eff:yes|nc:{CHAR_ORDER}|nw:{WORD_ORDER}"
            f"|space:no|version:{VERSION}")


def corpus_chrf(hyps, refs):
    """Corpus chrF2 of hypotheses against one reference stream or a list of streams."""
    hyps, streams = _ref_streams(hyps, refs)
    order = CHAR_ORDER
    corpus = [0] * (3 * order)
    for i, hyp in enumerate(hyps):
        hyp_ngrams = _char_ngrams(hyp, order)
        # several references: keep the statistics of the best-scoring one
        best, best_f = [], -1.0
        for ref in _segment_refs(streams, i):
            stats = []
            for h, r in zip(hyp_ngrams, _char_ngrams(ref, order)):
                stats.extend(_match_stats(h, r))
            f = chrf_f_score(stats, order)
            if f > best_f:
                best, best_f = stats, f
        for j, v in enumerate(best):
            corpus[j] += v
    return {
        "name": f"chrF{BETA}",
        "score": chrf_f_score(corpus, order),
        "stats": corpus,
        "char_order": CHAR_ORDER,
        "word_order": WORD_ORDER,
        "beta": BETA,
        "signature": chrf_signature(_nrefs(streams, len(hyps))),
    }


# --------------------------------------------------------------------------- files / CLI

def read_lines(path):
    """Segments of a text file (.gz too): split on "\\n" only, right-stripped."""
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt', encoding='utf-8', newline='\n') as f:
        return [line.rstrip() for line in f]


def score_files(hyp_path, ref_paths):
    hyps = read_lines(hyp_path)
    streams = [read_lines(p) for p in ref_paths]
    return corpus_bleu(hyps, streams), corpus_chrf(hyps, streams)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Corpus BLEU (13a, exp smoothing) and chrF2, identical to sacreBLEU 2.6 defaults.")
    ap.add_argument("hyp", help="hypothesis file, one segment a line")
    ap.add_argument("refs", nargs="+", metavar="REF", help="reference file(s), line-aligned")
    ap.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    args = ap.parse_args(argv)
    try:
        bleu, chrf = score_files(args.hyp, args.refs)
    except OSError as e:
        print(f"bleu.py: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as e:
        print(f"bleu.py: error: input is not valid UTF-8: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"bleu.py: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"bleu": bleu, "chrf": chrf}, indent=1))
    else:
        print(f"{format_bleu(bleu)}")
        print(f"chrF{BETA} = {chrf['score']:.2f}")
        print(f"BLEU|{bleu['signature']}")
        print(f"chrF{BETA}|{chrf['signature']}")
    return 0


if __name__ == "__main__":
    # `bleu.py HYP REF | head -1`: end quietly when the reader goes, as other filters do
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
