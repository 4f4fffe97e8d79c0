#!/usr/bin/python3
"""A random-init stand-in for models/default (same shape: 6+3 layers, d_model 256, FFN
1024, 4 heads, F16) with a real SentencePiece model, for `make bench` before the
trained model exists.

    bench/make_standin.py --out build/bench/standin --spm runs/spm/spm.model

Unlike tools/make_random_model.py the output projection is untied: a random model
with tied embeddings keeps repeating its last input token (here the forced
language token), which makes the output-agreement check trivial; untied, it
writes varied ids (still nonsense, and until the length limit).
"""
import argparse
import os
import sys

import sentencepiece
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from dmt import modeldir  # noqa: E402
from dmt.model import Transformer, default_config  # noqa: E402

LANGS = [("en", "English"), ("de", "German"), ("fr", "French"), ("cs", "Czech")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--spm", required=True)
    a = ap.parse_args()
    sp = sentencepiece.SentencePieceProcessor(model_file=a.spm)
    langs = [{"code": c, "name": n, "token": f"__{c}__", "id": sp.piece_to_id(f"__{c}__")} for c, n in LANGS]
    if any(l["id"] == sp.unk_id() for l in langs):
        sys.exit(f"make_standin: {a.spm} lacks a language piece (__en__ __de__ __fr__ __cs__)")
    cfg = default_config(encoder_layers=6, decoder_layers=3, d_model=256, heads=4, ffn_dim=1024,
                         vocab_size=sp.get_piece_size(), tie_output=False, languages=langs)
    model = Transformer(cfg)
    model.init_weights(torch.Generator().manual_seed(0))
    modeldir.save(model, a.out, dtype="F16", sentencepiece=a.spm, metadata={"note": "random-init bench stand-in"})
    print(f"{a.out}: random-init stand-in, vocab {cfg['vocab_size']}", file=sys.stderr)


if __name__ == "__main__":
    main()
