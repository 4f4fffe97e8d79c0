#!/usr/bin/env python3
"""Write the golden fixtures the C tests compare against (make golden).

Each case is a random-init model directory (DeepNorm init with beta) plus
golden.json: token ids and what the PyTorch reference computes for them -- encoder
states, teacher-forced decoder log-probs and the same decoded step by step with the
KV cache. Outputs are computed from the weights as stored (F16/BF16 rounding
included), by reloading the written directory.
"""
import argparse
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmt import modeldir  # noqa: E402
from dmt.model import Transformer, default_config  # noqa: E402

LANGS = [("en", "English"), ("de", "German"), ("fr", "French"), ("cs", "Czech")]

CASES = {
    # name: (config overrides, storage dtype)
    "deepnorm-6x6": (dict(encoder_layers=6, decoder_layers=6, d_model=32, heads=4, ffn_dim=64), "F32"),
    "post-4x3-learned-untied": (dict(encoder_layers=4, decoder_layers=3, d_model=32, heads=2, ffn_dim=48,
                                     normalization="post", positions="learned", share_embeddings=False,
                                     tie_output=False), "F32"),
    "pre-3x3-lnemb": (dict(encoder_layers=3, decoder_layers=3, d_model=32, heads=4, ffn_dim=64,
                           normalization="pre", layernorm_embedding=True, tie_output=False), "F32"),
    "gelu-deepnorm-4x2-bf16": (dict(encoder_layers=4, decoder_layers=2, d_model=32, heads=4, ffn_dim=64,
                                    activation="gelu", embed_scale=1.0), "BF16"),
    "deepnorm-6x6-f16": (dict(encoder_layers=6, decoder_layers=6, d_model=48, heads=4, ffn_dim=96), "F16"),
    "deep-thin-48x48-f16": (dict(encoder_layers=48, decoder_layers=48, d_model=32, heads=4, ffn_dim=64), "F16"),
}

VOCAB = 64


def make_inputs(cfg, gen):
    """3 sources (one much shorter, right-padded) and decoder inputs `</s> __lang__ y...`."""
    lo = 4 + len(LANGS)
    lengths = [9, 8, 3]
    S = max(lengths)
    src = []
    for n in lengths:
        body = torch.randint(lo, cfg["vocab_size"], (n - 1,), generator=gen).tolist()
        src.append(body + [cfg["eos_id"]] + [cfg["pad_id"]] * (S - n))
    prev = []
    for b in range(3):
        lang = cfg["languages"][b % len(LANGS)]["id"]
        prev.append([cfg["decoder_start_id"], lang] + torch.randint(lo, cfg["vocab_size"], (5,), generator=gen).tolist())
    return src, prev


def build_case(name, overrides, dtype, out_dir, seed):
    gen = torch.Generator().manual_seed(seed)
    langs = [{"code": c, "name": n, "token": f"__{c}__", "id": 4 + i} for i, (c, n) in enumerate(LANGS)]
    cfg = default_config(vocab_size=VOCAB, max_positions=64, languages=langs, **overrides)
    model = Transformer(cfg)
    model.init_weights(gen)
    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    modeldir.save(model, d, dtype)
    model = modeldir.load(d)  # the weights as stored
    src, prev = make_inputs(cfg, gen)
    s, p = torch.tensor(src), torch.tensor(prev)
    with torch.no_grad():
        enc, pad_mask = model.encode(s)
        teacher = model.decode(p, enc, pad_mask)
        kv = model.cross_kv(enc)
        caches = [{} for _ in model.decoder.layers]
        steps = [model.decode(p[:, t:t + 1], enc, pad_mask, kv, caches, start=t) for t in range(p.shape[1])]
        incremental = torch.cat(steps, dim=1)
    golden = {
        "src": src, "prev": prev,
        "encoder_out": enc.tolist(),
        "log_probs": teacher.tolist(),
        "log_probs_incremental": incremental.tolist(),
        "tolerance": 1e-4,
    }
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(golden, f)
    gap = (teacher - incremental).abs().max().item()
    print(f"{name}: {sum(t.numel() for t in model.parameters())} params, {dtype}, "
          f"teacher-forced vs incremental max diff {gap:.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/fixtures/golden")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    for i, (name, (overrides, dtype)) in enumerate(CASES.items()):
        build_case(name, overrides, dtype, args.out, args.seed + i)


if __name__ == "__main__":
    main()
