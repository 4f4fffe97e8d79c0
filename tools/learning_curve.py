#!/usr/bin/python3
"""The general model's learning curve across sessions: merge a run's validations
into the committed history, and draw it as an SVG (standard library only).

    tools/learning_curve.py --curve runs/general/curve.csv \
        --history models/default/learning_curve.csv --svg docs/general-learning-curve.svg

A run's curve.csv (tools/train.py) lives in runs/, which a new machine does not
have; the history keeps every validation of every session (rows by step; a
step seen again is replaced), so the plot shows the whole run. The plot: greedy
validation BLEU (mean of all directions, Multi30k mean, general-dev mean) against
CPU hours.
"""
import argparse
import csv
import os

COLUMNS = ["step", "cpu_hours", "target_tokens", "val_nll", "val_bleu", "bleu_en-de", "bleu_en-fr", "bleu_de-en",
           "bleu_cs-en", "bleu_g:en-de", "bleu_g:de-en", "bleu_g:en-fr", "bleu_g:fr-en", "bleu_g:en-cs",
           "bleu_g:cs-en"]


def read(path):
    if not path or not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return [{k: r[k] for k in COLUMNS if k in r} for r in csv.DictReader(f)]


def means(r):
    m30 = [float(r[k]) for k in COLUMNS if k.startswith("bleu_") and not k.startswith("bleu_g:") and r.get(k)]
    gen = [float(r[k]) for k in COLUMNS if k.startswith("bleu_g:") and r.get(k)]
    return (sum(m30) / len(m30) if m30 else None), (sum(gen) / len(gen) if gen else None)


def svg(rows, path):
    W, H, L, R, T, B = 720, 360, 56, 200, 20, 44
    xs = [float(r["cpu_hours"]) for r in rows]
    series = [("mean of all directions", "#1f77b4", [float(r["val_bleu"]) for r in rows]),
              ("Multi30k val (4 directions)", "#2ca02c", [means(r)[0] for r in rows]),
              ("general dev (6 directions)", "#d62728", [means(r)[1] for r in rows])]
    x0, x1 = 0.0, max(xs) * 1.05 if xs else 1.0
    y1 = max((v for _, _, ys in series for v in ys if v is not None), default=10.0) * 1.1
    px = lambda x: L + (x - x0) / (x1 - x0) * (W - L - R)  # noqa: E731
    py = lambda y: H - B - y / y1 * (H - T - B)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>']
    step = 5 if y1 > 25 else 2
    for v in range(0, int(y1) + 1, step):
        out.append(f'<line x1="{L - 4}" y1="{py(v):.1f}" x2="{W - R}" y2="{py(v):.1f}" stroke="#ddd"/>'
                   f'<text x="{L - 8}" y="{py(v) + 4:.1f}" text-anchor="end">{v}</text>')
    for h in range(0, int(x1) + 1):
        out.append(f'<text x="{px(h):.1f}" y="{H - B + 16}" text-anchor="middle">{h}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 8}" text-anchor="middle">CPU hours (2 cores)</text>')
    out.append(f'<text x="14" y="{(T + H - B) / 2}" transform="rotate(-90 14 {(T + H - B) / 2})" '
               'text-anchor="middle">greedy validation BLEU</text>')
    for i, (name, color, ys) in enumerate(series):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys) if y is not None)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{pts}"/>')
        for x, y in zip(xs, ys):
            if y is not None:
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{color}"/>')
        ly = T + 14 + 18 * i
        out.append(f'<line x1="{W - R + 10}" y1="{ly - 4}" x2="{W - R + 28}" y2="{ly - 4}" stroke="{color}" '
                   f'stroke-width="2"/><text x="{W - R + 32}" y="{ly}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--curve", help="a run's curve.csv to merge in")
    ap.add_argument("--history", required=True)
    ap.add_argument("--svg")
    a = ap.parse_args()
    rows = {int(r["step"]): r for r in read(a.history)}
    for r in read(a.curve):
        rows[int(r["step"])] = r
    rows = [rows[k] for k in sorted(rows)]
    with open(a.history, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in COLUMNS})
    if a.svg:
        svg(rows, a.svg)
    print(f"{len(rows)} validations in {a.history}" + (f"; plot {a.svg}" if a.svg else ""))


if __name__ == "__main__":
    main()
