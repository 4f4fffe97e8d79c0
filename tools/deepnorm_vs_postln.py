#!/usr/bin/env python3
"""DeepNet's core claim in one picture: a very deep Post-LN Transformer with and
without DeepNorm, same data, same learning rate, same steps.

Trains two byte-level en->de models of 50+50 layers (d_model 64) on the first
Multi30k training pairs -- one plain Post-LN (alpha 1, Xavier init), one DeepNorm
(alpha and beta from the layer counts) -- and writes both loss curves:

    tools/deepnorm_vs_postln.py --data ../shared/data/multi30k --steps 300 \
        --out docs/deepnorm-vs-postln      # -> .csv and .svg

Bytes instead of a SentencePiece vocabulary keep the script free of any tokenizer.
"""
import argparse
import csv
import gzip
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmt.model import Transformer, default_config  # noqa: E402

PAD, BOS, EOS, OFFSET = 1, 0, 2, 4  # bytes b map to ids b + OFFSET


def read_pairs(data, n, max_bytes):
    with gzip.open(os.path.join(data, "train.en.gz"), "rt", encoding="utf-8") as fe, \
            gzip.open(os.path.join(data, "train.de.gz"), "rt", encoding="utf-8") as fd:
        pairs = []
        for en, de in zip(fe, fd):
            en, de = en.strip().encode(), de.strip().encode()
            if len(en) < max_bytes and len(de) < max_bytes:
                pairs.append(([b + OFFSET for b in en] + [EOS], [b + OFFSET for b in de] + [EOS]))
            if len(pairs) == n:
                break
    return pairs


def batches(pairs, size, steps, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(len(pairs), (size,), generator=g).tolist()
        src = [pairs[i][0] for i in idx]
        tgt = [pairs[i][1] for i in idx]
        S, T = max(map(len, src)), max(map(len, tgt))
        s = torch.full((size, S), PAD)
        prev = torch.full((size, T), PAD)
        gold = torch.full((size, T), PAD)
        for b in range(size):
            s[b, :len(src[b])] = torch.tensor(src[b])
            prev[b, 0] = EOS
            prev[b, 1:len(tgt[b])] = torch.tensor(tgt[b][:-1])
            gold[b, :len(tgt[b])] = torch.tensor(tgt[b])
        yield s, prev, gold


def train(norm, pairs, args):
    cfg = default_config(encoder_layers=args.layers, decoder_layers=args.layers, d_model=args.d_model,
                         heads=4, ffn_dim=2 * args.d_model, vocab_size=256 + OFFSET, normalization=norm,
                         max_positions=256)
    torch.manual_seed(args.seed)
    model = Transformer(cfg)
    model.init_weights(torch.Generator().manual_seed(args.seed), deepnorm_init=(norm == "deepnorm"))
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-8)
    curve, t0 = [], time.time()
    for step, (s, prev, gold) in enumerate(batches(pairs, args.batch, args.steps, args.seed), 1):
        lr = args.lr * min(1.0, step / args.warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        logp = model(s, prev)
        loss = F.nll_loss(logp.reshape(-1, logp.shape[-1]), gold.reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        value = loss.item()
        curve.append(value if math.isfinite(value) else float("nan"))
        if step % 10 == 0 or step == 1:
            print(f"{norm:8s} step {step:4d} loss {value:7.3f} ({time.time() - t0:6.0f}s)", flush=True)
    return cfg, curve


def svg(curves, path, title):
    """A small line chart, no plotting library needed."""
    w, h, m = 640, 400, 56
    steps = max(len(c) for c in curves.values())
    finite = [v for c in curves.values() for v in c if math.isfinite(v)]
    lo, hi = 0.0, max(finite) * 1.05
    def xy(i, v):
        return m + (w - 2 * m) * i / max(1, steps - 1), h - m - (h - 2 * m) * (min(v, hi) - lo) / (hi - lo)
    colours = {"post": "#d62728", "deepnorm": "#1f77b4"}
    labels = {"post": "Post-LN (alpha = 1, Xavier init)", "deepnorm": "DeepNorm (alpha, beta from depth)"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="24" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
           f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 16}" text-anchor="middle">training step</text>',
           f'<text x="16" y="{h / 2}" transform="rotate(-90 16 {h / 2})" text-anchor="middle">training loss (nats/byte)</text>']
    for k in range(6):
        v = lo + (hi - lo) * k / 5
        _, y = xy(0, v)
        out.append(f'<text x="{m - 6}" y="{y + 4}" text-anchor="end">{v:.1f}</text>')
        out.append(f'<line x1="{m}" y1="{y}" x2="{w - m}" y2="{y}" stroke="#eee"/>')
    for k in range(6):
        i = (steps - 1) * k / 5
        x, _ = xy(i, lo)
        out.append(f'<text x="{x}" y="{h - m + 16}" text-anchor="middle">{int(i) + 1}</text>')
    for n, (name, c) in enumerate(curves.items()):
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in enumerate(c) if math.isfinite(v)))
        out.append(f'<polyline fill="none" stroke="{colours[name]}" stroke-width="1.5" points="{pts}"/>')
        out.append(f'<text x="{w - m - 250}" y="{m + 18 * n + 10}" fill="{colours[name]}">{labels[name]}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/multi30k")
    ap.add_argument("--out", default="docs/deepnorm-vs-postln")
    ap.add_argument("--layers", type=int, default=50, help="encoder layers = decoder layers")
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    pairs = read_pairs(args.data, 4000, 80)
    curves = {}
    for norm in ("post", "deepnorm"):
        cfg, curves[norm] = train(norm, pairs, args)
    with open(args.out + ".csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["step", "post_ln_loss", "deepnorm_loss"])
        for i, (a, b) in enumerate(zip(curves["post"], curves["deepnorm"]), 1):
            wr.writerow([i, f"{a:.4f}", f"{b:.4f}"])
    title = (f"{args.layers}+{args.layers} layers, d_model {args.d_model}, lr {args.lr:g}, "
             f"warm-up {args.warmup}, batch {args.batch} (en-de bytes)")
    svg(curves, args.out + ".svg", title)
    tail = 20
    for name, c in curves.items():
        last = [v for v in c[-tail:] if math.isfinite(v)]
        print(f"{name}: mean loss over the last {tail} steps "
              f"{sum(last) / len(last) if last else float('nan'):.3f}")


if __name__ == "__main__":
    main()
