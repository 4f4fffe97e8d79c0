"""Validation of a training run (tools/train.py): greedy decoding of held-out lines
and their BLEU, Multi30k val and the general dev sets."""
import torch

from dmt import data as D
from dmt.objective import forward_loss, to_device
from dmt.precision import amp_context

VAL_DIRECTIONS = [("en", "de"), ("en", "fr"), ("de", "en"), ("cs", "en")]


@torch.no_grad()
def greedy(model, src_rows, tag_id, max_a=1.2, max_b=10):
    """Greedy decode a list of source id lists (without </s>) into target id lists."""
    dev = model.output_weight().device
    src = D.pad([list(r) + [D.EOS] for r in src_rows]).to(dev)
    enc, pad_mask = model.encode(src)
    kv = model.cross_kv(enc)
    b = src.shape[0]
    max_len = int(max_a * src.shape[1] + max_b)
    caches = [{} for _ in model.decoder.layers]
    prev = torch.tensor([[model.cfg["decoder_start_id"], tag_id]] * b, device=dev)
    out = torch.full((b, max_len), D.PAD, dtype=torch.long, device=dev)
    done = torch.zeros(b, dtype=torch.bool, device=dev)
    pos = 0
    for i in range(max_len):
        lp = model.decode(prev, enc, pad_mask, kv=kv, caches=caches, start=pos)[:, -1]
        pos += prev.shape[1]
        nxt = lp.argmax(-1)
        nxt[done] = D.PAD
        out[:, i] = nxt
        done |= nxt.eq(D.EOS)
        if bool(done.all()):
            break
        prev = nxt[:, None]
    res = []
    for row in out.tolist():
        row = [x for x in row if x != D.PAD]
        res.append(row[:row.index(D.EOS)] if D.EOS in row else row)
    return res


def multi30k_val_sets(val, val_text, n, directions=VAL_DIRECTIONS):
    """Validation sets [(name, src ids, tgt ids, tgt texts, tgt lang)] on Multi30k val."""
    return [(f"{s}-{t}", val[s][:n], val[t][:n], val_text[t][:n], t) for s, t in directions]


def pair_val_sets(sp, texts, n, prefix, max_len=128):
    """{(a, b): (lines_a, lines_b)} -> validation sets in both directions, named
    PREFIX:a-b; n lines taken evenly over each file (the en-cs file ends with Tatoeba)."""
    sets = []
    for (a, b), (la, lb) in texts.items():
        step = max(1, len(la) // n)
        la, lb = la[::step][:n], lb[::step][:n]
        ia = [x[:max_len] for x in sp.encode(la, out_type=int)]
        ib = [x[:max_len] for x in sp.encode(lb, out_type=int)]
        sets.append((f"{prefix}:{a}-{b}", ia, ib, lb, b))
        sets.append((f"{prefix}:{b}-{a}", ib, ia, la, a))
    return sets


def general_val_sets(sp, general_dir, n, max_len=128):
    """Validation sets on the general dev data (news; en-cs also Tatoeba), both
    directions: named g:en-de etc."""
    return pair_val_sets(sp, D.read_general(general_dir, "dev"), n, "g", max_len)


def joined_val_sets(sp, general_dir, n, max_len=128):
    """The dev pairs between German, French and Czech that the general dev data joins
    through identical English sentences (D.join_through; newstest2018 gives de-cs),
    both directions, named j:de-cs etc.: the directions --pivot-share trains."""
    return pair_val_sets(sp, D.join_through(D.read_general(general_dir, "dev")), n, "j", max_len)


@torch.no_grad()
def build_val_sets(sp, data, cache, max_len, val_lines, general=None, general_val_lines=0,
                   directions=VAL_DIRECTIONS):
    """The run's validation sets: Multi30k val in `directions`, plus the general dev
    sets' lines in each general direction (with --general)."""
    val = D.encode_split(sp, data, "val", cache, max_len)
    sets = multi30k_val_sets(val, D.read_split(data, "val"), val_lines, directions)
    if general and general_val_lines:
        sets += general_val_sets(sp, general, general_val_lines, max_len)
    return sets


def teacher_forced(src_rows, tgt_rows, tag, dev):
    """One batch for a teacher-forced loss: sources + </s>, decoder inputs </s> tag y,
    and the positions to score with their targets (tag y </s>, the tag not scored)."""
    src = D.pad([list(r) + [D.EOS] for r in src_rows])
    prev = D.pad([[D.EOS, tag] + list(y) for y in tgt_rows])
    scored, targets = D.scored_positions(D.pad([[tag] + list(y) + [D.EOS] for y in tgt_rows]))
    return to_device(dev, src, prev, scored, targets)


def validate(model, sp, sets, bleu_fn, batch=50, amp=None):
    """Greedy BLEU (against the raw target text) and teacher-forced NLL on each
    validation set (see multi30k_val_sets).

    Also the *source gain*: the NLL with each target paired with another line's source
    minus the true NLL. A model that ignores its source (an encoder collapsed into a
    constant, a decoder that became a language model) scores ~0 here however low its
    NLL, so this is the number that says whether the encoder is learning.
    """
    model.eval()
    dev = model.output_weight().device
    ids = D.lang_ids(sp)
    scores, nll_sum, wrong_sum, tok = {}, 0.0, 0.0, 0
    for name, src_rows, tgt_rows, tgt_text, t in sets:
        hyps, refs = [], []
        n = len(src_rows)
        for a in range(0, n, batch):
            rows = src_rows[a:a + batch]
            src, prev, scored, targets = teacher_forced(rows, tgt_rows[a:a + batch], ids[t], dev)
            with amp_context(dev, amp):
                _, nl = forward_loss(model, src, prev, scored, targets, 1, 0.0)
                _, wrong = forward_loss(model, src.roll(1, 0), prev, scored, targets, 1, 0.0)
                hyps += [sp.decode(h) for h in greedy(model, rows, ids[t])]
            nll_sum, wrong_sum, tok = nll_sum + float(nl), wrong_sum + float(wrong), tok + len(scored)
            refs += tgt_text[a:a + batch]
        scores[name] = float(bleu_fn(hyps, refs)["score"])
        scores[f"{name}:example"] = hyps[0]
    model.train()
    scores["source_gain"] = (wrong_sum - nll_sum) / max(tok, 1)
    return scores, nll_sum / max(tok, 1)


@torch.no_grad()
def nll_per_set(model, sp, sets, batch=50, amp=None):
    """Teacher-forced NLL per token on each validation set, no decoding: {name: nll}.
    Cheaper and far less noisy than greedy BLEU for telling two branches of a run apart
    (`train.py nll`)."""
    model.eval()
    dev = model.output_weight().device
    ids = D.lang_ids(sp)
    out = {}
    for name, src_rows, tgt_rows, _, t in sets:
        nll_sum, tok = 0.0, 0
        for a in range(0, len(src_rows), batch):
            src, prev, scored, targets = teacher_forced(src_rows[a:a + batch], tgt_rows[a:a + batch], ids[t], dev)
            with amp_context(dev, amp):
                _, nl = forward_loss(model, src, prev, scored, targets, 1, 0.0)
            nll_sum, tok = nll_sum + float(nl), tok + len(scored)
        out[name] = nll_sum / max(tok, 1)
    return out
