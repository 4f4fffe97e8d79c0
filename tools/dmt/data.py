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


def train_spm(data_dir, prefix, vocab_size=8000, langs=LANGS, threads=2, general_dir=None,
              split_digits=False, max_sentences=0):
    """Joint unigram SentencePiece over the training sides (Multi30k, plus the general
    pairs when general_dir is given); returns the .model path. split_digits makes every
    digit a piece of its own, so numbers are copied digit by digit."""
    import sentencepiece as spm
    os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
    text = prefix + ".train.txt"
    with open(text, "w", encoding="utf-8") as f:
        for lang in langs:
            for line in read_split(data_dir, "train", [lang])[lang]:
                f.write(line + "\n")
        if general_dir:
            for (a, b), (la, lb) in read_general(general_dir, "train").items():
                for line in la + lb:
                    f.write(line + "\n")
    spm.SentencePieceTrainer.train(
        input=text, model_prefix=prefix, vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, byte_fallback=True, split_digits=split_digits,
        bos_id=BOS, pad_id=PAD, eos_id=EOS, unk_id=UNK,
        user_defined_symbols=",".join(f"__{lang}__" for lang in langs),
        input_sentence_size=max_sentences, shuffle_input_sentence=bool(max_sentences),
        num_threads=threads, minloglevel=1)
    os.remove(text)
    return prefix + ".model"


def split_digits_vocab(src_model, out_model):
    """A copy of an existing SentencePiece model in which every normal piece holding a
    digit and anything else (`2012`, `00`, `▁10`) is marked unused: the encoder then
    splits numbers into one piece per digit, while every id keeps its meaning, so a
    model trained with src_model can continue training with out_model. Returns the
    number of pieces disabled. Needs python3-protobuf."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    m = pb.ModelProto()
    with open(src_model, "rb") as f:
        m.ParseFromString(f.read())
    n = 0
    for p in m.pieces:
        body = p.piece.replace("\u2581", "")
        if p.type == pb.ModelProto.SentencePiece.NORMAL and len(body) > 1 and any(c.isdigit() for c in body):
            p.type = pb.ModelProto.SentencePiece.UNUSED
            n += 1
    m.trainer_spec.split_digits = True
    os.makedirs(os.path.dirname(out_model) or ".", exist_ok=True)
    with open(out_model, "wb") as f:
        f.write(m.SerializeToString())
    return n


def lang_ids(sp, langs=LANGS):
    ids = {lang: sp.piece_to_id(f"__{lang}__") for lang in langs}
    for lang, i in ids.items():
        if sp.id_to_piece(i) != f"__{lang}__":
            raise ValueError(f"sentencepiece model lacks __{lang}__")
    return ids


def encode_cached(sp, path, names, read, max_len=128):
    """-> {name: list of int32 arrays (pieces, no specials)} for the line lists that
    read() returns ({name: lines}), cached as one .npz at path (read() is not called
    when the cache exists)."""
    if os.path.exists(path):
        z = np.load(path)
        return {k: np.split(z[k], z[k + "_off"][1:-1]) for k in names}
    lines = read()
    out, save = {}, {}
    for k in names:
        ids = [np.asarray(x[:max_len], np.int32) for x in sp.encode(lines[k], out_type=int)]
        out[k] = ids
        save[k] = np.concatenate(ids) if ids else np.zeros(0, np.int32)
        save[k + "_off"] = np.cumsum([0] + [len(x) for x in ids])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp.npz"
    np.savez(tmp, **save)
    os.replace(tmp, path)
    return out


def encode_split(sp, data_dir, split, cache, max_len=128, langs=LANGS):
    """-> {lang: list of int32 arrays (pieces, no specials)}, cached as .npz under cache."""
    return encode_cached(sp, os.path.join(cache, f"{split}.npz"), langs,
                         lambda: read_split(data_dir, split, langs), max_len)


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


# -- general-domain bilingual data (../shared/data/general) ------------------------------
# Unlike Multi30k, these are pairs (en-de, en-fr, en-cs): an example is one source
# sentence and one target. Both directions of every pair are used.
GENERAL_PAIRS = [("en", "de"), ("en", "fr"), ("en", "cs")]


def read_general(general_dir, split="train", pairs=GENERAL_PAIRS):
    """-> {(a, b): (lines_a, lines_b)} for the pairs present under general_dir/split."""
    out = {}
    for a, b in pairs:
        base = os.path.join(general_dir, split, f"{a}-{b}")
        pa = base + f".{a}.gz" if os.path.exists(base + f".{a}.gz") else base + f".{a}"
        pb = base + f".{b}.gz" if os.path.exists(base + f".{b}.gz") else base + f".{b}"
        if not (os.path.exists(pa) and os.path.exists(pb)):
            continue
        la, lb = read_lines(pa), read_lines(pb)
        if len(la) != len(lb):
            raise ValueError(f"{base}: {len(la)} vs {len(lb)} lines")
        keep = [i for i in range(len(la)) if la[i].strip() and lb[i].strip()]
        out[(a, b)] = ([la[i] for i in keep], [lb[i] for i in keep])
    return out


def join_through(texts, pivot="en"):
    """Pairs between the languages paired with `pivot`, joined where both pairs hold the
    same pivot sentence (WMT's newstest is multi-way parallel; Tatoeba shares many
    English sentences): read_general's {(pivot, x): ...} -> {(x, y): (lines_x, lines_y)},
    x before y in texts' order. A pivot sentence is joined once, with its first
    translation on each side; pairs whose two sides are the same text are left out
    (names, numbers: nothing to learn between the languages)."""
    others = [b for a, b in texts if a == pivot]
    out = {}
    for i, x in enumerate(others):
        first_x = {}
        for e, t in zip(*texts[(pivot, x)]):
            first_x.setdefault(e, t)
        for y in others[i + 1:]:
            lx, ly, seen = [], [], set()
            for e, t in zip(*texts[(pivot, y)]):
                if e in first_x and e not in seen and first_x[e] != t:
                    seen.add(e)
                    lx.append(first_x[e])
                    ly.append(t)
            if lx:
                out[(x, y)] = (lx, ly)
    return out


def encode_general(sp, texts, cache, max_len=128, name="general"):
    """texts: read_general's {(a, b): (lines_a, lines_b)} -> {(a, b): (ids_a, ids_b)}
    (lists of int32 arrays), cached as cache/{name}-{a}-{b}.npz (encoded again when the
    cache holds another number of lines: the text changed)."""
    out = {}
    for (a, b), (la, lb) in texts.items():
        path = os.path.join(cache, f"{name}-{a}-{b}.npz")
        ids = encode_cached(sp, path, ("a", "b"), lambda: {"a": la, "b": lb}, max_len)
        if len(ids["a"]) != len(la) or len(ids["b"]) != len(lb):
            os.remove(path)
            ids = encode_cached(sp, path, ("a", "b"), lambda: {"a": la, "b": lb}, max_len)
        out[(a, b)] = (ids["a"], ids["b"])
    return out


# -- robustness augmentation ------------------------------------------------------------
# Text-level, seeded: the same (seed, epoch) gives the same pairs. Two kinds:
#  - case: both sides in UPPER, lower or Title Case, so ALL-CAPS input translates;
#  - pass-through spans: a number, date, price, URL, e-mail, emoji or code-like token
#    inserted identically on both sides, so the model learns to copy them.
_SYL = ["ka", "lo", "mi", "ter", "an", "so", "vel", "ri", "da", "nu", "bex", "or", "pa", "zin", "ul", "fe"]
_TLD = ["com", "org", "net", "de", "fr", "cz", "io", "eu"]
_EMOJI = ["😀", "😂", "👍", "🎉", "❤️", "🙂", "🚀", "🔥", "✅", "🌍", "☕", "📞", "😢", "🙏", "⚽"]


def _word(rng, n=None):
    n = n or int(rng.integers(1, 4))
    return "".join(_SYL[int(rng.integers(len(_SYL)))] for _ in range(n))


def passthrough_span(rng):
    """A random span a translation must copy unchanged (one of several kinds)."""
    kind = int(rng.integers(12))
    r = lambda a, b: int(rng.integers(a, b))  # noqa: E731
    if kind == 0:
        return str(r(0, 10 ** r(1, 7)))
    if kind == 1:
        return f"{r(0, 1000)}.{r(0, 100):02d}"
    if kind == 2:
        return f"{r(1, 1000)},{r(0, 1000):03d}"
    if kind == 3:
        y, m, d = r(1900, 2040), r(1, 13), r(1, 29)
        return [f"{y}-{m:02d}-{d:02d}", f"{d:02d}.{m:02d}.{y}", f"{m}/{d}/{y}"][r(0, 3)]
    if kind == 4:
        return f"{r(0, 24):02d}:{r(0, 60):02d}"
    if kind == 5:
        v = f"{r(1, 1000)}.{r(0, 100):02d}"
        return [f"${v}", f"€{v}", f"{v} €", f"£{v}", f"{v} USD"][r(0, 5)]
    if kind == 6:
        return f"{r(0, 100)}.{r(0, 10)}%"
    if kind == 7:
        path = "/".join(_word(rng) for _ in range(r(0, 3)))
        q = f"?id={r(1, 10000)}" if r(0, 3) == 0 else ""
        return f"{['https://', 'http://', 'www.', 'https://www.'][r(0, 4)]}{_word(rng)}.{_TLD[r(0, len(_TLD))]}" + \
            (f"/{path}" if path else "") + q
    if kind == 8:
        sep = [".", "_", "-", ""][r(0, 4)]
        return f"{_word(rng)}{sep}{_word(rng)}{r(0, 100) if r(0, 2) else ''}@{_word(rng)}.{_TLD[r(0, len(_TLD))]}"
    if kind == 9:
        return "".join(_EMOJI[r(0, len(_EMOJI))] for _ in range(r(1, 3)))
    if kind == 10:
        w1, w2 = _word(rng), _word(rng)
        return [f"{w1}_{w2}", f"{w1}{w2.capitalize()}()", f"v{r(0, 10)}.{r(0, 20)}.{r(0, 10)}",
                f"{w1.upper()}-{r(100, 10000)}", f"#{w1}{w2}", f"@{w1}{r(0, 100)}", f"{w1}.{['py', 'c', 'json'][r(0, 3)]}"][r(0, 7)]
    return f"+{r(1, 99)} {r(100, 1000)} {r(1000, 100000)}"  # phone number


def insert_span(src, tgt, span, rng):
    """The same span at the same place on both sides: before the final punctuation,
    at the start, or in parentheses."""
    where = int(rng.integers(3))
    out = []
    for s in (src, tgt):
        s = s.rstrip()
        end = s[-1] if s and s[-1] in ".!?" else ""
        body = s[:-1].rstrip() if end else s
        if where == 0:
            out.append(f"{body} {span}{end}")
        elif where == 1:
            out.append(f"{span} {s}")
        else:
            out.append(f"{body} ({span}){end}")
    return out


def title_case(s):
    return " ".join(w[:1].upper() + w[1:] for w in s.split(" "))


def augment(pairs, rng, case_share=0.05, span_share=0.05):
    """Extra (src, tgt) text pairs from `pairs`: a case_share of them re-cased on both
    sides (UPPER / lower / Title, in equal parts) and a span_share with a pass-through
    span inserted. Returns [(src, tgt, kind)]."""
    out = []
    n = len(pairs)
    order = rng.permutation(n)
    n_case = min(n, int(round(n * case_share)))
    n_span = min(n - n_case, int(round(n * span_share)))
    for i in order[:n_case]:
        s, t = pairs[int(i)]
        f = [str.upper, str.lower, title_case][int(rng.integers(3))]
        out.append((f(s), f(t), "case"))
    for i in order[n_case:n_case + n_span]:
        s, t = pairs[int(i)]
        a, b = insert_span(s, t, passthrough_span(rng), rng)
        out.append((a, b, "span"))
    return out


class PairBatcher:
    """Token-bucketed batches of bilingual examples (general data and augmentation).

    Each epoch samples the directed examples anew: every direction (a->b and b->a of each
    pair) gets a share of `epoch_examples` proportional to n^(1/temperature) (n = pairs
    in the language pair), so the small en-cs pair is up-sampled rather than drowned;
    then `augment_share` more examples are made by `augment` from a sample of the text.
    Pairs without the pivot language (join_through's) together get `joined_share` of
    the examples, shared among them by the same weights, the pairs with it the rest.
    With `ui` (encode_general's ids of tools/ui_strings.py's pairs), `ui_share` of the
    examples are user-interface strings ("Cancel" -> "Abbrechen"), both directions,
    shared by the same weights; the general text gets the rest (no augmentation is made
    from them). An example is (src ids, tgt ids, target language).
    """

    def __init__(self, sp, general, texts, max_tokens, max_len=128, epoch_examples=400000,
                 temperature=2.0, case_share=0.05, span_share=0.05, seed=1, keep_below=0,
                 joined_share=0.0, pivot="en", ui=None, ui_share=0.0):
        self.sp, self.general, self.texts = sp, general, texts
        self.ui, self.ui_share = (ui or {}), (ui_share if ui else 0.0)
        self.max_tokens, self.max_len = max_tokens, max_len
        self.epoch_examples, self.temperature = epoch_examples, temperature
        self.case_share, self.span_share = case_share, span_share
        self.joined_share, self.pivot = joined_share, pivot
        self.rng = np.random.default_rng(seed)
        self.last_mix = {}
        # keep_below > 0: only pairs with both sides shorter than this many pieces
        # (a cheaper run that favours everyday sentences over long news ones)
        self.keep = {}
        for key, (ia, ib) in general.items():
            if keep_below > 0:
                la = np.array([len(x) for x in ia])
                lb = np.array([len(x) for x in ib])
                self.keep[key] = np.nonzero((la < keep_below) & (lb < keep_below))[0]
            else:
                self.keep[key] = np.arange(len(ia))

    def directions(self):
        """-> [(src, tgt, src_ids, tgt_ids, src_text, tgt_text)] for both directions of each pair."""
        out = []
        for (a, b), (ia, ib) in self.general.items():
            ta, tb = self.texts[(a, b)]
            keep = self.keep[(a, b)]
            ia, ib = [ia[i] for i in keep], [ib[i] for i in keep]
            ta, tb = [ta[i] for i in keep], [tb[i] for i in keep]
            out.append((a, b, ia, ib, ta, tb))
            out.append((b, a, ib, ia, tb, ta))
        return out

    def joined(self, src, tgt):
        """Whether the direction src-tgt comes from pairs joined through the pivot."""
        return self.pivot not in (src, tgt)

    def shares(self):
        dirs = self.directions()
        w = np.array([len(d[2]) ** (1.0 / self.temperature) for d in dirs], dtype=np.float64)
        joined = np.array([self.joined(d[0], d[1]) for d in dirs])
        if joined.any() and not joined.all():
            w[~joined] *= (1.0 - self.joined_share) / w[~joined].sum()
            w[joined] *= self.joined_share / w[joined].sum()
        return dirs, w / w.sum()

    def ui_examples(self, ids):
        """This epoch's user-interface examples -> (examples, {direction: counts})."""
        dirs = []
        for (a, b), (ia, ib) in sorted(self.ui.items()):
            dirs += [(a, b, ia, ib), (b, a, ib, ia)]
        if not dirs or self.ui_share <= 0:
            return [], {}
        w = np.array([len(d[2]) ** (1.0 / self.temperature) for d in dirs], dtype=np.float64)
        examples, mix = [], {}
        for (s, t, si, ti), p in zip(dirs, w / w.sum()):
            k = int(round(p * self.ui_share * self.epoch_examples))
            idx = self.rng.choice(len(si), size=k, replace=k > len(si))
            examples += [(si[i], ti[i], ids[t]) for i in idx]
            mix[f"{s}-{t}"] = {"examples": k, "target_tokens": int(sum(len(ti[i]) + 1 for i in idx))}
        return examples, mix

    def epoch(self, ids):
        """A list of batches; each batch is a list of (src ids, tgt ids, tgt language id)."""
        dirs, share = self.shares()
        examples, mix, text_pairs = [], {}, []
        for (s, t, si, ti, st, tt), p in zip(dirs, share):
            k = int(round(p * (1.0 - self.ui_share) * self.epoch_examples))
            idx = self.rng.choice(len(si), size=k, replace=k > len(si))
            for i in idx:
                examples.append((si[i], ti[i], ids[t]))
            # text for augmentation: a sample of this direction, one augmented copy each
            m = int(k * (self.case_share + self.span_share))
            for i in self.rng.choice(len(st), size=min(m, len(st)), replace=False):
                text_pairs.append((st[i], tt[i], t))
            mix[f"{s}-{t}"] = {"examples": k, "target_tokens": int(sum(len(ti[i]) + 1 for i in idx))}
            if self.joined(s, t):
                mix[f"{s}-{t}"]["joined"] = True
        extra = 0
        by_tgt = {}
        for s_, t_, tl in text_pairs:
            by_tgt.setdefault(tl, []).append((s_, t_))
        for tl, prs in sorted(by_tgt.items()):
            tot = (self.case_share + self.span_share) or 1.0
            aug = augment(prs, self.rng, self.case_share / tot, self.span_share / tot)
            if aug:
                src_ids = self.sp.encode([a for a, _, _ in aug], out_type=int)
                tgt_ids = self.sp.encode([b for _, b, _ in aug], out_type=int)
                for x, y in zip(src_ids, tgt_ids):
                    examples.append((np.asarray(x[:self.max_len], np.int32), np.asarray(y[:self.max_len], np.int32), ids[tl]))
                extra += len(aug)
        mix["augmented"] = {"examples": extra}
        ui, ui_mix = self.ui_examples(ids)
        if ui_mix:
            examples += ui
            mix["ui"] = ui_mix   # a key without '-': check_mix leaves it out
        self.last_mix = mix
        return self._batches(examples)

    def _batches(self, examples):
        src_len = np.array([len(e[0]) for e in examples])
        tgt_len = np.array([len(e[1]) for e in examples])
        order = np.lexsort((self.rng.random(len(examples)), tgt_len, src_len))
        batches, cur, m = [], [], 0
        for k in order:
            e = examples[k]
            per = len(e[1]) + 2
            mm = max(m, per)
            if cur and (len(cur) + 1) * mm > self.max_tokens:
                batches.append(cur)
                cur, mm = [], per
            cur.append(e)
            m = mm
        if cur:
            batches.append(cur)
        return batches

    @staticmethod
    def tensors(batch):
        """-> src [B, S], prev [B, T], tgt [B, T] (one target per source)."""
        srcs = [(x, (EOS,)) for x, _, _ in batch]
        prevs = [((EOS, tl), y) for _, y, tl in batch]
        tgts = [((tl,), y, (EOS,)) for _, y, tl in batch]
        return pad_parts(srcs), pad_parts(prevs), pad_parts(tgts)


def keep_share(items, share, rng):
    """A random `share` of `items` (at least one), in their order: the Multi30k
    batches kept in an epoch (--multi30k-share)."""
    if share >= 1 or not items:
        return list(items)
    keep = max(1, round(share * len(items)))
    return [items[i] for i in sorted(rng.choice(len(items), keep, replace=False))]


def epoch_batches(batcher, pairs, ids, multi30k_share=1.0):
    """One training epoch: Multi30k's batches (3 targets a source), then -- with general
    data (`pairs`, a PairBatcher) -- a `multi30k_share` of them beside the general
    sample's pair batches, shuffled together. Items: (n_targets, batch). The run and the
    training bench both draw from it, so the bench times the run's mix of batches."""
    out = [(len(LANGS) - 1, b) for b in batcher.epoch()]
    if pairs is None:
        return out
    # Multi30k is 4-way parallel: a whole epoch of it (12 directions) holds about as
    # many target tokens as the general sample, so --multi30k-share keeps a part
    out = keep_share(out, multi30k_share, batcher.rng)
    out += [(1, b) for b in pairs.epoch(ids)]
    order = batcher.rng.permutation(len(out))
    return [out[i] for i in order]


def check_mix(mix, min_share=0.08):
    """The direction mix of one epoch (PairBatcher.last_mix) -> list of problems: a
    direction with less than min_share of the target tokens is drowned by the others.
    Directions joined through the pivot are left out: their share is set (joined_share)."""
    dirs = {k: v for k, v in mix.items() if "-" in k and not v.get("joined")}
    total = sum(v["target_tokens"] for v in dirs.values()) or 1
    return [f"{k}: {v['target_tokens'] / total:.1%} of target tokens (< {min_share:.0%})"
            for k, v in sorted(dirs.items()) if v["target_tokens"] / total < min_share]
