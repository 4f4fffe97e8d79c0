"""Training data for the deepmt recipe: Multi30k reading, SentencePiece, token-bucketed batches.

Multi30k is line-aligned across en, de, fr, cs, so one example is one *source*
sentence plus its translations into the other three languages: the encoder runs
once per source and its states feed the three target sentences (M2M-100 layout:
encoder `pieces </s>`, decoder input `</s> __tgt__ y`, target `__tgt__ y </s>`).
"""
import gzip
import os

import numpy as np
import torch

LANGS = ["en", "de", "fr", "cs"]
LANG_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech"}
BOS, PAD, EOS, UNK = 0, 1, 2, 3


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def read_split(data_dir, split, langs=LANGS):
    """-> {lang: [lines]}, all the same length."""
    out = {}
    for lang in langs:
        p = os.path.join(data_dir, f"{split}.{lang}.gz")
        if not os.path.exists(p):
            p = os.path.join(data_dir, f"{split}.{lang}")
        out[lang] = read_lines(p)
    n = {len(v) for v in out.values()}
    if len(n) != 1:
        raise ValueError(f"{split}: languages are not line-aligned: { {k: len(v) for k, v in out.items()} }")
    return out


def train_spm(data_dir, prefix, vocab_size=8000, langs=LANGS, threads=2):
    """Joint unigram SentencePiece over the training sides; returns the .model path."""
    import sentencepiece as spm
    os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
    text = prefix + ".train.txt"
    with open(text, "w", encoding="utf-8") as f:
        for lang in langs:
            for line in read_split(data_dir, "train", [lang])[lang]:
                f.write(line + "\n")
    spm.SentencePieceTrainer.train(
        input=text, model_prefix=prefix, vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, byte_fallback=True,
        bos_id=BOS, pad_id=PAD, eos_id=EOS, unk_id=UNK,
        user_defined_symbols=",".join(f"__{lang}__" for lang in langs),
        input_sentence_size=0, shuffle_input_sentence=False,
        num_threads=threads, minloglevel=1)
    os.remove(text)
    return prefix + ".model"


def lang_ids(sp, langs=LANGS):
    ids = {lang: sp.piece_to_id(f"__{lang}__") for lang in langs}
    for lang, i in ids.items():
        if sp.id_to_piece(i) != f"__{lang}__":
            raise ValueError(f"sentencepiece model lacks __{lang}__")
    return ids


def encode_split(sp, data_dir, split, cache, max_len=128, langs=LANGS):
    """-> {lang: list of int32 arrays (pieces, no specials)}, cached as .npz under cache."""
    path = os.path.join(cache, f"{split}.npz")
    if os.path.exists(path):
        z = np.load(path)
        return {lang: np.split(z[lang], z[lang + "_off"][1:-1]) for lang in langs}
    lines = read_split(data_dir, split, langs)
    out, save = {}, {}
    for lang in langs:
        ids = [np.asarray(x[:max_len], np.int32) for x in sp.encode(lines[lang], out_type=int)]
        out[lang] = ids
        save[lang] = np.concatenate(ids) if ids else np.zeros(0, np.int32)
        save[lang + "_off"] = np.cumsum([0] + [len(x) for x in ids])
    os.makedirs(cache, exist_ok=True)
    tmp = path + ".tmp.npz"
    np.savez(tmp, **save)
    os.replace(tmp, path)
    return out


class Batcher:
    """Token-bucketed batches of source sentences with all their other-language targets.

    An example is (line index, source language); its targets are the other
    languages of that line. A batch holds about `max_tokens` target tokens.
    """

    def __init__(self, corpus, max_tokens, langs=LANGS, seed=1):
        self.corpus, self.langs, self.max_tokens = corpus, langs, max_tokens
        self.n = len(corpus[langs[0]])
        self.lens = {lang: np.array([len(x) for x in corpus[lang]]) for lang in langs}
        self.rng = np.random.default_rng(seed)

    def epoch(self):
        """A list of batches; each batch is a list of (line, src_lang_index)."""
        ex = [(i, s) for s in range(len(self.langs)) for i in range(self.n)]
        ex = np.array(ex, dtype=np.int64)
        tgt_tok = np.zeros(len(ex))
        for s, src in enumerate(self.langs):
            sel = ex[:, 1] == s
            tot = sum(self.lens[t][ex[sel, 0]] + 2 for t in self.langs if t != src)
            tgt_tok[sel] = tot
        src_len = np.array([self.lens[self.langs[s]][i] for i, s in ex])
        # sort by (src length, target length) with random tie-breaks
        noise = self.rng.random(len(ex))
        order = np.lexsort((noise, tgt_tok, src_len))
        batches, cur, cur_max_tgt = [], [], 0
        for k in order:
            i, s = ex[k]
            per = max(self.lens[t][i] for t in self.langs if t != self.langs[s]) + 2
            m = max(cur_max_tgt, per)
            # padded target tokens if we add this one: (len+1) sources x 3 targets x m
            if cur and (len(cur) + 1) * (len(self.langs) - 1) * m > self.max_tokens:
                batches.append(cur)
                cur, m = [], per
            cur.append((int(i), int(s)))
            cur_max_tgt = m
        if cur:
            batches.append(cur)
        self.rng.shuffle(batches)
        return batches

    def tensors(self, batch, ids):
        """-> src [B, S], prev [3B, T], tgt [3B, T] (CPU long tensors, PAD-filled).

        Row b*3+j of prev/tgt is source b's j-th target language.
        """
        srcs, prevs, tgts = [], [], []
        for i, s in batch:
            src_lang = self.langs[s]
            srcs.append((self.corpus[src_lang][i], (EOS,)))
            for t in self.langs:
                if t == src_lang:
                    continue
                y = self.corpus[t][i]
                prevs.append(((EOS, ids[t]), y))
                tgts.append(((ids[t],), y, (EOS,)))
        return pad_parts(srcs), pad_parts(prevs), pad_parts(tgts)


def pad_parts(rows, value=PAD):
    """Rows given as tuples of pieces (sequences) -> one right-padded long tensor.

    Filling a numpy array slice by slice is ~20x faster than a tensor per row, which
    matters at GPU batch sizes (thousands of rows a step).
    """
    lens = [sum(len(p) for p in r) for r in rows]
    out = np.full((len(rows), max(lens)), value, dtype=np.int64)
    for k, r in enumerate(rows):
        c = 0
        for p in r:
            out[k, c:c + len(p)] = p
            c += len(p)
    return torch.from_numpy(out)


def pad(rows, value=PAD):
    return pad_parts([(r,) for r in rows], value)


def scored_positions(tgt):
    """Flat indices of the scored target positions (not padding, not the forced language
    tag in column 0) and the ids there: computed on the CPU so the training step needs
    no device-to-host sync to find them."""
    t = tgt.clone()
    t[:, 0] = PAD
    flat = t.view(-1)
    idx = flat.ne(PAD).nonzero().squeeze(1)
    return idx, flat[idx]
