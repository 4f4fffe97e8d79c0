#!/usr/bin/env python3
"""Write the beam-search fixtures the C tests compare against (make golden).

tests/fixtures/beam/<case>/ is a small random-init model directory plus beam.json:
a batch of sources of very different lengths with mixed forced target languages (one
without a forced token), and for each run (beam 1, 4, 8; length penalties; n-best;
min length; max length; no-repeat-ngram) the n-best lists tools/dmt/beam.py finds,
sentence by sentence, with token ids and scores.

A random-init model's next-token distributions are nearly flat, so many decisions
would be near-ties that rounding could flip. The fixture models are made peakier
(the output projection scaled up, the </s> row more so, so that hypotheses end at
varied lengths), and a source is redrawn until no decision in any run is closer
than --min-gap; each sentence's smallest gap is stored in beam.json.

--tiny-out also writes tests/fixtures/tiny-model/: a random-init model with the
400-piece test tokenizer (tests/fixtures/tokenizer), for CLI and translate tests
that need text in and text out. Its translations are garbage.
"""
import argparse
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmt import modeldir  # noqa: E402
from dmt.beam import Options, search  # noqa: E402
from dmt.model import Transformer, default_config  # noqa: E402

LANGS = [("en", "English"), ("de", "German"), ("fr", "French"), ("cs", "Czech")]

CASES = {
    # name: (config overrides, storage dtype, output scale, extra </s> scale)
    "deepnorm-6x6": (dict(encoder_layers=6, decoder_layers=6, d_model=32, heads=4, ffn_dim=64, vocab_size=80,
                          tie_output=False), "F32", 5.0, 3.0),
    "post-3x2-learned-f16": (dict(encoder_layers=3, decoder_layers=2, d_model=32, heads=2, ffn_dim=48,
                                  vocab_size=96, normalization="post", positions="learned",
                                  share_embeddings=False, tie_output=False), "F16", 5.0, 3.0),
}

# Source lengths (</s> included) and forced languages of the batch: very different
# lengths, mixed targets, and one sentence without a forced token (None).
LENGTHS = [2, 4, 30, 12, 7, 22]
TARGETS = ["de", "fr", "en", "cs", None, "de"]

RUNS = [
    ("greedy", Options(beam_size=1)),
    ("greedy-ngram1", Options(beam_size=1, no_repeat_ngram_size=1)),
    ("beam4", Options(beam_size=4)),
    ("beam4-nbest4-lp0.6", Options(beam_size=4, nbest=4, length_penalty=0.6)),
    ("beam4-ngram2", Options(beam_size=4, nbest=2, no_repeat_ngram_size=2)),
    ("beam4-maxlen", Options(beam_size=4, nbest=4, max_len_a=0.5, max_len_b=2)),
    ("beam8-nbest3-lp2", Options(beam_size=8, nbest=3, length_penalty=2.0)),
    ("beam8-minlen5-lp0", Options(beam_size=8, nbest=8, min_len=5, length_penalty=0.0)),
]


def languages(ids):
    return [{"code": c, "name": n, "token": f"__{c}__", "id": ids[c]} for c, n in LANGS]


def make_model(cfg, gen, out_scale, eos_scale, mute=()):
    """Random init, output projection scaled (rows in `mute` zeroed: never likely)."""
    model = Transformer(cfg)
    model.init_weights(gen)
    with torch.no_grad():
        w = model.output_weight()
        w.mul_(out_scale)
        w[cfg["eos_id"]].mul_(eos_scale)
        for i in mute:
            w[i].zero_()
    return model


def build_case(name, overrides, dtype, out_scale, eos_scale, out_dir, seed, min_gap):
    gen = torch.Generator().manual_seed(seed)
    cfg = default_config(max_positions=64, languages=languages({c: 4 + i for i, (c, _) in enumerate(LANGS)}),
                         **overrides)
    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    modeldir.save(make_model(cfg, gen, out_scale, eos_scale), d, dtype)
    model = modeldir.load(d)  # the weights as stored
    lang = {l["code"]: l["id"] for l in cfg["languages"]}
    lo = 4 + len(LANGS)
    sources, forced, results, gaps = [], [], {r: [] for r, _ in RUNS}, []
    for length, target in zip(LENGTHS, TARGETS):
        f = lang[target] if target else -1
        for attempt in range(100):
            src = torch.randint(lo, cfg["vocab_size"], (length - 1,), generator=gen).tolist() + [cfg["eos_id"]]
            aligned = {r: [] for r, _ in RUNS}
            found = {r: search(model, src, f, opt, aligned[r]) for r, opt in RUNS}
            gap = min(g for _, g in found.values())
            if gap >= min_gap:
                break
        else:
            raise SystemExit(f"{name}: no source of length {length} without a near-tie after 100 draws")
        sources.append(src)
        forced.append(f)
        gaps.append(gap)
        for r, (hyps, g) in found.items():
            results[r].append({"min_gap": g, "nbest": [
                {"tokens": t, "score": s, "align": a, "align_margin": [round(x, 9) for x in mg]}
                for (t, s), (a, mg) in zip(hyps, aligned[r])]})
    golden = {
        "sources": sources,
        "forced": forced,
        "score_tolerance": 1e-4,
        "near_tie_threshold": min_gap,
        "runs": [{"name": r, "options": vars(opt), "results": results[r]} for r, opt in RUNS],
    }
    with open(os.path.join(d, "beam.json"), "w") as fh:
        json.dump(golden, fh, indent=1)
        fh.write("\n")
    lens = sorted({len(h["tokens"]) for r in results.values() for s in r for h in s["nbest"]})
    print(f"{name}: {len(RUNS)} runs x {len(sources)} sentences, smallest decision gap {min(gaps):.2e}, "
          f"hypothesis lengths {lens[0]}..{lens[-1]}")


def build_tiny(out, spm_path, seed):
    """A 2+2-layer random model over the 400-piece test tokenizer, stored as F16.

    Byte, control, unknown and language pieces are made unlikely outputs, and </s>
    only a little likelier, so translations are readable garbage roughly as long as
    their sources (better for ordering tests and for timing than U+FFFD soup)."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=spm_path)
    cfg = default_config(encoder_layers=2, decoder_layers=2, d_model=32, heads=4, ffn_dim=64,
                         vocab_size=sp.get_piece_size(), max_positions=256, tie_output=False,
                         languages=languages({c: sp.piece_to_id(f"__{c}__") for c, _ in LANGS}))
    gen = torch.Generator().manual_seed(seed)
    shutil.rmtree(out, ignore_errors=True)
    lang_ids = {l["id"] for l in cfg["languages"]}
    mute = [i for i in range(cfg["vocab_size"]) if i != cfg["eos_id"] and
            (sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i) or i in lang_ids)]
    modeldir.save(make_model(cfg, gen, 5.0, 1.3, mute), out, "F16", sentencepiece=spm_path)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"{out}: vocab {cfg['vocab_size']}, {size / 1e3:.0f} kB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/fixtures/beam")
    ap.add_argument("--tiny-out", default="tests/fixtures/tiny-model")
    ap.add_argument("--spm", default="tests/fixtures/tokenizer/sentencepiece.model")
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--min-gap", type=float, default=1e-4,
                    help="redraw a source until every decision is at least this far from a tie")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    for i, (name, spec) in enumerate(CASES.items()):
        build_case(name, *spec, args.out, args.seed + i, args.min_gap)
    if args.tiny_out:
        build_tiny(args.tiny_out, args.spm, args.seed + 100)


if __name__ == "__main__":
    main()
