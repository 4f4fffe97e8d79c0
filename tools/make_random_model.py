#!/usr/bin/env python3
"""Write a random-init deepmt model directory of any shape, streaming tensor by tensor.

For depth and size benchmarks (a 1,000-layer model, the DeepNet paper's 3.2B shape):
nothing is held in memory but one tensor, so a 6 GB F16 file is written with a few
hundred MB of RAM. Weights follow the DeepNorm init (Xavier normal, gain beta for
v/out/fc1/fc2); no tokenizer is written (use the model ids-only, e.g. `deepmt forward`)
unless --spm gives one whose size matches --vocab.

  tools/make_random_model.py --out /tmp/deep1000 --encoder-layers 500 --decoder-layers 500 \
      --d-model 64 --heads 4 --ffn 128 --vocab 8000
"""
import argparse
import json
import math
import os
import shutil
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmt.model import deepnorm_constants, default_config  # noqa: E402 (no torch work done here)


def tensor_specs(cfg):
    """(name, shape, init) in file order; init is ('xavier', gain) | ('normal', std) | ('ones',) | ('zeros',)."""
    d, f, v = cfg["d_model"], cfg["ffn_dim"], cfg["vocab_size"]
    beta = deepnorm_constants(cfg["encoder_layers"], cfg["decoder_layers"])
    specs = [("encoder.embed_tokens.weight", (v, d), ("normal", d ** -0.5))]
    for stack, n, b in (("encoder", cfg["encoder_layers"], beta["encoder_beta"]),
                        ("decoder", cfg["decoder_layers"], beta["decoder_beta"])):
        for i in range(n):
            p = f"{stack}.layers.{i}"
            attns = ["self_attn"] + (["encoder_attn"] if stack == "decoder" else [])
            for a in attns:
                for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    gain = b if proj in ("v_proj", "out_proj") else 1.0
                    specs.append((f"{p}.{a}.{proj}.weight", (d, d), ("xavier", gain)))
                    specs.append((f"{p}.{a}.{proj}.bias", (d,), ("zeros",)))
                specs.append((f"{p}.{a}_layer_norm.weight", (d,), ("ones",)))
                specs.append((f"{p}.{a}_layer_norm.bias", (d,), ("zeros",)))
            specs += [(f"{p}.fc1.weight", (f, d), ("xavier", b)), (f"{p}.fc1.bias", (f,), ("zeros",)),
                      (f"{p}.fc2.weight", (d, f), ("xavier", b)), (f"{p}.fc2.bias", (d,), ("zeros",)),
                      (f"{p}.final_layer_norm.weight", (d,), ("ones",)),
                      (f"{p}.final_layer_norm.bias", (d,), ("zeros",))]
    return specs


def make(spec, rng):
    name, shape, init = spec
    if init[0] == "ones":
        return np.ones(shape, np.float32)
    if init[0] == "zeros":
        return np.zeros(shape, np.float32)
    if init[0] == "normal":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(init[1])
    fan_out, fan_in = shape
    std = init[1] * math.sqrt(2.0 / (fan_in + fan_out))
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--encoder-layers", type=int, default=6)
    ap.add_argument("--decoder-layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--dtype", choices=["F32", "F16"], default="F16")
    ap.add_argument("--max-positions", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--spm", help="sentencepiece.model to copy in (its size must equal --vocab)")
    args = ap.parse_args()

    cfg = default_config(encoder_layers=args.encoder_layers, decoder_layers=args.decoder_layers,
                         d_model=args.d_model, heads=args.heads, ffn_dim=args.ffn, vocab_size=args.vocab,
                         max_positions=args.max_positions)
    specs = tensor_specs(cfg)
    size = 4 if args.dtype == "F32" else 2
    header, off = {}, 0
    for name, shape, _ in specs:
        n = int(np.prod(shape)) * size
        header[name] = {"dtype": args.dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    params = sum(int(np.prod(s)) for _, s, _ in specs)
    print(f"{args.out}: {params / 1e6:.1f}M parameters, {off / 1e9:.2f} GB of {args.dtype}", file=sys.stderr)
    rng = np.random.default_rng(args.seed)
    t0, done = time.time(), 0
    with open(os.path.join(args.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for i, spec in enumerate(specs):
            x = make(spec, rng)
            f.write(x.astype(np.float16 if args.dtype == "F16" else np.float32).tobytes())
            done += x.size
            if i % 200 == 0 or i == len(specs) - 1:
                print(f"\r  {done / params * 100:5.1f}%  {time.time() - t0:6.1f}s", end="", file=sys.stderr)
    print(file=sys.stderr)
    if args.spm:
        shutil.copy(args.spm, os.path.join(args.out, "sentencepiece.model"))


if __name__ == "__main__":
    main()
