#!/usr/bin/python3
"""The inline-markup test set: Multi30k test sentences with a tag around one word
whose translation is known, for judging where a translator puts the tag back.

    tools/make_markup_fixture.py --data ../shared/data/multi30k --out tests/fixtures/markup

1. A bilingual lexicon from the training data (Multi30k train, 29,000 line-aligned
   pairs a direction): for each source word and target word, the Dice coefficient
   of the lines they occur in, 2 c(s,t) / (c(s) + c(t)), lowercased, punctuation
   stripped. A pair is kept when Dice >= 0.5, they co-occur in >= 20 lines and the
   target word is in under 10% of the lines (no function words): high precision
   ("dog" -> "hund"), little recall, which is what a judge needs.
2. For each test_2016_flickr line (in file order), the first word of at least 3
   letters with a lexicon entry whose translation occurs in the reference
   translation; the word is wrapped in one of b, i, em, strong, a, span, code (in
   turn), and, every third sentence, the two words before it too (a phrase).
Writes SRC-TGT.jsonl: {"line", "source", "tagged", "tag", "word", "lexicon": [target
words], "reference"}. A tag "lands right" when the words inside it in the output
include one of "lexicon" (lowercased): the judge tests/py/ (markup) applies.
"""
import argparse
import collections
import gzip
import json
import os
import re
import sys

TAGS = ["b", "i", "em", "strong", "a", "span", "code"]
WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*", re.UNICODE)


def words(line):
    return [w.lower() for w in WORD.findall(line)]


def read(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f]


def lexicon(src_lines, tgt_lines, min_dice=0.5, min_count=20):
    cs, ct, cst = collections.Counter(), collections.Counter(), collections.Counter()
    for s, t in zip(src_lines, tgt_lines):
        sw, tw = set(words(s)), set(words(t))
        cs.update(sw)
        ct.update(tw)
        for a in sw:
            if cs[a] < 3:  # pairs are counted for words seen in a few lines already: bounds the table
                continue
            for b in tw:
                cst[(a, b)] += 1
    lex = collections.defaultdict(list)
    n = len(src_lines)
    for (a, b), c in cst.items():
        if c >= min_count and ct[b] < 0.1 * n:  # not a function word ("ein" is in most lines)
            dice = 2 * c / (cs[a] + ct[b])
            if dice >= min_dice:
                lex[a].append((dice, b))
    return {a: [b for _, b in sorted(v, reverse=True)] for a, v in lex.items()}


def tag_sentence(src, word_span, tag, phrase_start=None):
    a, b = word_span
    if phrase_start is not None:
        a = phrase_start
    attrs = ' href="https://example.org/x"' if tag == "a" else ' class="hl"' if tag == "span" else ""
    return f"{src[:a]}<{tag}{attrs}>{src[a:b]}</{tag}>{src[b:]}"


def build(data, src, tgt, limit):
    lex = lexicon(read(os.path.join(data, f"train.{src}.gz")), read(os.path.join(data, f"train.{tgt}.gz")))
    test_s = read(os.path.join(data, f"test_2016_flickr.{src}.gz"))
    test_t = read(os.path.join(data, f"test_2016_flickr.{tgt}.gz"))
    out = []
    for i, (s, t) in enumerate(zip(test_s, test_t)):
        ref = set(words(t))
        spans = list(WORD.finditer(s))
        for k, m in enumerate(spans):
            w = m.group(0).lower()
            cands = [x for x in lex.get(w, []) if x in ref]
            if len(w) < 3 or not cands:
                continue
            tag = TAGS[len(out) % len(TAGS)]
            phrase = spans[k - 2].start() if len(out) % 3 == 2 and k >= 2 else None
            out.append({"line": i + 1, "source": s, "tagged": tag_sentence(s, m.span(), tag, phrase), "tag": tag,
                        "word": m.group(0), "lexicon": lex[w][:5], "reference": t})
            break
        if len(out) >= limit:
            break
    return out, len(lex)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "multi30k"))
    ap.add_argument("--out", default="tests/fixtures/markup")
    ap.add_argument("--pairs", default="en-de,en-fr", help="directions to build")
    ap.add_argument("--limit", type=int, default=250, help="sentences a direction")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for pair in a.pairs.split(","):
        src, tgt = pair.split("-")
        rows, n_lex = build(a.data, src, tgt, a.limit)
        path = os.path.join(a.out, f"{pair}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(f"{path}: {len(rows)} tagged sentences (lexicon: {n_lex} source words)", file=sys.stderr)


if __name__ == "__main__":
    main()
