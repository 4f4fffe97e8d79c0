"""Beam search reference: the rules of model/beam.c, written plainly (docs/decoding.md).

One sentence at a time, with tools/dmt/model.py's incremental decoder. The C engine
decodes many sentences at once and keeps empty beam slots; here a sentence's beams
are just a list, which gives the same hypotheses. Scores are float32 sums, as in C;
the length normalisation is computed in double and rounded to float32, as in C.

    from dmt.beam import Options, search
    hyps, min_gap = search(model, src_ids, forced_id, Options(beam_size=4))
    # hyps: [(tokens, score)], best first

min_gap is the smallest score gap at any decision (candidate ranks, n-best order):
below ~1e-5, a second engine's rounding may decide the other way.
"""
import math
from dataclasses import dataclass

import numpy as np
import torch

NEG_INF = float("-inf")


@dataclass
class Options:
    beam_size: int = 4
    length_penalty: float = 1.0
    max_len_a: float = 1.2
    max_len_b: int = 10
    min_len: int = 1
    nbest: int = 1
    no_repeat_ngram_size: int = 0
    max_repeats: int = 0
    digit_of: object = None   # copy_numbers (model/beam.h): per piece id, the digit it writes or -1; None: off


REPEAT_MAX_UNIT = 8  # DMT_REPEAT_MAX_UNIT in model/beam.h
COPY_NUMBERS_MAX_RUNS = 32  # DMT_COPY_NUMBERS_MAX_RUNS


def f32(x):
    """x rounded to float32, as a Python float."""
    return float(np.float32(x))


def max_length(opt, src_len, prefix_len, max_positions):
    """floor(a * src_len + b), src_len counting </s>; capped by the positions left; >= 1."""
    n = math.floor(f32(opt.max_len_a) * src_len + opt.max_len_b)
    n = min(n, max_positions - prefix_len + 1)
    return max(n, 1)


def normalise(total, length, length_penalty):
    return f32(total / (length ** f32(length_penalty)))


def banned_tokens(tokens, n):
    """Tokens that would repeat an n-gram of `tokens` if generated next."""
    if n <= 0 or len(tokens) < n - 1:
        return set()
    tail = tokens[len(tokens) - (n - 1):]
    return {tokens[j + n - 1] for j in range(len(tokens) - n + 1) if tokens[j:j + n - 1] == tail}


def has_run(seq, unit, length):
    """True when seq holds `length` tokens in a row of unit repeated (the last copy may
    be cut short)."""
    need = (list(unit) * (length // len(unit) + 1))[:length]
    return any(seq[s:s + len(need)] == need for s in range(len(seq) - len(need) + 1))


def repeat_banned(tokens, src, max_repeats):
    """The repetition guard: tokens ending in R copies of a unit of 1..8 tokens ban the
    unit's first token, unless the source (without </s>) has that continuation too: R
    copies in a row and the unit's first token again."""
    out = set()
    if max_repeats <= 0:
        return out
    for p in range(1, REPEAT_MAX_UNIT + 1):
        if p * max_repeats > len(tokens):
            break
        unit = tokens[len(tokens) - p:]
        if all(tokens[len(tokens) - (c + 1) * p:len(tokens) - c * p] == unit for c in range(1, max_repeats)):
            if unit[0] not in out and not has_run(list(src[:-1]), unit, p * max_repeats + 1):
                out.add(unit[0])
    return out


def digit_runs(seq, digit_of):
    """The maximal runs of digit pieces in seq, as tuples of digits."""
    runs, cur = [], []
    for tok in seq:
        if digit_of[tok] >= 0:
            cur.append(int(digit_of[tok]))
        elif cur:
            runs.append(tuple(cur))
            cur = []
    if cur:
        runs.append(tuple(cur))
    return runs


def number_mask(tokens, src, digit_of, room=1 << 30, open_digits=frozenset(range(10))):
    """copy_numbers: (digits allowed next, whether anything else may follow, whether
    </s> may). A digit continues the trailing run of digits into a prefix of a source
    run that is not yet written as often as the source holds it; inside a run that is
    a proper prefix of some source run and equal to none, only digits; </s> once every
    source run is written as often as in the source. room: tokens the hypothesis may
    still generate after the next one (a number must fit); open_digits: the digits the
    earlier bans leave (with none, words may follow)."""
    run = []
    for tok in reversed(tokens):
        if digit_of[tok] < 0:
            break
        run.insert(0, int(digit_of[tok]))
    src_runs, hyp_runs = digit_runs(src[:-1], digit_of), digit_runs(tokens, digit_of)
    many = len(src_runs) > COPY_NUMBERS_MAX_RUNS
    allowed, complete = set(), not run
    for r in src_runs:
        if len(r) >= len(run) and list(r[:len(run)]) == run:
            if len(r) == len(run):
                complete = True
            elif (len(r) - len(run) - 1 <= room and r[len(run)] in open_digits
                  and (many or hyp_runs.count(r) < src_runs.count(r))):
                allowed.add(r[len(run)])
    if not allowed:
        complete = True
    eos_ok = many or all(hyp_runs.count(r) >= src_runs.count(r) for r in src_runs)
    return allowed, complete, eos_ok


def step_alignment(attn):
    """The C engine's alignment of one decoder step (forward.h dmt_decode_alignment):
    per row, the source position with the largest cross-attention weight of the last
    decoder layer, its heads averaged (first on ties), and the margin to the second."""
    mean = attn.last_probs[:, :, -1, :].float().mean(dim=1)   # [rows, Tk]
    top = torch.topk(mean, min(2, mean.shape[1]), dim=-1).values
    margin = (top[:, 0] - top[:, 1]) if mean.shape[1] > 1 else top[:, 0]
    return [int(torch.nonzero(r == r.max())[0]) for r in mean], margin.tolist()


def search(model, src, forced, opt, alignments=None):
    """src: ids ending in </s>; forced: a token id or -1. -> ([(tokens, score)], min_gap).
    With a list as alignments, it receives each returned hypothesis' (positions,
    margins): the source position each token was aligned to (step_alignment)."""
    cfg = model.cfg
    attn = model.decoder.layers[-1].encoder_attn
    attn.keep_probs = True
    eos, k = cfg["eos_id"], opt.beam_size
    prefix = [cfg["decoder_start_id"]] + ([forced] if forced >= 0 else [])
    max_len = max_length(opt, len(src), len(prefix), cfg["max_positions"])
    min_gap = math.inf
    with torch.no_grad():
        enc, pad_mask = model.encode(torch.tensor([src]))
        kv = model.cross_kv(enc)
        caches = [{} for _ in model.decoder.layers]
        for pos, tok in enumerate(prefix):
            lp = model.decode(torch.tensor([[tok]]), enc, pad_mask, kv, caches, start=pos)[:, -1]
        al, mg = step_alignment(attn)
        beams = [([], 0.0)]           # (generated tokens, float32 sum)
        beam_al = [([], [])]          # their alignments and margins
        pool = []                     # (tokens, normalised score), in the order they were added
        pool_al = []
        n_finished = 0
        for t in range(1, max_len + 1):
            rows = lp.float().numpy()
            cands = []                # (sum, token, beam)
            for b, (tokens, total) in enumerate(beams):
                row = rows[b].copy()
                if cfg["pad_id"] != eos:
                    row[cfg["pad_id"]] = NEG_INF
                if cfg["bos_id"] != eos:
                    row[cfg["bos_id"]] = NEG_INF
                if t <= opt.min_len:
                    row[eos] = NEG_INF
                for tok in repeat_banned(tokens, src, opt.max_repeats):
                    row[tok] = NEG_INF
                for tok in banned_tokens(tokens, opt.no_repeat_ngram_size):
                    row[tok] = NEG_INF
                if opt.digit_of is not None:
                    is_digit = opt.digit_of >= 0
                    open_digits = set(int(d) for d in opt.digit_of[is_digit & (row > NEG_INF)])
                    allowed, complete, eos_ok = number_mask(tokens, src, opt.digit_of, max_len - t, open_digits)
                    row[is_digit & ~np.isin(opt.digit_of, list(allowed))] = NEG_INF
                    if not complete:
                        row[~is_digit] = NEG_INF
                    elif not eos_ok:
                        row[eos] = NEG_INF
                sums = np.float32(total) + row          # float32 addition, as in C
                for tok in range(len(row)):
                    if sums[tok] > NEG_INF:
                        cands.append((float(sums[tok]), tok, b))
            cands.sort(key=lambda c: (-c[0], c[1], c[2]))
            for r in range(min(2 * k, len(cands) - 1)):
                min_gap = min(min_gap, cands[r][0] - cands[r + 1][0])
            new_beams, parents, new_al = [], [], []
            for r, (total, tok, b) in enumerate(cands[:2 * k]):
                if tok == eos:
                    if r < k and n_finished < k:
                        pool.append((beams[b][0], normalise(total, t, opt.length_penalty)))
                        pool_al.append(beam_al[b])
                        n_finished += 1
                elif len(new_beams) < k:
                    new_beams.append((beams[b][0] + [tok], total))
                    new_al.append((beam_al[b][0] + [al[b]], beam_al[b][1] + [mg[b]]))
                    parents.append(b)
            if not new_beams and not pool:
                # every continuation masked (contradicting rules): the beams as they stand
                pool += [(tokens, normalise(total, max(t - 1, 1), opt.length_penalty)) for tokens, total in beams]
                pool_al += beam_al
            if n_finished >= k or not new_beams:
                break
            if t == max_len:          # cut off: the live beams as they are
                pool += [(tokens, normalise(total, t, opt.length_penalty)) for tokens, total in new_beams]
                pool_al += new_al
                break
            index = torch.tensor(parents)
            for cache in caches:
                cache["k"], cache["v"] = cache["k"][index], cache["v"][index]
            beams, beam_al = new_beams, new_al
            n = len(beams)
            pos = len(prefix) + t - 1
            last = torch.tensor([[tokens[-1]] for tokens, _ in beams])
            lp = model.decode(last, enc.expand(n, -1, -1), pad_mask.expand(n, -1),
                              [(a.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)) for a, v in kv],
                              caches, start=pos)[:, -1]
            al, mg = step_alignment(attn)
    attn.keep_probs = False
    order = sorted(range(len(pool)), key=lambda i: -pool[i][1])   # stable: equal scores keep their order
    ranked = [pool[i] for i in order]
    keep = ranked[:opt.nbest]
    if alignments is not None:
        alignments[:] = [pool_al[i] for i in order[:opt.nbest]]
    for r in range(min(len(keep), len(ranked) - 1)):
        min_gap = min(min_gap, ranked[r][1] - ranked[r + 1][1])
    return keep, min_gap
