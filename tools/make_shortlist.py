#!/usr/bin/python3
"""Build a model's lexical shortlist (MODEL/shortlist.bin), and measure what it costs.

    tools/make_shortlist.py build models/captions --data ../shared/data/multi30k
    tools/make_shortlist.py build models/default --data ../shared/data/multi30k \\
        --general ../shared/data/general --pivot 50 --frequent 1500 --target-frequent en=3000
    tools/make_shortlist.py check models/default --sets multi30k/test_2016_flickr

A decoder step scores every piece of the vocabulary although a sentence's translation
draws on few of them. The shortlist lists, for each target language and each source
piece s, the target pieces t that co-occur with s most in the model's training pairs,
ranked by p(t | s) = pairs holding s and t / pairs holding s (pairs seen fewer than
--min-count times are left out); the --frequent most frequent target pieces are
allowed for every sentence and are not listed again; --target-frequent adds each target
language's own most frequent pieces beyond those, listed under </s> (which ends every
source, so every sentence into that language may use them). deepmt (model/shortlist.h) then
scores, for each sentence, those pieces of its own source pieces, the frequent ones,
its source pieces themselves (names and numbers are copied) and </s>.

Directions without general-domain pairs of their own (de-fr, cs-de, ...) would list
only what captions taught; --pivot N adds, for every target language but the pivot
(--pivot-language, en), each source piece's N target pieces of highest p(t | s)
composed through the pivot, sum over e of p(e | s) p(t | e), over its --pivot-via
pivot pieces of highest p(e | s) (frequent pivot pieces such as "the" left out: they
say little about s).

`build` tokenizes the pairs with MODEL/sentencepiece.model (Multi30k's four line-
aligned languages, all 12 directions; --general adds DIR/train/en-XX.{en,XX}.gz in
both directions) and writes the file atomically. It prints, per target language,
how many pieces a source piece lists and the pairs it counted.

`check` translates the test sets' directions with and without the shortlist
(`deepmt translate --no-shortlist`), at the precision the model runs by default, and
prints the BLEU change per direction, its mean and worst, the share of identical
translations and the time each took (--directions picks some; one run each: a hint,
not a benchmark; `make bench` measures speed).

Exit status: 0 done, 1 a translation failed, 2 bad usage or missing data.
"""
import argparse
import gzip
import itertools
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import bleu  # noqa: E402
import evaluate  # noqa: E402

MAGIC = b"DMTSL01\n"
M30K_LANGS = ("en", "de", "fr", "cs")


def read_gz(path, limit=None):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in itertools.islice(f, limit)]


def training_pairs(args, served):
    """{target code: [(source lines, target lines, name)]} for the model's languages."""
    by_target = {}
    m30k = {}
    for lang in M30K_LANGS:
        p = os.path.join(args.data, f"train.{lang}.gz")
        if lang in served and os.path.isfile(p):
            m30k[lang] = read_gz(p, args.max_pairs)
    for s, t in itertools.permutations(m30k, 2):
        if len(m30k[s]) == len(m30k[t]):
            by_target.setdefault(t, []).append((m30k[s], m30k[t], f"multi30k {s}-{t}"))
    if args.general:
        for other in ("de", "fr", "cs"):
            pe = os.path.join(args.general, "train", f"en-{other}.en.gz")
            po = os.path.join(args.general, "train", f"en-{other}.{other}.gz")
            if other not in served or "en" not in served or not (os.path.isfile(pe) and os.path.isfile(po)):
                continue
            en, xx = read_gz(pe, args.max_pairs), read_gz(po, args.max_pairs)
            n = min(len(en), len(xx))
            by_target.setdefault(other, []).append((en[:n], xx[:n], f"general en-{other}"))
            by_target.setdefault("en", []).append((xx[:n], en[:n], f"general {other}-en"))
    return by_target


def count_pairs(sp, pairs, V, min_count):
    """Co-occurrence over sentence pairs: C [V, V] (pairs holding s and t), the pairs
    holding each source piece, and target piece frequencies (tokens)."""
    C = np.zeros(V * V, dtype=np.int32)
    n_src = np.zeros(V, dtype=np.int64)
    freq = np.zeros(V, dtype=np.int64)
    n_pairs = 0
    for src_lines, tgt_lines, _ in pairs:
        for lo in range(0, len(src_lines), 20000):
            src_ids = sp.encode(src_lines[lo:lo + 20000])
            tgt_ids = sp.encode(tgt_lines[lo:lo + 20000])
            keys = []
            for s_ids, t_ids in zip(src_ids, tgt_ids):
                if not s_ids or not t_ids:
                    continue
                s = np.unique(np.asarray(s_ids, dtype=np.int64))
                t = np.asarray(t_ids, dtype=np.int64)
                np.add.at(freq, t, 1)
                t = np.unique(t)
                n_src[s] += 1
                keys.append((s[:, None] * V + t[None, :]).ravel())
                n_pairs += 1
            if keys:
                u, c = np.unique(np.concatenate(keys), return_counts=True)
                C[u] += c.astype(np.int32)
    C = C.reshape(V, V)
    C[C < min_count] = 0
    return C, n_src, freq, n_pairs


def frequent_mask(V, frequent):
    """[V] bool: the pieces allowed for every sentence, which no list repeats."""
    skip = np.zeros(V, dtype=bool)
    skip[list(frequent)] = True
    return skip


def rank_table(C, n_src, frequent, top, reverse, extra=None):
    """For each source piece s, its `top` target pieces by p(t | s), and each target
    piece t for the `reverse` source pieces s with the highest p(t | s) among all that
    co-occur with t (so that a rare target piece is listed under the source pieces
    that predict it best); frequent pieces left out: (start [V + 1], entries)."""
    V = C.shape[0]
    skip = frequent_mask(V, frequent)
    lists = [set() for _ in range(V)]
    for s in range(V):
        row = C[s]
        if n_src[s] == 0 or not row.any():
            continue
        cand = np.nonzero((row > 0) & ~skip)[0]
        if len(cand) > top:
            # ties broken by the lower piece id: deterministic files
            cand = cand[np.lexsort((cand, -row[cand]))[:top]]
        lists[s].update(int(t) for t in cand)
    if reverse > 0:
        p = C / np.maximum(n_src, 1)[:, None].astype(np.float32)
        best = np.argsort(-p, axis=0, kind="stable")[:reverse]  # [reverse, V]: per target, best sources
        for r in range(best.shape[0]):
            for t in np.nonzero(~skip & (C[best[r], np.arange(V)] > 0))[0]:
                lists[int(best[r, t])].add(int(t))
        del p
    for src, targets in (extra or {}).items():
        lists[src].update(targets)
    start, entries = [0], []
    for s in range(V):
        entries.extend(sorted(lists[s]))
        start.append(len(entries))
    return start, entries


def pivot_table(C_pivot, n_src_pivot, C_target, n_src_target, frequent, top, via):
    """Entries for directions that have no training pairs of their own, composed through
    the pivot language: for each source piece s, its `top` target pieces by
    p(t | s) ~ sum over pivot pieces e of p(e | s) p(t | e), over the `via` pivot pieces
    of highest p(e | s). C_pivot counts the pairs into the pivot language, C_target
    those into the target (both [V, V], as count_pairs returns). Frequent pieces are
    left out, as in rank_table: {source piece: set of target pieces}."""
    V = C_target.shape[0]
    skip = frequent_mask(V, frequent)
    k = min(via, V - 1)
    p_target = C_target.astype(np.float32) / np.maximum(n_src_target, 1)[:, None].astype(np.float32)
    lists = {}
    chunk = 64  # p_target gathered for 64 source pieces x `via` pivots at once: 80 MB
    for lo in range(0, V, chunk):
        hi = min(V, lo + chunk)
        p_pivot = C_pivot[lo:hi].astype(np.float32) / np.maximum(n_src_pivot[lo:hi], 1)[:, None].astype(np.float32)
        p_pivot[:, skip] = 0  # a frequent pivot piece ("the", ".") says little about s
        idx = np.argpartition(-p_pivot, k, axis=1)[:, :k]
        w = np.take_along_axis(p_pivot, idx, axis=1)
        score = np.einsum("ck,ckv->cv", w, p_target[idx])
        score[:, skip] = 0
        for r in range(hi - lo):
            row = score[r]
            cand = np.nonzero(row > 0)[0]
            if len(cand) == 0:
                continue
            if len(cand) > top:
                cand = cand[np.lexsort((cand, -row[cand]))[:top]]
            lists[lo + r] = set(int(t) for t in cand)
    return lists


def write_shortlist(path, V, frequent, tables):
    """tables: [(language token id, start, entries)] -> the format of model/shortlist.h."""
    wide = V > 65536
    blob = bytearray(MAGIC)
    blob += struct.pack("<4I", V, len(frequent), len(tables), 4 if wide else 2)
    blob += np.asarray(frequent, dtype="<u4").tobytes()
    for token, start, entries in tables:
        blob += struct.pack("<iI", token, len(entries))
        blob += np.asarray(start, dtype="<u4").tobytes()
        blob += np.asarray(entries, dtype="<u4" if wide else "<u2").tobytes()
        blob += bytes(-len(blob) % 4)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".shortlist.")
    with os.fdopen(fd, "wb") as f:
        f.write(blob)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return len(blob)


def parse_target_frequent(text):
    """'3000' (every target language) or 'en=3000,cs=1000' -> {language or '*': N}."""
    out = {}
    for item in filter(None, (text or "").split(",")):
        lang, _, n = item.rpartition("=")
        if not n.isdigit():
            raise ValueError(f"expected N or LANG=N[,LANG=N...], got {text!r}")
        out[lang or "*"] = int(n)
    return out


def cmd_build(args):
    import sentencepiece as spm
    with open(os.path.join(args.model, "config.json")) as f:
        cfg = json.load(f)
    V = cfg["vocab_size"]
    langs = {lang["code"]: lang["id"] for lang in cfg.get("languages", [])}
    if not langs:
        print("make_shortlist: config.json lists no languages", file=sys.stderr)
        return 2
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.model, "sentencepiece.model"))
    try:
        target_frequent = parse_target_frequent(args.target_frequent)
    except ValueError as e:
        print(f"make_shortlist: --target-frequent: {e}", file=sys.stderr)
        return 2
    by_target = training_pairs(args, set(langs))
    if not by_target:
        print(f"make_shortlist: no training pairs for the model's languages under {args.data}", file=sys.stderr)
        return 2
    t0 = time.time()
    counted, total_freq = {}, np.zeros(V, dtype=np.int64)
    for target in sorted(by_target):
        C, n_src, freq, n_pairs = count_pairs(sp, by_target[target], V, args.min_count)
        counted[target] = (C, n_src, n_pairs, freq)
        total_freq += freq
        print(f"make_shortlist: {target}: {n_pairs} pairs ({', '.join(p[2] for p in by_target[target])}), "
              f"{time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    frequent = sorted(int(t) for t in np.argsort(-total_freq, kind="stable")[:args.frequent] if total_freq[t] > 0)
    tables = []
    for target in sorted(counted):
        C, n_src, n_pairs, freq = counted[target]
        extra = {}
        if args.pivot > 0 and target != args.pivot_language and args.pivot_language in counted:
            # pairs into `target` from a language other than the pivot are captions only
            # (Multi30k): a news sentence's pieces would list too little; compose them.
            C_p, n_src_p, _, _ = counted[args.pivot_language]
            extra = pivot_table(C_p, n_src_p, C, n_src, frequent, args.pivot, args.pivot_via)
        n_own = target_frequent.get(target, target_frequent.get("*", 0))
        if n_own > 0:
            # the language's own most frequent pieces beyond the shared ones, under </s>,
            # which ends every source: every sentence into `target` may use them
            skip = frequent_mask(V, frequent)
            ranked = [int(t) for t in np.argsort(-freq, kind="stable") if freq[t] > 0 and not skip[t]][:n_own]
            extra.setdefault(cfg["eos_id"], set()).update(ranked)
        start, entries = rank_table(C, n_src, frequent, args.top, args.reverse, extra)
        listed = sum(1 for s in range(V) if start[s + 1] > start[s])
        print(f"make_shortlist: {target}: {listed} source pieces listed, {len(entries) / max(listed, 1):.1f} "
              f"target pieces each", file=sys.stderr)
        tables.append((langs[target], start, entries))
        del C
    out = args.out or os.path.join(args.model, "shortlist.bin")
    size = write_shortlist(out, V, frequent, tables)
    pivot = f", pivot {args.pivot} through {args.pivot_language}" if args.pivot > 0 else ""
    own = f", the target's own frequent {args.target_frequent}" if target_frequent else ""
    print(f"make_shortlist: wrote {out} ({size / 1e6:.1f} MB: {len(tables)} target languages, top {args.top}, "
          f"{len(frequent)} frequent{own}, reverse {args.reverse}{pivot}, min count {args.min_count}) "
          f"in {time.time() - t0:.0f} s", file=sys.stderr)
    return 0


def translate(binary, model, target, lines, extra):
    cmd = [binary, "translate", "-m", model, "-t", target, "--no-split", "-q"] + extra
    t0 = time.time()
    r = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True)
    dt = time.time() - t0
    if r.returncode != 0:
        return None, dt, r.stderr.strip()
    out = r.stdout.split("\n")[:-1] if r.stdout.endswith("\n") else r.stdout.split("\n")
    if len(out) != len(lines):
        return None, dt, f"{len(out)} lines out for {len(lines)} in"
    return out, dt, ""


def cmd_check(args):
    if not os.path.isfile(os.path.join(args.model, "shortlist.bin")):
        print(f"make_shortlist: {args.model} has no shortlist.bin (build one first)", file=sys.stderr)
        return 2
    with open(os.path.join(args.model, "config.json")) as f:
        served = {lang["code"] for lang in json.load(f).get("languages", [])}
    sets = evaluate.suite_sets(os.path.join(args.shared, "data"))
    only = {d.strip() for d in (args.directions or "").split(",") if d.strip()}
    jobs = []
    for name in [n.strip() for n in args.sets.split(",") if n.strip()]:
        if name not in sets:
            print(f"make_shortlist: unknown test set {name} (known: {', '.join(sets)})", file=sys.stderr)
            return 2
        for direction, sp_, rp in sets[name]:
            s, t = direction.split("-")
            if only and direction not in only:
                continue
            if s in served and t in served and os.path.isfile(sp_) and os.path.isfile(rp):
                jobs.append((name, direction, evaluate.read_lines(sp_)[:args.limit],
                             evaluate.read_lines(rp)[:args.limit]))
    if not jobs:
        among = f" among {args.directions}" if only else ""
        print(f"make_shortlist: no direction of {args.sets}{among} with its files under {args.shared}/data",
              file=sys.stderr)
        return 2
    extra = ["--threads", str(args.threads)] if args.threads else []
    if args.precision:
        extra += ["--precision", args.precision]
    print("| test set | direction | BLEU whole vocabulary | shortlist | change | identical | time whole / shortlist |")
    print("|---|---|---|---|---|---|---|")
    changes, same, lines, t_full, t_short = [], 0, 0, 0.0, 0.0
    for name, direction, src, ref in jobs:
        target = direction.split("-")[1]
        full, dt_full, why = translate(args.binary, args.model, target, src, extra + ["--no-shortlist"])
        short, dt_short, why2 = translate(args.binary, args.model, target, src, extra)
        if full is None or short is None:
            print(f"make_shortlist: {name} {direction}: {why or why2}", file=sys.stderr)
            return 1
        b_full, b_short = bleu.corpus_bleu(full, [ref])["score"], bleu.corpus_bleu(short, [ref])["score"]
        n_same = sum(a == b for a, b in zip(full, short))
        changes.append(b_short - b_full)
        same, lines, t_full, t_short = same + n_same, lines + len(src), t_full + dt_full, t_short + dt_short
        print(f"| {name} | {direction} | {b_full:.2f} | {b_short:.2f} | {b_short - b_full:+.2f} | "
              f"{n_same}/{len(src)} | {dt_full:.1f} s / {dt_short:.1f} s |", flush=True)
    print(f"shortlist: BLEU {sum(changes) / len(changes):+.3f} on average, {min(changes):+.2f} at worst over "
          f"{len(changes)} directions; {same}/{lines} translations identical; time {t_full:.1f} s -> "
          f"{t_short:.1f} s ({t_full / max(t_short, 1e-9):.2f}x, one run each)")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write MODEL/shortlist.bin from training pairs")
    b.add_argument("model")
    b.add_argument("--data", required=True, help="Multi30k folder (train.{en,de,fr,cs}.gz)")
    b.add_argument("--general", help="general-domain folder (train/en-XX.{en,XX}.gz), optional")
    b.add_argument("--top", type=int, default=100, help="target pieces listed a source piece [100]")
    b.add_argument("--frequent", type=int, default=500, help="target pieces allowed for every sentence [500]")
    b.add_argument("--reverse", type=int, default=0,
                   help="each target piece also under the N source pieces that predict it best [0]")
    b.add_argument("--pivot", type=int, default=0,
                   help="each source piece also lists its N target pieces of highest p(t | s) composed "
                        "through --pivot-language, for directions trained without pairs of their own [0]")
    b.add_argument("--pivot-language", default="en", help="the language pairs are composed through [en]")
    b.add_argument("--pivot-via", type=int, default=20,
                   help="pivot pieces a source piece is composed through, those of highest p(e | s) [20]")
    b.add_argument("--target-frequent", default="",
                   help="N or LANG=N,...: each target language's own N most frequent pieces beyond "
                        "--frequent, allowed for every sentence into it (listed under </s>) [none]")
    b.add_argument("--min-count", type=int, default=2, help="pairs a (source, target) piece pair needs [2]")
    b.add_argument("--max-pairs", type=int, default=None, help="at most N lines of each training file")
    b.add_argument("--out", help="output file [MODEL/shortlist.bin]")
    c = sub.add_parser("check", help="BLEU and time with and without the shortlist")
    c.add_argument("model")
    c.add_argument("--sets", default="multi30k/test_2016_flickr", help="scripts/evaluate.py's test sets")
    c.add_argument("--shared", default=os.environ.get("DEEPMT_SHARED", os.path.join(REPO, "..", "shared")))
    c.add_argument("--directions", help="only these directions, comma-separated (de-fr,fr-de) [all the sets have]")
    c.add_argument("--limit", type=int, default=None, help="the first N lines of each direction")
    c.add_argument("--threads", type=int, default=0)
    c.add_argument("--precision", help="deepmt translate --precision [the model's default]")
    c.add_argument("--binary", default=os.environ.get("DEEPMT_BIN", os.path.join(REPO, "build", "deepmt")))
    args = p.parse_args(argv)
    if args.cmd == "build":
        for d in [args.model, args.data] + ([args.general] if args.general else []):
            if not os.path.isdir(d):
                print(f"make_shortlist: {d}: no such folder", file=sys.stderr)
                return 2
        return cmd_build(args)
    return cmd_check(args)


if __name__ == "__main__":
    sys.exit(main())
