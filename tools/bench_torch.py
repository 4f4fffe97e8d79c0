#!/usr/bin/python3
"""PyTorch baseline for `make bench`: batched beam search, as a user would run it.

The same model directory, the same search rules as model/beam.c (docs/decoding.md;
tools/dmt/beam.py is the plain one-sentence reference), written the way fairseq and
Hugging Face `generate` run it: the B x k live hypotheses of a batch go through one
incremental decoder call per step with a self-attention KV cache (reordered with
index_select), cross-attention K/V computed once per sentence, finished sentences
leave the batch, torch.inference_mode(), torch.set_num_threads(--threads) (and
OMP/OPENBLAS/MKL_NUM_THREADS; OMP_WAIT_POLICY=PASSIVE unless set).

    tools/bench_torch.py -m models/default --target de -i test.en -o out.de --threads 1
    tools/bench_torch.py -m /tmp/deep --ids --forced 5 -i src.ids --out-ids hyp.ids

Input: one sentence a line (text, tokenized like `deepmt translate`), or with --ids
one line of space-separated source ids (without </s>). Lines are sorted longest
first and cut into --batch-size batches, as `deepmt translate` does. Prints a JSON
summary (sentences, target tokens, seconds) on stdout.
"""
import argparse
import json
import math
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
NEG_INF = float("-inf")
LANG_PIECE = re.compile(r"^__[0-9A-Za-z](?:[0-9A-Za-z_-]*[0-9A-Za-z])?__$")


def f32(x):
    return float(np.float32(x))


def max_length(opt, src_len, prefix_len, max_positions):
    """floor(a * src_len + b) capped by the positions left, >= 1 (as model/beam.c)."""
    n = math.floor(f32(opt.max_len_a) * src_len + opt.max_len_b)
    return max(min(n, max_positions - prefix_len + 1), 1)


def normalise(total, length, lp):
    return f32(total / (length ** f32(lp)))


def search_batch(torch, model, srcs, forced, opt):
    """Beam search over a batch. srcs: id lists ending in </s>. -> [(tokens, score)] per sentence."""
    cfg, k = model.cfg, opt.beam_size
    eos, pad, V = cfg["eos_id"], cfg["pad_id"], cfg["vocab_size"]
    n = len(srcs)
    src = torch.full((n, max(map(len, srcs))), pad, dtype=torch.long)
    for i, s in enumerate(srcs):
        src[i, :len(s)] = torch.tensor(s)
    enc, pad_mask_sent = model.encode(src)
    kv_sent = model.cross_kv(enc)                       # per layer (k, v) [n, H, S, hd]
    prefix = [cfg["decoder_start_id"]] + ([forced] if forced >= 0 else [])
    max_len = [max_length(opt, len(s), len(prefix), cfg["max_positions"]) for s in srcs]
    caches = [{} for _ in model.decoder.layers]
    for pos, tok in enumerate(prefix):                  # the prefix: one row per sentence
        lp = model.decode(torch.full((n, 1), tok), None, pad_mask_sent, kv_sent, caches, start=pos)[:, -1]

    alive = list(range(n))                              # sentences still running, row order
    beams = [[[]] for _ in range(n)]                    # generated tokens per live beam
    cum = torch.zeros(n)                                # float32 beam sums, one per row
    pool = [[] for _ in range(n)]                       # (tokens, score) in the order found
    rows_per = 1                                        # rows per sentence: 1 at t = 1, then k
    banned = [pad, cfg["bos_id"]]
    banned = [b for b in banned if b != eos]
    for t in range(1, max(max_len) + 1):
        lp[:, banned] = NEG_INF
        if t <= opt.min_len:
            lp[:, eos] = NEG_INF
        sums = (cum[:, None] + lp).view(len(alive), rows_per * V)    # float32 adds, as in C
        vals, idx = sums.topk(min(2 * k, rows_per * V), dim=1)
        vals, idx = vals.numpy(), idx.numpy()
        keep, parents, tokens, new_cum = [], [], [], []
        for a, i in enumerate(alive):
            cands = sorted((-float(v), int(j % V), int(j // V)) for v, j in zip(vals[a], idx[a]) if v > NEG_INF)
            new = []                                    # (tokens, sum, parent row)
            for r, (neg, tok, b) in enumerate(cands):
                if tok == eos:
                    if r < k and len(pool[i]) < k:
                        pool[i].append((beams[i][b], normalise(-neg, t, opt.length_penalty)))
                elif len(new) < k:
                    new.append((beams[i][b] + [tok], -neg, a * rows_per + b))
            if len(pool[i]) >= k or not new:
                continue                                # sentence done
            if t == max_len[i]:                         # cut off: live beams as they are
                pool[i] += [(toks, normalise(s, t, opt.length_penalty)) for toks, s, _ in new]
                continue
            keep.append(i)
            beams[i] = [toks for toks, _, _ in new]
            while len(new) < k:                         # dead slots (tiny vocabularies): -inf sums
                new.append((new[0][0], NEG_INF, new[0][2]))
            for toks, s, p in new:
                parents.append(p)
                tokens.append(toks[-1])
                new_cum.append(s)
        if not keep:
            break
        index = torch.tensor(parents)
        for c in caches:
            c["k"], c["v"] = c["k"].index_select(0, index), c["v"].index_select(0, index)
        if keep != alive or rows_per == 1:              # cross K/V rows follow the sentences
            sent_rows = torch.tensor(keep).repeat_interleave(k)
            kv = [(a.index_select(0, sent_rows), b.index_select(0, sent_rows)) for a, b in kv_sent]
            pad_mask = pad_mask_sent.index_select(0, sent_rows)
        alive, rows_per = keep, k
        cum = torch.tensor(new_cum, dtype=torch.float32)
        lp = model.decode(torch.tensor(tokens)[:, None], None, pad_mask, kv, caches,
                          start=len(prefix) + t - 1)[:, -1]
    return [sorted(p, key=lambda h: -h[1])[0] if p else ([], NEG_INF) for p in pool]


class Tokenizer:
    """SentencePiece as `deepmt translate` uses it: language pieces in the source become
    unk, control and language pieces are left out of the output text."""

    def __init__(self, model_dir, cfg):
        import sentencepiece
        self.sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(model_dir, "sentencepiece.model"))
        langs = {l["id"] for l in cfg["languages"]}
        self.lang = {i for i in range(self.sp.get_piece_size())
                     if i in langs or LANG_PIECE.match(self.sp.id_to_piece(i))}
        self.skip = self.lang | {i for i in range(self.sp.get_piece_size()) if self.sp.is_control(i)}
        self.unk = cfg["unk_id"]

    def encode(self, text):
        return [self.unk if i in self.lang else i for i in self.sp.encode(text)]

    def decode(self, ids):
        return self.sp.decode([i for i in ids if i not in self.skip])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-t", "--target", help="target language code (text input)")
    ap.add_argument("--forced", type=int, help="forced first token id (--ids input; default none)")
    ap.add_argument("--ids", action="store_true", help="input lines are source ids, not text")
    ap.add_argument("-i", "--input", required=True)
    ap.add_argument("-o", "--output", help="1-best translations as text")
    ap.add_argument("--out-ids", help="1-best token ids, one line each, input order")
    ap.add_argument("--out-src-ids", help="the source ids (without </s>), one line each")
    ap.add_argument("-b", "--beam", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)                # before torch loads its BLAS
    # OpenMP threads that spin while OpenBLAS's own threads work starve each other on
    # a busy machine (6x slower at 2 threads here); passive waiting is the fair setting
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    from dmt import modeldir
    from dmt.beam import Options
    torch.set_num_threads(a.threads)

    t0 = time.perf_counter()
    model = modeldir.load(a.model)
    load_s = time.perf_counter() - t0
    cfg = model.cfg
    d = cfg.get("decoding", {})
    opt = Options(beam_size=a.beam, length_penalty=d.get("length_penalty", 1.0), max_len_a=d.get("max_len_a", 1.2),
                  max_len_b=d.get("max_len_b", 10), min_len=d.get("min_len", 1))
    with open(a.input, encoding="utf-8") as f:
        lines = f.read().splitlines()
    t1 = time.perf_counter()
    tok = None
    if a.ids:
        srcs = [[int(x) for x in l.split()] for l in lines]
        forced = a.forced if a.forced is not None else -1
    else:
        tok = Tokenizer(a.model, cfg)
        srcs = [tok.encode(l) for l in lines]
        forced = next(l["id"] for l in cfg["languages"] if l["code"] == a.target)
    if any(not s or len(s) > cfg["max_positions"] - 1 for s in srcs):
        sys.exit("bench_torch: empty or too long source lines are not supported")
    order = sorted(range(len(srcs)), key=lambda i: (-len(srcs[i]), i))
    best = [None] * len(srcs)
    with torch.inference_mode():
        for b in range(0, len(order), a.batch_size):
            chunk = order[b:b + a.batch_size]
            for i, hyp in zip(chunk, search_batch(torch, model, [srcs[i] + [cfg["eos_id"]] for i in chunk],
                                                  forced, opt)):
                best[i] = hyp
    texts = [tok.decode(h[0]) for h in best] if tok else None
    run_s = time.perf_counter() - t1
    n_tok = sum(len(h[0]) for h in best)
    if a.output and texts is not None:
        with open(a.output, "w", encoding="utf-8") as f:
            f.writelines(t.replace("\n", " ").replace("\r", " ") + "\n" for t in texts)
    if a.out_ids:
        with open(a.out_ids, "w") as f:
            f.writelines(" ".join(map(str, h[0])) + "\n" for h in best)
    if a.out_src_ids:
        with open(a.out_src_ids, "w") as f:
            f.writelines(" ".join(map(str, s)) + "\n" for s in srcs)
    print(json.dumps({"engine": "pytorch", "sentences": len(srcs), "target_tokens": n_tok, "load_s": load_s,
                      "translate_s": run_s, "sentences_per_s": len(srcs) / run_s,
                      "tokens_per_s": n_tok / run_s, "threads": a.threads, "torch": torch.__version__,
                      "omp_wait_policy": os.environ["OMP_WAIT_POLICY"]}))


if __name__ == "__main__":
    main()
