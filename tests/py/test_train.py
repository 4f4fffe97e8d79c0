#!/usr/bin/python3
"""The training recipe's plumbing (tools/train.py, tools/dmt/data.py). TAP output.

Batches pair each source with the right targets; only real target tokens are scored;
the sparse loss equals the dense one; the source-gain metric separates a model that
reads its source from one that cannot; a run stopped and resumed ends with the same
weights as one that never stopped, and one whose step failed once ends as one that did
not; snapshots are kept and averaged; the export loads
in the C engine.

The end-to-end part needs Multi30k (DEEPMT_SHARED, default ../shared) and skips
with a message without it.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tap  # noqa: E402
import train  # noqa: E402
from dmt import data as D  # noqa: E402
from dmt.memory import TCMALLOC  # noqa: E402
from dmt.model import Transformer, default_config  # noqa: E402
from dmt.objective import OutputCrossEntropy, forward_loss  # noqa: E402
from dmt.precision import amp_choice  # noqa: E402
from dmt.runstate import load_state  # noqa: E402
from dmt.validation import build_val_sets, multi30k_val_sets, validate  # noqa: E402

IDS = {"en": 4, "de": 5, "fr": 6, "cs": 7}


def toy_corpus(n=12, seed=0):
    """4-way 'parallel' toy corpus: line i in language k is ids derived from (i, k)."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, lang in enumerate(D.LANGS):
        out[lang] = [np.asarray(10 + 100 * k + i + np.arange(rng.integers(1, 7)), np.int32) for i in range(n)]
    return out


def test_batches():
    corpus = toy_corpus()
    b = D.Batcher(corpus, max_tokens=60, seed=3)
    batches = b.epoch()
    seen = sorted(ex for batch in batches for ex in batch)
    tap.ok(seen == sorted((i, s) for s in range(4) for i in range(12)),
           "an epoch holds every (line, source language) once")
    batch = max(batches, key=len)
    src, prev, tgt = b.tensors(batch, IDS)
    good = True
    for r, (i, s) in enumerate(batch):
        want_src = list(corpus[D.LANGS[s]][i]) + [D.EOS]
        good &= src[r, :len(want_src)].tolist() == want_src and bool((src[r, len(want_src):] == D.PAD).all())
        others = [t for t in D.LANGS if t != D.LANGS[s]]
        for j, t in enumerate(others):
            y = list(corpus[t][i])
            row = 3 * r + j
            good &= prev[row, :len(y) + 2].tolist() == [D.EOS, IDS[t]] + y
            good &= tgt[row, :len(y) + 2].tolist() == [IDS[t]] + y + [D.EOS]
            good &= bool((tgt[row, len(y) + 2:] == D.PAD).all())
    tap.ok(good, "row 3b+j of prev/tgt is source b's j-th other language, right-padded")
    over = [bt for bt in batches if len(bt) > 1 and b.tensors(bt, IDS)[2].numel() > 60]
    tap.ok(not over, "no multi-sentence batch exceeds max_tokens padded target tokens",
           detail=f"{len(over)} over")

    scored, targets = D.scored_positions(tgt)
    t = tgt.clone()
    t[:, 0] = D.PAD
    want = [k for k, v in enumerate(t.view(-1).tolist()) if v != D.PAD]
    tap.ok(scored.tolist() == want and targets.tolist() == [t.view(-1)[k].item() for k in want],
           "scored positions: every real target token but the forced language tag")
    rows = [[1, 2, 3], [4], [5, 6]]
    tap.ok(D.pad(rows).tolist() == [[1, 2, 3], [4, 1, 1], [5, 6, 1]], "pad right-pads with PAD")


class FakeSP:
    """Stands in for SentencePiece in the pair-batcher tests: one id per character."""
    def encode(self, texts, out_type=int):
        return [[8 + (ord(ch) % 400) for ch in t] for t in texts]


def test_general_pairs():
    """Bilingual general-domain examples: both directions, temperature-balanced shares,
    the augmentation (case and pass-through spans), batches within max_tokens."""
    import random
    texts, general = {}, {}
    sp = FakeSP()
    for (a, b), n in ((("en", "de"), 400), (("en", "fr"), 300), (("en", "cs"), 25)):
        la = [f"{a} sentence {i}." for i in range(n)]
        lb = [f"{b} Satz {i}." for i in range(n)]
        texts[(a, b)] = (la, lb)
        general[(a, b)] = ([np.asarray(x, np.int32) for x in sp.encode(la)],
                           [np.asarray(x, np.int32) for x in sp.encode(lb)])
    pb = D.PairBatcher(sp, general, texts, max_tokens=400, epoch_examples=2000, temperature=2.0,
                       case_share=0.1, span_share=0.1, seed=5)
    batches = pb.epoch(IDS)
    mix = pb.last_mix
    tap.ok(set(k for k in mix if "-" in k) == {"en-de", "de-en", "en-fr", "fr-en", "en-cs", "cs-en"},
           "general pairs are used in both directions", detail=str(mix))
    tap.ok(mix["en-cs"]["examples"] > 25 and mix["en-cs"]["examples"] < mix["en-de"]["examples"],
           "temperature sampling up-samples the small pair, still below the large one", detail=str(mix))
    n_ex = sum(len(b) for b in batches)
    tap.ok(n_ex == sum(v["examples"] for v in mix.values()), "an epoch holds every sampled and augmented example",
           detail=f"{n_ex} vs {mix}")
    tap.ok(mix["augmented"]["examples"] > 0.15 * 2000, "augmented pairs ~ case_share + span_share of the epoch",
           detail=str(mix["augmented"]))
    over = [b for b in batches if len(b) > 1 and D.PairBatcher.tensors(b)[2].numel() > 400]
    tap.ok(not over, "no multi-sentence pair batch exceeds max_tokens padded target tokens")
    b = max(batches, key=len)
    src, prev, tgt = D.PairBatcher.tensors(b)
    x, y, tl = b[0]
    tap.ok(src[0, :len(x) + 1].tolist() == list(x) + [D.EOS] and prev[0, :len(y) + 2].tolist() == [D.EOS, tl] + list(y)
           and tgt[0, :len(y) + 2].tolist() == [tl] + list(y) + [D.EOS], "pair tensors: src </s>, </s> tag y, tag y </s>")
    tap.ok(not D.check_mix(mix, 0.04), "the mix check passes a balanced epoch", detail=str(D.check_mix(mix, 0.04)))
    tap.ok(D.check_mix(mix, 0.5), "the mix check names drowned directions when the floor is above their share")
    again = D.PairBatcher(sp, general, texts, max_tokens=400, epoch_examples=2000, case_share=0.1, span_share=0.1, seed=5)
    tap.ok([[(list(x), list(y), t) for x, y, t in bt] for bt in again.epoch(IDS)] ==
           [[(list(x), list(y), t) for x, y, t in bt] for bt in batches], "the same seed gives the same epoch")

    items = list(range(40))
    part = D.keep_share(items, 0.25, np.random.default_rng(2))
    again = D.keep_share(items, 0.25, np.random.default_rng(2))
    other = D.keep_share(items, 0.25, np.random.default_rng(3))
    tap.ok(len(part) == 10 and part == sorted(set(part)) and set(part) <= set(items) and part == again
           and part != other and part != items[:10],
           "--multi30k-share: a seeded random quarter of the batches, in order, none twice", detail=str(part))
    tap.ok(D.keep_share(items, 1.0, None) == items and D.keep_share(items, 0.001, np.random.default_rng(1)) != []
           and D.keep_share([], 0.5, np.random.default_rng(1)) == [],
           "--multi30k-share: 1 keeps everything, a tiny share keeps at least one batch")

    # the epoch the run trains on and the training bench times (dmt.data.epoch_batches)
    m30k = D.Batcher(toy_corpus(n=60), max_tokens=40, seed=3)
    whole = len(m30k.epoch())
    pb = D.PairBatcher(sp, general, texts, max_tokens=400, epoch_examples=2000, seed=5)
    pb.rng = m30k.rng
    epoch = D.epoch_batches(m30k, pb, IDS, 0.25)
    kinds = [n for n, _ in epoch]
    n_m30k = sum(n == len(D.LANGS) - 1 for n in kinds)
    # (an epoch's batch count varies a little with its shuffle)
    tap.ok(abs(n_m30k - 0.25 * whole) <= 0.1 * 0.25 * whole and abs(kinds.count(1) - len(pb.epoch(IDS))) <= 10
           and all(set(half) == {1, len(D.LANGS) - 1} for half in (kinds[:len(kinds) // 2], kinds[len(kinds) // 2:])),
           "an epoch: a quarter of the Multi30k batches (--multi30k-share 0.25) and the general sample's, shuffled together",
           detail=f"{n_m30k} of {whole} Multi30k batches, {kinds.count(1)} pair batches, {kinds[:20]}")
    tap.ok(abs(sum(n > 1 for n, _ in D.epoch_batches(m30k, None, IDS, 0.25)) - whole) <= 0.1 * whole,
           "without general data an epoch is all of Multi30k (the share applies only beside general data)")

    r = np.random.default_rng(1)
    pairs = [("The dog runs.", "Der Hund läuft."), ("Hello there", "Hallo")] * 50
    aug = D.augment(pairs, r, case_share=0.3, span_share=0.3)
    kinds = [k for _, _, k in aug]
    tap.ok(kinds.count("case") == 30 and kinds.count("span") == 30, "augment makes the asked shares",
           detail=f"{kinds.count('case')} case, {kinds.count('span')} span")
    cased = [(s, t) for s, t, k in aug if k == "case"]
    tap.ok(all(s in (p.upper(), p.lower(), D.title_case(p)) for (s, _), p in
               zip(cased, [next(a for a, b in pairs if s.lower() == a.lower()) for s, _ in cased])),
           "case pairs are the UPPER, lower or Title form of a pair")
    ok_span = True
    for s, t, k in aug:
        if k != "span":
            continue
        base = next((a, b) for a, b in pairs if a.rstrip(".") in s)
        span_s = s.replace(base[0].rstrip("."), "", 1)
        ok_span &= any(tok and tok in t for tok in span_s.replace("(", " ").replace(")", " ").split())
    tap.ok(ok_span, "span pairs carry the same span on both sides")
    kinds_seen = set()
    rr = np.random.default_rng(2)
    for _ in range(400):
        sp_ = D.passthrough_span(rr)
        kinds_seen.add("url" if "://" in sp_ or sp_.startswith("www.") else "email" if "@" in sp_ and "." in sp_.split("@")[-1]
                       else "digit" if any(c.isdigit() for c in sp_) else "other")
    tap.ok({"url", "email", "digit", "other"} <= kinds_seen, "pass-through spans cover URLs, e-mails, numbers and others",
           detail=str(kinds_seen))
    random.seed(0)


def test_ui_pairs():
    """--ui: user-interface strings as a set share of the general examples, both
    directions, reported apart from the general directions in the mix."""
    sp = FakeSP()

    def encoded(pairs, kind):
        texts, ids = {}, {}
        for (a, b), n in pairs:
            la, lb = [f"{kind} {a} s {i}." for i in range(n)], [f"{kind} {b} t {i}." for i in range(n)]
            texts[(a, b)] = (la, lb)
            ids[(a, b)] = ([np.asarray(x, np.int32) for x in sp.encode(la)],
                           [np.asarray(x, np.int32) for x in sp.encode(lb)])
        return texts, ids
    texts, general = encoded(((("en", "de"), 400), (("en", "fr"), 300)), "news")
    _, ui = encoded(((("en", "de"), 50), (("en", "fr"), 50)), "ui")
    pb = D.PairBatcher(sp, general, texts, max_tokens=400, epoch_examples=4000, case_share=0, span_share=0,
                       seed=3, ui=ui, ui_share=0.1)
    batches = pb.epoch(IDS)
    mix = pb.last_mix
    n_ui = sum(v["examples"] for v in mix.get("ui", {}).values())
    n_general = sum(v["examples"] for k, v in mix.items() if "-" in k)
    tap.ok(set(mix.get("ui", {})) == {"en-de", "de-en", "en-fr", "fr-en"} and abs(n_ui - 400) <= 2
           and abs(n_general - 3600) <= 3,
           "--ui-share 0.1: a tenth of the epoch's examples are UI strings, both directions; the general text the rest",
           detail=str(mix))
    tap.ok(sum(len(b) for b in batches) == n_ui + n_general, "the UI examples are in the epoch's batches",
           detail=f"{sum(len(b) for b in batches)} vs {n_ui} + {n_general}")
    ui_targets = {tuple(y) for _, ids in ui.values() for y in ids} | {tuple(x) for ids, _ in ui.values() for x in ids}
    seen = sum(1 for b in batches for _, y, _ in b if tuple(y) in ui_targets)
    tap.ok(seen == n_ui, "each UI example's target is a UI string", detail=f"{seen} of {n_ui}")
    tap.ok(not D.check_mix(mix, 0.2), "the mix check leaves the UI directions out (their share is set)",
           detail=str(D.check_mix(mix, 0.2)))
    plain = D.PairBatcher(sp, general, texts, max_tokens=400, epoch_examples=4000, case_share=0, span_share=0,
                          seed=3, ui=None, ui_share=0.1)
    plain.epoch(IDS)
    tap.ok("ui" not in plain.last_mix and sum(v["examples"] for k, v in plain.last_mix.items() if "-" in k) == 4000,
           "without UI pairs the share is ignored: every example is general text", detail=str(plain.last_mix))


def test_joined_pairs():
    """--pivot-share: de-fr (etc.) pairs joined where en-de and en-fr share an English
    sentence, and their set share of each epoch."""
    texts = {("en", "de"): (["A.", "B.", "C.", "A.", "Tom.", "Only de."], ["a-de", "b-de", "c-de", "a2-de", "Tom.", "x-de"]),
             ("en", "fr"): (["C.", "A.", "A.", "D.", "Tom.", "B."], ["c-fr", "a-fr", "a2-fr", "d-fr", "Tom.", "b-fr"])}
    joined = D.join_through(texts)
    tap.ok(joined == {("de", "fr"): (["c-de", "a-de", "b-de"], ["c-fr", "a-fr", "b-fr"])},
           "join_through: pairs sharing an English sentence, joined once with the first translation of each "
           "side, in the second pair's order; identical sides (Tom.) and unshared sentences left out",
           detail=str(joined))
    tap.ok(D.join_through({("en", "de"): texts[("en", "de")]}) == {},
           "join_through: one pair joins nothing")

    sp = FakeSP()
    texts, general = {}, {}
    for (a, b), n in ((("en", "de"), 400), (("en", "fr"), 300), (("de", "fr"), 60)):
        la, lb = [f"{a} s {i}." for i in range(n)], [f"{b} t {i}." for i in range(n)]
        texts[(a, b)] = (la, lb)
        general[(a, b)] = ([np.asarray(x, np.int32) for x in sp.encode(la)],
                           [np.asarray(x, np.int32) for x in sp.encode(lb)])
    pb = D.PairBatcher(sp, general, texts, max_tokens=400, epoch_examples=4000, case_share=0, span_share=0,
                       seed=3, joined_share=0.2)
    pb.epoch(IDS)
    mix = pb.last_mix
    n_joined = mix["de-fr"]["examples"] + mix["fr-de"]["examples"]
    total = sum(v["examples"] for k, v in mix.items() if "-" in k)
    tap.ok(abs(n_joined - 0.2 * total) <= 2 and mix["de-fr"].get("joined") and mix["fr-de"].get("joined")
           and not mix["en-de"].get("joined") and mix["en-de"]["examples"] > mix["en-fr"]["examples"],
           "joined_share 0.2: the joined directions hold a fifth of the examples, flagged in the mix; "
           "the English pairs share the rest by temperature", detail=str(mix))
    tap.ok(not D.check_mix(mix, 0.15),
           "the mix check leaves out the joined directions (their share is set, not drowned)",
           detail=str(D.check_mix(mix, 0.15)))
    pb0 = D.PairBatcher(sp, general, texts, max_tokens=400, epoch_examples=4000, case_share=0, span_share=0, seed=3)
    pb0.epoch(IDS)
    tap.ok(pb0.last_mix["de-fr"]["examples"] == 0 and pb0.last_mix["en-de"]["examples"] > 0,
           "joined_share 0: joined pairs given to the batcher get no examples", detail=str(pb0.last_mix))

    # the dev pairs train.py nll reports as j:de-cs and j:cs-de
    from dmt.validation import joined_val_sets
    tmp = tempfile.mkdtemp(prefix="deepmt-joined-")
    try:
        os.makedirs(os.path.join(tmp, "dev"))
        files = {"en-de.en": ["One.", "Two.", "Three."], "en-de.de": ["Eins.", "Zwei.", "Drei."],
                 "en-cs.en": ["Two.", "Four.", "One."], "en-cs.cs": ["Dva.", "Čtyři.", "Jedna."]}
        for name, lines in files.items():
            with open(os.path.join(tmp, "dev", name), "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        sets = joined_val_sets(sp, tmp, 10)
        tap.ok([v[0] for v in sets] == ["j:de-cs", "j:cs-de"] and sets[0][3] == ["Dva.", "Jedna."]
               and sets[1][3] == ["Zwei.", "Eins."] and sets[0][1] == sp.encode(["Zwei.", "Eins."]),
               "joined_val_sets: the dev pairs joined through English, both directions, named j:",
               detail=str([(v[0], v[3]) for v in sets]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_split_digits_vocab():
    """The digit-split copy of a vocabulary that merges digits (the captions model's;
    the default model's splits them already): numbers become one piece a digit,
    every other piece keeps its id."""
    try:
        import sentencepiece as spmlib
        from sentencepiece import sentencepiece_model_pb2  # noqa: F401  (needs python3-protobuf)
    except ImportError as e:
        tap.skip(f"python3-protobuf missing ({e}): digit-split vocabulary not checked")
        return
    src = os.path.join(REPO, "models", "captions", "sentencepiece.model")
    tmp = tempfile.mkdtemp(prefix="deepmt-spm-")
    try:
        out = os.path.join(tmp, "spm.model")
        n = D.split_digits_vocab(src, out)
        a = spmlib.SentencePieceProcessor(model_file=src)
        b = spmlib.SentencePieceProcessor(model_file=out)
        pieces = b.encode("In 2012, 300 people paid 49.99 each.", out_type=str)
        digit_pieces = [p for p in pieces if any(c.isdigit() for c in p)]
        tap.ok(all(len(p.replace("\u2581", "")) == 1 for p in digit_pieces) and len(digit_pieces) == 11,
               "digit-split vocabulary: one piece a digit", detail=str(pieces))
        same = all(a.id_to_piece(i) == b.id_to_piece(i) for i in range(a.get_piece_size()))
        tap.ok(same and a.get_piece_size() == b.get_piece_size() and n >= 1,
               f"digit-split vocabulary keeps every id ({n} pieces disabled)")
        text = "Ein Hund läuft im Park."
        tap.ok(a.encode(text) == b.encode(text), "text without digits encodes as before")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def tiny_model(seed=0, **kw):
    cfg = default_config(encoder_layers=2, decoder_layers=1, d_model=32, heads=2, ffn_dim=64,
                         vocab_size=500, max_positions=64, **kw)
    m = Transformer(cfg)
    m.init_weights(torch.Generator().manual_seed(seed))
    return m.eval()


def test_loss():
    torch.manual_seed(0)
    m = tiny_model()
    src = torch.randint(8, 500, (3, 7))
    src[1, 5:] = D.PAD
    tgt = torch.randint(8, 500, (9, 6))
    tgt[2, 4:] = D.PAD
    tgt[:, 0] = 5
    prev = torch.cat([torch.full((9, 1), D.EOS), tgt[:, :-1]], 1)
    scored, targets = D.scored_positions(tgt)
    eps = 0.1
    loss, nll = forward_loss(m, src, prev, scored, targets, 3, eps)
    # dense reference: every position through the full model, then masked
    lp = m(src.repeat_interleave(3, 0), prev)
    mask = tgt.ne(D.PAD)
    mask[:, 0] = False
    g = -lp.gather(-1, tgt[..., None]).squeeze(-1)
    want_nll = g[mask].sum()
    want_loss = ((1 - eps) * g - eps / lp.shape[-1] * lp.sum(-1))[mask].sum()
    tap.ok(torch.allclose(nll, want_nll, rtol=1e-5) and torch.allclose(loss, want_loss, rtol=1e-5),
           "sparse loss over scored positions == dense masked loss",
           detail=f"nll {float(nll)} vs {float(want_nll)}, loss {float(loss)} vs {float(want_loss)}")


def test_loss_gradients():
    """forward_loss's hand-written backward (OutputCrossEntropy: the output projection
    and the smoothed loss a chunk of rows at a time) gives autograd's gradients of the
    dense formula, for every weight, with chunks smaller than the batch."""
    torch.manual_seed(1)
    m = tiny_model()
    m.train(False)
    src = torch.randint(8, 500, (2, 6))
    tgt = torch.randint(8, 500, (2, 7))
    tgt[1, 5:] = D.PAD
    tgt[:, 0] = 5
    prev = torch.cat([torch.full((2, 1), D.EOS), tgt[:, :-1]], 1)
    scored, targets = D.scored_positions(tgt)
    eps = 0.1
    old_chunk = OutputCrossEntropy.CHUNK
    OutputCrossEntropy.CHUNK = 3
    try:
        loss, nll = forward_loss(m, src, prev, scored, targets, 1, eps)
        (2.5 * loss).backward()
    finally:
        OutputCrossEntropy.CHUNK = old_chunk
    got = {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}
    m.zero_grad(set_to_none=True)
    lp = m(src, prev)
    mask = tgt.ne(D.PAD)
    mask[:, 0] = False
    g = -lp.gather(-1, tgt[..., None]).squeeze(-1)
    want_loss = ((1 - eps) * g - eps / lp.shape[-1] * lp.sum(-1))[mask].sum()
    (2.5 * want_loss).backward()
    want = {n: p.grad for n, p in m.named_parameters() if p.grad is not None}
    # relative to each weight's largest gradient, plus an absolute floor: some gradients
    # are 0 in exact arithmetic (k_proj biases: softmax ignores a constant) and only noise here
    worst = max(float((got[n] - want[n]).abs().max() / (want[n].abs().max() + 0.1)) for n in want)
    tap.ok(set(got) == set(want) and worst < 1e-4 and torch.allclose(loss, want_loss, rtol=1e-5),
           f"the fused loss's gradients == autograd's for all {len(want)} weights (chunks of 3 rows)",
           detail=f"worst relative difference {worst:.2e}; missing {set(want) - set(got)}")
    try:
        _, nll = forward_loss(m, src, prev, scored, targets, 1, eps)
        nll.backward()
        tap.ok(False, "backpropagating the nll is refused")
    except RuntimeError as e:
        tap.ok("not differentiable" in str(e), "backpropagating the nll is refused", detail=str(e))


def test_dropout():
    """model.dropout (a byte of randomness an element on the CPU): drops p of the
    elements (p rounded to 1/256), keeps the mean, passes the gradient only where
    kept, is reproducible from torch's seed, and is the identity in eval mode."""
    from dmt.model import dropout
    x = torch.ones(1000, 1000, requires_grad=True)
    torch.manual_seed(3)
    y = dropout(x, 0.2, True)
    dropped = float((y == 0).float().mean())
    y.sum().backward()
    tap.ok(abs(dropped - 51 / 256) < 0.003 and abs(float(y.mean()) - 1) < 0.005,
           "dropout drops 51/256 for p 0.2 and keeps the mean", detail=f"{dropped} {float(y.mean())}")
    tap.ok(bool(((x.grad == 0) == (y == 0)).all()), "dropout's gradient flows only where kept")
    torch.manual_seed(3)
    tap.ok(torch.equal(dropout(torch.ones(1000, 1000), 0.2, True), y.detach()), "dropout is reproducible from the seed")
    odd = dropout(torch.ones(5, 3), 0.5, True)  # 15 elements: not a multiple of the 7 bytes a word gives
    tap.ok(odd.shape == (5, 3) and dropout(x, 0.2, False) is x, "odd sizes work; eval mode is the identity")


def test_source_gain(data):
    """validate()'s source gain: clearly positive for the shipped model, exactly 0 once
    the decoder's cross-attention output is zeroed (the source cannot matter)."""
    import sentencepiece as spmlib
    from dmt import modeldir
    model_dir = os.path.join(REPO, "models", "default")
    sp = spmlib.SentencePieceProcessor(model_file=os.path.join(model_dir, "sentencepiece.model"))
    text = D.read_split(data, "val")
    n = 16
    val = {lang: [np.asarray(x, np.int32) for x in sp.encode(text[lang][:n], out_type=int)] for lang in D.LANGS}
    bleu = train.load_bleu()[0]
    m = modeldir.load(model_dir).eval()
    sets = multi30k_val_sets(val, text, n)
    scores, nll = validate(m, sp, sets, bleu, batch=n)
    tap.ok(scores["source_gain"] > 1.0, f"source gain {scores['source_gain']:.2f} nats > 1 for the shipped model")
    with torch.no_grad():
        for layer in m.decoder.layers:
            layer.encoder_attn.out_proj.weight.zero_()
            layer.encoder_attn.out_proj.bias.zero_()
    blind, _ = validate(m, sp, sets, bleu, batch=n)
    tap.ok(abs(blind["source_gain"]) < 1e-6, f"source gain {blind['source_gain']:.2g} for a source-blind model")


def test_amp_choice():
    """--amp auto's decision: a CPU with native bf16 keeps bf16 unless it measures
    clearly slower; one without needs a clear gain."""
    cases = [((0.99, True), "bf16"), ((7.4, True), "bf16"), ((0.7, True), "none"),
             ((1.1, False), "none"), ((1.2, False), "bf16"), ((0.04, False), "none")]
    got = [(args, amp_choice(*args)) for args, _ in cases]
    tap.ok(all(amp_choice(*args) == want for args, want in cases),
           "--amp auto: native bf16 keeps bf16 down to 0.8x measured (a busy machine's noise), "
           "without it bf16 only from 1.15x", detail=str(got))


def main():
    test_amp_choice()
    test_batches()
    test_general_pairs()
    test_joined_pairs()
    test_ui_pairs()
    test_split_digits_vocab()
    test_loss()
    test_loss_gradients()
    test_dropout()
    test_release_freed_memory()
    test_allocator_choice()
    test_end_to_end()
    return tap.done()


# Freed heap memory that malloc keeps: 100 blocks of 4 MiB from the heap (an 8 MiB
# free first raises glibc's mmap threshold, as a training step's large frees do), each
# followed by a small block still in use, so that freeing them cannot shrink the heap.
FRAGMENTED_HEAP = r"""
import ctypes, json, sys
sys.path.insert(0, sys.argv[1])
from dmt.memory import release_freed_memory, rss_gib
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
libc.free(libc.malloc(8 << 20))
blocks, pins = [], []
for _ in range(100):
    blocks.append(libc.malloc(4 << 20))
    pins.append(libc.malloc(64 << 10))
for b in blocks:
    libc.memset(b, 1, 4 << 20)
for b in blocks:
    libc.free(b)
before = rss_gib()
released = release_freed_memory()
print(json.dumps({"before": before, "after": rss_gib(), "released": released}))
"""


def test_release_freed_memory():
    """tools/dmt/memory.py: what train.py calls after each step gives freed heap memory back,
    under glibc's malloc and under tcmalloc (MallocExtension_ReleaseFreeMemory)."""
    for name, preload in (("glibc malloc", None), ("tcmalloc", TCMALLOC)):
        if preload and not os.path.isfile(preload):
            tap.skip(f"{preload} missing (scripts/deps.sh test installs libtcmalloc-minimal4)")
            continue
        env = dict(os.environ, LD_PRELOAD=preload) if preload else None
        r = subprocess.run([sys.executable, "-c", FRAGMENTED_HEAP, os.path.join(REPO, "tools")],
                           capture_output=True, text=True, timeout=60, env=env)
        m = json.loads(r.stdout) if r.returncode == 0 else {}
        tap.ok(m.get("released") is True and m["before"] - m["after"] > 0.3,
               f"release_freed_memory() hands 400 MiB of freed heap blocks back to the kernel under {name} "
               "(resident memory falls)", detail=f"{m} {r.stderr[-800:]}")


# use_allocator(CHOICE, TCMALLOC_PATH) in a process that prints the malloc it ends up on
USE_ALLOCATOR = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from dmt.memory import loaded_allocator, use_allocator
note = use_allocator(sys.argv[2], tcmalloc=sys.argv[3])
print(json.dumps({"note": note, "loaded": loaded_allocator(), "preload": os.environ.get("LD_PRELOAD", "")}))
"""


def use_allocator_in_child(choice, tcmalloc=TCMALLOC, preload=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    try:
        r = subprocess.run([sys.executable, "-c", USE_ALLOCATOR, os.path.join(REPO, "tools"), choice, tcmalloc],
                           capture_output=True, text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired as e:  # a restart loop
        r = subprocess.CompletedProcess(e.cmd, -1, "", f"timed out after {e.timeout} s")
    out = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
    return r, out


def test_allocator_choice():
    """train.py --allocator: the process restarts itself under the malloc asked for,
    before torch loads; a refused preload must not restart it forever."""
    tmp = tempfile.mkdtemp(prefix="deepmt-alloc-")
    try:
        missing = os.path.join(tmp, "libtcmalloc_minimal.so.4")
        r, out = use_allocator_in_child("auto", tcmalloc=missing)
        tap.ok(out.get("loaded") == "glibc" and "missing" in out.get("note", "") and "deps.sh" in out["note"],
               "--allocator auto without tcmalloc installed: glibc, and the log says what installing it gains",
               detail=f"{out} {r.stderr[-500:]}")
        r, _ = use_allocator_in_child("tcmalloc", tcmalloc=missing)
        tap.ok(r.returncode != 0 and "libtcmalloc-minimal4" in r.stderr,
               "--allocator tcmalloc without it installed: a clear error, not a silent fall-back",
               detail=r.stderr[-500:])
        not_a_library = os.path.join(tmp, "libfake_malloc.so")
        with open(not_a_library, "w") as f:
            f.write("not an ELF file\n")
        r, out = use_allocator_in_child(not_a_library)
        tap.ok(r.returncode == 0 and out.get("loaded") == "glibc" and "failed" in out.get("note", ""),
               "a malloc library the loader refuses: one restart, then glibc and a note (no restart loop)",
               detail=f"rc {r.returncode} {out} {r.stderr[-500:]}")
        if not os.path.isfile(TCMALLOC):
            tap.skip(f"{TCMALLOC} missing (scripts/deps.sh test installs libtcmalloc-minimal4): "
                     "the restart under tcmalloc not run")
            return
        r, out = use_allocator_in_child("auto")
        tap.ok(out.get("loaded") == "tcmalloc" and TCMALLOC in out.get("preload", "")
               and "preloaded by a restart" in out.get("note", ""),
               "--allocator auto: the process restarts itself with tcmalloc preloaded",
               detail=f"{out} {r.stderr[-500:]}")
        r, out = use_allocator_in_child("auto", preload=TCMALLOC)
        tap.ok(out.get("loaded") == "tcmalloc" and "preloaded by the caller" in out.get("note", ""),
               "--allocator auto under a caller's LD_PRELOAD (make train): kept, no restart",
               detail=f"{out} {r.stderr[-500:]}")
        r, out = use_allocator_in_child("system", preload=TCMALLOC)
        tap.ok(out.get("loaded") == "glibc" and TCMALLOC not in out.get("preload", "x" + TCMALLOC),
               "--allocator system under an inherited tcmalloc preload (a bench's glibc row): "
               "restarted without it", detail=f"{out} {r.stderr[-500:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args, **kw):
    return subprocess.run([sys.executable, os.path.join(REPO, "tools", "train.py")] + args,
                          capture_output=True, text=True, timeout=600, **kw)


def test_bench(data, spm_path):
    """train.py bench: one row a configuration, here one under each malloc (the bench
    itself runs under tcmalloc, so the glibc row's process must drop the preload)."""
    r = run(["bench", "--data", data, "--spm", spm_path, "--encoder-layers", "1", "--decoder-layers", "1",
             "--d-model", "32", "--heads", "2", "--ffn-dim", "64", "--amps", "none", "--thread-list", "1",
             "--max-tokens-list", "300", "--steps", "2", "--warmup", "1", "--allocators", "auto,system"])
    rows = [line.split("|")[5].strip() for line in r.stdout.splitlines() if line.startswith("| fp32 ")]
    want = ["tcmalloc" if os.path.isfile(TCMALLOC) else "glibc", "glibc"]
    tap.ok(r.returncode == 0 and rows == want and "fastest:" in r.stdout,
           f"train.py bench --allocators auto,system: a row each, on {want[0]} and on glibc",
           detail=r.stdout[-1500:] + r.stderr[-1500:])


def test_nll(tmp, data, spm_path, run_dir):
    """train.py nll: per-set NLL of two snapshots, each equal to what validate() gives
    for that set alone."""
    import sentencepiece as spm
    snaps = [os.path.join(run_dir, "snapshots", f) for f in ("step-00000005.pt", "step-00000006.pt")]
    out = os.path.join(tmp, "nll.json")
    r = run(["nll", *snaps, "--val-lines", "12", "--general-val-lines", "0", "--threads", "1", "--out", out])
    rows = json.load(open(out)) if r.returncode == 0 else []
    names = ["en-de", "en-fr", "de-en", "cs-en"]
    tap.ok(len(rows) == 2 and [x["step"] for x in rows] == [5, 6]
           and all(set(names + ["mean multi30k"]) == set(x["nll"]) for x in rows) and "step 6" in r.stdout,
           "train.py nll: a row per checkpoint with the NLL of every validation set", detail=r.stdout[-800:] + r.stderr[-800:])
    if len(rows) != 2:
        return
    out2 = os.path.join(tmp, "nll-de-fr.json")
    r = run(["nll", snaps[1], "--val-lines", "12", "--general-val-lines", "0", "--threads", "1",
             "--multi30k-directions", "de-fr,fr-cs,en-de", "--out", out2])
    other = json.load(open(out2))[0]["nll"] if r.returncode == 0 else {}
    tap.ok(set(other) == {"de-fr", "fr-cs", "en-de", "mean multi30k", "mean multi30k without en"}
           and abs(other["en-de"] - rows[1]["nll"]["en-de"]) < 1e-6
           and abs(other["mean multi30k without en"] - (other["de-fr"] + other["fr-cs"]) / 2) < 1e-9,
           "train.py nll --multi30k-directions: the pairs asked for, and their mean without English",
           detail=f"{other} {r.stderr[-500:]}")
    junk = os.path.join(tmp, "junk.pt")
    with open(snaps[1], "rb") as f, open(junk, "wb") as g:
        g.write(f.read(3000))  # a checkpoint cut short
    answers = [run(["nll", p, "--general-val-lines", "0"]) for p in (junk, os.path.join(tmp, "missing.pt"))]
    tap.ok(all(x.returncode == 1 and "Traceback" not in x.stderr for x in answers)
           and "not a training checkpoint" in answers[0].stderr and "cannot read" in answers[1].stderr,
           "train.py: a truncated or missing checkpoint is named with the reason, no traceback",
           detail=" | ".join(x.stderr[-300:] for x in answers))
    bad = run(["nll", snaps[1], "--general-val-lines", "0", "--multi30k-directions", "de-de"])
    tap.ok(bad.returncode != 0 and "--multi30k-directions de-de" in bad.stderr,
           "train.py nll: a direction from a language to itself is refused, named", detail=bad.stderr[-300:])
    sp = spm.SentencePieceProcessor(model_file=spm_path)
    cache = os.path.join(os.path.dirname(spm_path), "data")
    sets = build_val_sets(sp, data, cache, 128, 12)
    st = load_state(snaps[1])
    model = Transformer(st["cfg"])
    model.load_state_dict(st["model"])
    alone = {v[0]: validate(model, sp, [v], lambda h, r: {"score": 0.0}, amp=st.get("amp"))[1] for v in sets}
    got = rows[1]["nll"]
    tap.ok(all(abs(got[n] - alone[n]) < 1e-4 for n in names)
           and abs(got["mean multi30k"] - sum(alone.values()) / 4) < 1e-4 and rows[0]["nll"] != got,
           "train.py nll: each set's NLL is validate()'s for that set alone; the snapshots differ",
           detail=f"{got} vs {alone}")
    # an exported model directory (F16, as shipped), measured with a checkpoint's run (--like)
    from dmt import modeldir
    exported = os.path.join(tmp, "nll-export")
    ex = run(["export", "--run", run_dir, "--checkpoint", os.path.join(run_dir, "checkpoint.pt"), "--out", exported,
              "--spm", spm_path])
    out3 = os.path.join(tmp, "nll-dir.json")
    r = run(["nll", exported, "--like", snaps[1], "--val-lines", "12", "--general-val-lines", "0", "--threads", "1",
             "--out", out3])
    got = json.load(open(out3))[0]["nll"] if ex.returncode == 0 and r.returncode == 0 else {}
    m = modeldir.load(exported) if ex.returncode == 0 else None
    alone = {v[0]: validate(m, sp, [v], lambda h, r: {"score": 0.0}, amp=st.get("amp"))[1] for v in sets} if m else {}
    tap.ok(bool(got) and all(abs(got[n] - alone[n]) < 1e-4 for n in names),
           "train.py nll: a model directory's NLL (its F16 weights) with --like a checkpoint of its run",
           detail=f"{got} {alone} {ex.stderr[-300:]} {r.stderr[-500:]}")
    r = run(["nll", exported, "--general-val-lines", "0"])
    tap.ok(r.returncode != 0 and "--like" in r.stderr and "Traceback" not in r.stderr,
           "train.py nll: model directories alone are refused, naming --like", detail=r.stderr[-300:])


def test_cooldown(tmp, common, main_state):
    """--cooldown: a branch from a run's checkpoint whose rate falls linearly to 0, in its
    own folder; the main run's checkpoint stays as it was, and an interrupted branch
    resumes into the same decay."""
    main_ckpt = os.path.join(tmp, "whole", "checkpoint.pt")
    with open(main_ckpt, "rb") as f:
        before = f.read()
    # an end time a minute ago: tomorrow, so the run says so (it stops by the cooldown first)
    past = time.gmtime(time.time() - 60)
    cool = run(["train", "--run", os.path.join(tmp, "cool"), "--resume", main_ckpt, "--cooldown", "4",
                "--time-budget", f"{past.tm_hour}:{past.tm_min:02d}"] + common)
    tap.ok("is an end time in UTC, more than 12 hours away" in cool.stdout,
           "--time-budget H:MM that is tomorrow is named as an end time, with the duration's spelling",
           detail=cool.stdout[-600:])
    rates = [float(m) for m in re.findall(r"\| lr ([0-9.e+-]+) \|", cool.stdout)]
    lr6 = train.lr_at(6, argparse.Namespace(lr=float(main_state["args"]["lr"]), warmup=main_state["args"]["warmup"]))
    want = [lr6, 0.75 * lr6, 0.5 * lr6, 0.25 * lr6]
    c = load_state(os.path.join(tmp, "cool", "checkpoint.pt")) if cool.returncode == 0 else {}
    tap.ok(cool.returncode == 0 and c.get("step") == 10 and tuple(c.get("cooldown") or ()) == (6, 4)
           and len(rates) == 4 and all(abs(r - w) <= 0.006 * w for r, w in zip(rates, want))
           and "cooldown done after step 10" in cool.stdout,
           "--cooldown 4 from step 6: rates 1, 3/4, 1/2, 1/4 of the schedule's at step 6, then the branch stops",
           detail=f"rates {rates} want {want} step {c.get('step')} {cool.stdout[-800:]} {cool.stderr[-800:]}")
    with open(main_ckpt, "rb") as f:
        tap.ok(f.read() == before, "the branch leaves the main run's checkpoint as it was")
    part = run(["train", "--run", os.path.join(tmp, "cool2"), "--resume", main_ckpt, "--cooldown", "4",
                "--max-steps", "8"] + common)
    rest = run(["train", "--run", os.path.join(tmp, "cool2"), "--resume"] + common)
    d = load_state(os.path.join(tmp, "cool2", "checkpoint.pt")) if rest.returncode == 0 else {"model": {}}
    tap.ok(part.returncode == 0 and d.get("step") == 10 and bool(c)
           and all(torch.equal(c["model"][k], d["model"][k]) for k in c["model"]),
           "a cooldown stopped at step 8 and resumed (no --cooldown given) ends with the unbroken branch's weights",
           detail=part.stderr[-600:] + rest.stdout[-800:] + rest.stderr[-600:])
    same = run(["train", "--run", os.path.join(tmp, "whole"), "--resume", "--cooldown", "4"] + common)
    with open(main_ckpt, "rb") as f:
        untouched = f.read() == before
    tap.ok(same.returncode != 0 and "as a branch in its own folder" in same.stderr and untouched,
           "--cooldown in the main run's own folder is refused, saying how to branch", detail=same.stderr[-600:])
    out = os.path.join(tmp, "cool-model")
    ex = run(["export", "--run", os.path.join(tmp, "cool"), "--checkpoint", os.path.join(tmp, "cool", "checkpoint.pt"),
              "--out", out])
    src = json.load(open(os.path.join(out, "config.json")))["source"] if ex.returncode == 0 else {}
    tap.ok(src.get("cooldown") == [6, 4] and src.get("step") == 10,
           "an exported cooldown branch names where its cooldown began and how long it lasted",
           detail=f"{src} {ex.stderr[-500:]}")
    fresh = run(["train", "--run", os.path.join(tmp, "cool3"), "--cooldown", "4"] + common)
    tap.ok(fresh.returncode != 0 and "--resume CHECKPOINT" in fresh.stderr,
           "--cooldown without --resume is refused", detail=fresh.stderr[-600:])


def test_end_to_end():
    shared = os.environ.get("DEEPMT_SHARED", os.path.join(REPO, "..", "shared"))
    data = os.path.join(shared, "data", "multi30k")
    if not os.path.exists(os.path.join(data, "train.en.gz")):
        tap.skip(f"no Multi30k at {data} (set DEEPMT_SHARED): training end to end not run")
        return
    test_source_gain(data)
    tmp = tempfile.mkdtemp(prefix="deepmt-train-")
    try:
        os.makedirs(os.path.join(tmp, "spm"))
        spm = os.path.join(tmp, "spm", "spm.model")  # the token cache goes beside it
        shutil.copy(os.path.join(REPO, "models", "default", "sentencepiece.model"), spm)
        common = ["--data", data, "--spm", spm, "--encoder-layers", "2", "--decoder-layers", "1",
                  "--d-model", "32", "--heads", "2", "--ffn-dim", "64", "--max-tokens", "300",
                  "--val-every", "0", "--log-every", "1", "--threads", "1", "--device", "cpu"]
        # bf16 autocast for both runs; the resume says nothing (--amp auto) and must keep
        # bf16 from the checkpoint: a fresh measurement could pick fp32 and fork the run.
        whole = run(["train", "--run", os.path.join(tmp, "whole"), "--max-steps", "6", "--amp", "bf16",
                     "--ckpt-every", "0", "--keep-snapshots", "3"] + common)
        tap.ok(whole.returncode == 0, "6 training steps run", detail=whole.stdout[-1500:] + whole.stderr[-1500:])
        want = "allocator: tcmalloc (" if os.path.isfile(TCMALLOC) else "allocator: glibc malloc: "
        tap.ok(want in whole.stdout, f"train.py's log names the malloc it runs on ('{want}...')",
               detail=whole.stdout[:3000])
        tap.ok(re.search(r"step 6 \| .* \| rss \d+\.\d GiB \(peak \d+\.\d, 0 releases\)", whole.stdout) is not None,
               "the step log says the process's resident memory, its peak and the releases (none below the ceiling)",
               detail=whole.stdout[-600:])
        valid = run(["train", "--run", os.path.join(tmp, "valid"), "--max-steps", "2", "--amp", "bf16"] + common
                    + ["--val-every", "1e-9", "--val-lines", "8"])
        tap.ok(valid.returncode == 0 and valid.stdout.count("valid step 1 ") == 1
               and valid.stdout.count("valid step 2 ") == 1,
               "a run that validated at its last step does not validate that step again at its end",
               detail=valid.stdout[-1500:] + valid.stderr[-800:])
        trimmed = run(["train", "--run", os.path.join(tmp, "trimmed"), "--max-steps", "6", "--amp", "bf16",
                       "--memory-ceiling", "0"] + common)
        k = load_state(os.path.join(tmp, "trimmed", "checkpoint.pt")) if trimmed.returncode == 0 else {"model": {}}
        w = load_state(os.path.join(tmp, "whole", "checkpoint.pt"))
        tap.ok("6 releases)" in trimmed.stdout and bool(k["model"])
               and all(torch.equal(w["model"][n], k["model"][n]) for n in w["model"]),
               "--memory-ceiling 0 releases freed memory after each step and trains to the same weights",
               detail=trimmed.stdout[-800:] + trimmed.stderr[-800:])
        part = run(["train", "--run", os.path.join(tmp, "part"), "--max-steps", "3", "--amp", "bf16"] + common)
        rest = run(["train", "--run", os.path.join(tmp, "part"), "--max-steps", "6", "--resume"] + common)
        tap.ok(part.returncode == 0 and rest.returncode == 0 and "resuming" in rest.stdout,
               "3 steps, then --resume to step 6", detail=part.stderr[-1500:] + rest.stdout[-1500:] + rest.stderr[-1500:])
        tap.ok("--amp auto: bf16, as the run was checkpointed with" in rest.stdout,
               "a resume with --amp auto keeps the checkpoint's bf16", detail=rest.stdout[-1500:])
        a = load_state(os.path.join(tmp, "whole", "checkpoint.pt"))
        b = load_state(os.path.join(tmp, "part", "checkpoint.pt"))
        same = a["step"] == b["step"] == 6 and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
        tap.ok(same, "stopped + resumed ends with exactly the weights of an unbroken run",
               detail=f"steps {a['step']} {b['step']}")
        flaky = run(["train", "--run", os.path.join(tmp, "flaky"), "--max-steps", "6", "--amp", "bf16",
                     "--inject-failures", "3:2"] + common)
        f = load_state(os.path.join(tmp, "flaky", "checkpoint.pt")) if flaky.returncode == 0 else {"model": {}}
        tap.ok(flaky.returncode == 0 and f.get("step") == 6 and "trying the batch again (2 of 3)" in flaky.stdout
               and all(torch.equal(a["model"][k], f["model"][k]) for k in a["model"]),
               "a step whose kernels throw is tried again: the run ends with the weights of one that never failed",
               detail=flaky.stdout[-1200:] + flaky.stderr[-800:])
        stubborn = run(["train", "--run", os.path.join(tmp, "stubborn"), "--max-steps", "6", "--amp", "bf16",
                        "--inject-failures", "2:9", "--step-retries", "3"] + common)
        st = load_state(os.path.join(tmp, "stubborn", "checkpoint.pt")) \
            if os.path.exists(os.path.join(tmp, "stubborn", "checkpoint.pt")) else {}
        tap.ok(stubborn.returncode != 0 and "step 2 failed 4 times in a row" in stubborn.stdout and st.get("step") == 1,
               "a failure that repeats stops the run with a checkpoint of the last good step",
               detail=stubborn.stdout[-1200:] + f" step {st.get('step')}")
        test_cooldown(tmp, common, a)
        snaps = sorted(os.listdir(os.path.join(tmp, "whole", "snapshots")))
        tap.ok(snaps == ["step-00000004.pt", "step-00000005.pt", "step-00000006.pt"],
               "a snapshot at each checkpoint, the newest --keep-snapshots kept", detail=str(snaps))
        avg = run(["average", "--run", os.path.join(tmp, "whole"), "--last", "2"])
        m = load_state(os.path.join(tmp, "whole", "average.pt")) if avg.returncode == 0 else {"model": {}}
        s5 = load_state(os.path.join(tmp, "whole", "snapshots", "step-00000005.pt"))
        s6 = load_state(os.path.join(tmp, "whole", "snapshots", "step-00000006.pt"))
        good = bool(m["model"]) and all(torch.allclose(m["model"][k], (s5["model"][k] + s6["model"][k]) / 2, atol=1e-7)
                                        for k in s6["model"])
        moved = any(not torch.equal(s5["model"][k], s6["model"][k]) for k in s6["model"])
        tap.ok(good and moved and m.get("averaged_steps") == [5, 6] and m.get("step") == 6
               and all(torch.equal(s6["model"][k], a["model"][k].float()) for k in a["model"]),
               "average --last 2: the element-wise mean of the two newest snapshots (the newest = the checkpoint)",
               detail=avg.stdout[-800:] + avg.stderr[-800:])
        test_nll(tmp, data, spm, os.path.join(tmp, "whole"))
        test_bench(data, spm)
        share = run(["train", "--run", os.path.join(tmp, "share"), "--max-steps", "1", "--multi30k-share", "0.5"]
                    + common)
        tap.ok(share.returncode != 0 and "--multi30k-share" in share.stderr and "--general" in share.stderr,
               "--multi30k-share below 1 without --general is refused, saying why", detail=share.stderr[-500:])
        for value in ("0.2", "1"):
            pivot = run(["train", "--run", os.path.join(tmp, "pivot"), "--max-steps", "1", "--pivot-share", value]
                        + common)
            tap.ok(pivot.returncode != 0 and "--pivot-share" in pivot.stderr,
                   f"--pivot-share {value} without --general is refused, saying why", detail=pivot.stderr[-500:])
        lone = os.path.join(tmp, "lone-general")
        os.makedirs(os.path.join(lone, "train"))
        for lang, lines in (("en", ["A dog.", "A cat."]), ("de", ["Ein Hund.", "Eine Katze."])):
            with open(os.path.join(lone, "train", f"en-de.{lang}"), "w") as f:
                f.write("\n".join(lines) + "\n")
        pivot = run(["train", "--run", os.path.join(tmp, "pivot"), "--max-steps", "1", "--pivot-share", "0.2",
                     "--general", lone] + common)
        tap.ok(pivot.returncode != 0 and "nothing to join" in pivot.stderr,
               "--pivot-share with one English pair is refused: nothing to join", detail=pivot.stderr[-500:])
        too_many = run(["average", "--run", os.path.join(tmp, "whole"), "--last", "4"])
        tap.ok(too_many.returncode != 0 and "3 snapshots" in too_many.stderr,
               "average --last beyond the snapshots kept is refused, saying how many there are",
               detail=too_many.stderr[-500:])
        avg_out = os.path.join(tmp, "avg-model")
        ex = run(["export", "--run", os.path.join(tmp, "whole"), "--checkpoint",
                  os.path.join(tmp, "whole", "average.pt"), "--out", avg_out])
        cfg_avg = json.load(open(os.path.join(avg_out, "config.json"))) if ex.returncode == 0 else {}
        tap.ok(cfg_avg.get("source", {}).get("averaged_steps") == [5, 6],
               "an exported average names the steps it averaged", detail=ex.stderr[-800:])
        out = os.path.join(tmp, "model")
        ex = run(["export", "--run", os.path.join(tmp, "whole"), "--checkpoint",
                  os.path.join(tmp, "whole", "checkpoint.pt"), "--out", out])
        tap.ok(ex.returncode == 0 and os.path.exists(os.path.join(out, "model.safetensors")),
               "export writes a model directory", detail=ex.stderr[-1500:])
        size = os.path.getsize(os.path.join(out, "sentencepiece.model"))
        with open(os.path.join(out, "config.json")) as f:
            noted = json.load(f)
        noted["source"]["notes"] = ["a hand-written line of history"]
        noted["batching"] = {"max_sentences": 8}
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(noted, f)
        again = run(["export", "--run", os.path.join(tmp, "whole"), "--checkpoint",
                     os.path.join(tmp, "whole", "checkpoint.pt"), "--out", out, "--spm",
                     os.path.join(out, "sentencepiece.model")])
        tap.ok(again.returncode == 0 and size > 0 and os.path.getsize(os.path.join(out, "sentencepiece.model")) == size,
               "an export over the directory its vocabulary comes from keeps the vocabulary whole",
               detail=f"{size} bytes before, {os.path.getsize(os.path.join(out, 'sentencepiece.model'))} after "
                      f"{again.stderr[-500:]}")
        exported = json.load(open(os.path.join(out, "config.json")))
        src = exported["source"]
        tap.ok(src.get("notes") == ["a hand-written line of history"] and "multi30k_share" not in src,
               "an export over a model directory keeps its source.notes; a Multi30k-only run has no Multi30k share",
               detail=f"{src}")
        tap.ok(exported.get("batching") == {"max_sentences": 8},
               "an export over a model directory of the same shape keeps its batching", detail=f"{exported}")
        mixed = load_state(os.path.join(tmp, "whole", "checkpoint.pt"))
        mixed["args"] = dict(mixed["args"], general="../general", multi30k_share=0.25, pivot_share=0.15)
        torch.save(mixed, os.path.join(tmp, "mixed.pt"))
        mixed_out = os.path.join(tmp, "mixed-model")
        ex = run(["export", "--run", os.path.join(tmp, "whole"), "--checkpoint", os.path.join(tmp, "mixed.pt"),
                  "--out", mixed_out])
        msrc = json.load(open(os.path.join(mixed_out, "config.json")))["source"] if ex.returncode == 0 else {}
        tap.ok(msrc.get("multi30k_share") == 0.25 and msrc.get("pivot_share") == 0.15 and "notes" not in msrc,
               "a run with general data: the export records its Multi30k share and its pivot share",
               detail=f"{msrc} {ex.stderr[-500:]}")
        more = run(["train", "--run", os.path.join(tmp, "more"), "--max-steps", "7", "--init-from", out] + common)
        c = load_state(os.path.join(tmp, "more", "checkpoint.pt")) if more.returncode == 0 else {}
        tap.ok(src.get("step") == 6 and src.get("target_tokens", 0) == a["tokens"] > 0 and src.get("cpu_hours", 0) > 0
               and c.get("tokens", 0) > a["tokens"] and c.get("cpu_time", 0) >= src["cpu_hours"] * 3600,
               "the export carries step, CPU hours and target tokens, and a run continued from it keeps counting",
               detail=f"{src} {c.get('tokens')} {c.get('cpu_time')} {more.stderr[-800:]}")
        tap.ok(c.get("rewarm_from") == 6,
               "a run continued from an export records where its fresh optimizer started (the re-warm-up)",
               detail=f"rewarm_from {c.get('rewarm_from')}")
        ns = argparse.Namespace(lr=1e-3, warmup=4, rewarm=200)
        full = train.lr_at(7, ns)
        tap.ok(train.lr_at(7, ns, 6) < full / 100 and abs(train.lr_at(106, ns, 6) - train.lr_at(106, ns) / 2) < 1e-12
               and train.lr_at(206, ns, 6) == train.lr_at(206, ns),
               "--init-from: the rate climbs from 0 to the schedule's over --rewarm steps",
               detail=f"{train.lr_at(7, ns, 6)} {full} {train.lr_at(106, ns, 6)}")
        binary = os.path.join(REPO, "build", "deepmt")
        if os.access(binary, os.X_OK):
            r = subprocess.run([binary, "translate", "-m", out, "-t", "de", "-q"], input="A dog runs.\n",
                               capture_output=True, text=True, timeout=60)
            tap.ok(r.returncode == 0, "the C engine loads and runs the exported model", detail=r.stderr)
        else:
            tap.skip("no build/deepmt: C load of the export not checked")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
