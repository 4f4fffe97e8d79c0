#!/usr/bin/python3
"""int8 products keep the shipped model's quality: BLEU and agreement floors.

Translates the first LINES lines of Multi30k test_2016_flickr with `deepmt translate`
(beam 4) in F32 and with --precision int8 (weights per output row, activations per
row, model/kernels/kernels.h) in the directions below, and checks that int8 scores
at least its floor (set well under what the shipped model scored when the floors
were measured, so a retrained model passes and a broken int8 path does not: a
product off by a scale or a saturated sum loses tens of BLEU) and that most
translations are the very ones F32 writes.

Environment: DEEPMT_BIN (build/deepmt), DEEPMT_MODEL (models/default),
DEEPMT_SHARED (../shared). Skips with a message when the data is absent.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tap  # noqa: E402
from test_default_model import LINES, read, translate  # noqa: E402  (first LINES test lines, deepmt translate)
from testutil import load_script, repo_path, shared_data  # noqa: E402

# direction -> (BLEU floor, agreement floor), int8 on the first LINES lines. Measured
# (models/default, the general-domain model at step 38,086, 2026-12-05, amx kernels):
# en-de F32 39.86, int8 39.62; de-en F32 44.90, int8 45.06 (after the GPU leg, step
# 30,771: 39.73 / 39.76, 43.62 / 43.63; step 26,156: 39.24 / 39.55, 41.92 / 42.02; the first cooldown, step 23,116: 38.98 / 38.89, 41.91 / 41.65; the average over steps 16,800-19,684: 39.04 / 38.88, 40.38 / 40.58, 92%
# identical; step 15,024: 36.08 / 36.85, 39.51 / 39.21; step 11,050:
# 34.69 / 33.99, 36.66 / 36.70; the captions
# model, 2026-12-01: en-de 38.34 / 37.85, de-en 43.04 / 43.53, 90-91% identical).
FLOORS = {"en-de": (29, 0.6), "de-en": (32, 0.6)}


def main():
    binary = repo_path(os.environ.get("DEEPMT_BIN", "build/deepmt"))
    model = repo_path(os.environ.get("DEEPMT_MODEL", "models/default"))
    data = shared_data("multi30k")
    if not os.path.exists(os.path.join(data, "test_2016_flickr.en.gz")):
        tap.skip(f"no Multi30k test data at {data} (set DEEPMT_SHARED)")
        return tap.done()
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        tap.skip(f"no weights in {model}")
        return tap.done()
    bleu = load_script("bleu")
    for direction, (floor, agree_floor) in FLOORS.items():
        src, tgt = direction.split("-")
        source, refs = read(data, src), read(data, tgt)
        rc, f32, err = translate(binary, model, source, tgt)
        rc8, i8, err8 = translate(binary, model, source, tgt, ("--precision", "int8"))
        if not tap.ok(rc == 0 and rc8 == 0 and len(i8) == LINES, f"{direction}: {LINES} lines in F32 and int8",
                      detail=f"exit {rc}/{rc8}\n{err[-500:]}\n{err8[-500:]}"):
            continue
        s32, s8 = bleu.corpus_bleu(f32, refs)["score"], bleu.corpus_bleu(i8, refs)["score"]
        same = sum(a == b for a, b in zip(f32, i8)) / LINES
        tap.ok(s8 >= floor, f"{direction} int8: BLEU {s8:.2f} >= {floor} (F32 {s32:.2f})",
               detail=f"first: {i8[0]!r}\nref:   {refs[0]!r}")
        tap.ok(same >= agree_floor, f"{direction} int8: {same:.0%} of translations as F32 (>= {agree_floor:.0%})")
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
