#!/usr/bin/env python3
"""Do the C engine and the PyTorch reference translate a model the same way?

Translates the first N lines of a Multi30k split in the given directions twice --
with `deepmt translate` and with the reference beam search (tools/dmt/beam.py over
tools/dmt/model.py) -- and reports how many translations are identical.

    tools/agreement.py --model models/default --data ../shared/data/multi30k \
        --split val --directions en-de,de-en,fr-en,cs-en --lines 250
"""
import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmt import modeldir  # noqa: E402
from dmt.beam import Options, search  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_lines(data, split, lang, n):
    with gzip.open(os.path.join(data, f"{split}.{lang}.gz"), "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for _, line in zip(range(n), f)]


def read_general(general, test_set, source, target, n, digits=False):
    """Source lines of a general-domain test set: tatoeba (pair files en-xx) or flores101
    (digits: only lines with a digit)."""
    if test_set == "flores101":
        path = os.path.join(general, "test", f"flores101.devtest.{source}")
    else:
        pair = "-".join(sorted((source, target), key=lambda x: x != "en"))
        path = os.path.join(general, "test", f"{test_set}.{pair}.{source}")
    with open(path, encoding="utf-8") as f:
        lines = (line.rstrip("\n") for line in f)
        return [x for _, x in zip(range(n), (x for x in lines if not digits or any(c.isdigit() for c in x)))]


def reference_translations(model, sp, lines, target, opt):
    """The reference path, with the C engine's conventions: `pieces </s>` in, language
    tokens typed by users mapped to unk, `__tgt__` forced, control and language ids
    left out of the text."""
    cfg = model.cfg
    lang_ids = {lang["id"] for lang in cfg["languages"]}
    forced = next(lang["id"] for lang in cfg["languages"] if lang["code"] == target)
    out = []
    for line in lines:
        if not line.strip():
            out.append("")
            continue
        ids = [cfg["unk_id"] if i in lang_ids else i for i in sp.encode(line)] + [cfg["eos_id"]]
        hyps, _ = search(model, ids, forced, opt)
        tokens = [t for t in hyps[0][0] if t not in lang_ids and t not in
                  (cfg["bos_id"], cfg["eos_id"], cfg["pad_id"])]
        out.append(sp.decode(tokens))
    return out


def digit_table(sp):
    """copy_numbers: the digit each piece writes ("7", or the byte <0x37>), -1 for others
    (model/model.c build_digit_table)."""
    import numpy as np
    out = np.full(sp.get_piece_size(), -1, dtype=np.int64)
    for i in range(sp.get_piece_size()):
        p = sp.id_to_piece(i)
        if len(p) == 1 and "0" <= p <= "9":
            out[i] = int(p)
        elif len(p) == 6 and p.startswith("<0x") and p.endswith(">") and 0x30 <= int(p[3:5], 16) <= 0x39:
            out[i] = int(p[3:5], 16) - 0x30
    return out


def engine_translations(binary, model_dir, lines, target, beam):
    with tempfile.TemporaryDirectory() as tmp:
        src, hyp = os.path.join(tmp, "src"), os.path.join(tmp, "hyp")
        with open(src, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        subprocess.run([binary, "translate", "-m", model_dir, "--target", target, "--beam", str(beam),
                        "--precision", "f32", "--no-shortlist", "--no-split", "-i", src, "-o", hyp], check=True, stderr=subprocess.DEVNULL)
        with open(hyp, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="models/default")
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "multi30k"))
    ap.add_argument("--split", default="val")
    ap.add_argument("--directions", default="en-de,de-en,fr-en,cs-en")
    ap.add_argument("--lines", type=int, default=250)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "deepmt"))
    ap.add_argument("--general", metavar="DIR", help="read a general-domain test set from DIR/test instead")
    ap.add_argument("--set", default="tatoeba", help="with --general: tatoeba or flores101")
    ap.add_argument("--with-digits", action="store_true", help="with --general: only lines holding a digit")
    args = ap.parse_args()
    import sentencepiece as spm
    torch.set_num_threads(1)
    model = modeldir.load(args.model)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.model, "sentencepiece.model"))
    dec = model.cfg.get("decoding", {})
    opt = Options(beam_size=args.beam, length_penalty=dec.get("length_penalty", 1.0),
                  max_len_a=dec.get("max_len_a", 1.2), max_len_b=dec.get("max_len_b", 10),
                  min_len=dec.get("min_len", 1), no_repeat_ngram_size=dec.get("no_repeat_ngram_size", 0),
                  max_repeats=dec.get("max_repeats", 0), digit_of=digit_table(sp) if dec.get("copy_numbers") else None)
    total = same = 0
    for direction in args.directions.split(","):
        source, target = direction.split("-")
        lines = (read_general(args.general, args.set, source, target, args.lines, args.with_digits) if args.general
                 else read_lines(args.data, args.split, source, args.lines))
        t0 = time.time()
        c_out = engine_translations(args.bin, args.model, lines, target, args.beam)
        with torch.inference_mode():
            ref_out = reference_translations(model, sp, lines, target, opt)
        agree = sum(a == b for a, b in zip(c_out, ref_out))
        total, same = total + len(lines), same + agree
        print(f"{direction}: {agree}/{len(lines)} identical ({100 * agree / len(lines):.1f}%), "
              f"{time.time() - t0:.0f}s", flush=True)
        for a, b, src in zip(c_out, ref_out, lines):
            if a != b:
                print(f"  differs: {src!r}\n    C:     {a!r}\n    torch: {b!r}")
                break
    print(f"all: {same}/{total} identical ({100 * same / total:.1f}%)")
    return 0 if same == total else 1


if __name__ == "__main__":
    sys.exit(main())
