#!/bin/sh
# Writes the loader's seed corpus from the malformed-model fixtures:
#   tests/fuzz/make_seeds.sh      (from anywhere; rerunning changes nothing)
# tests/fuzz/corpus/loader/seed-CASE = CASE's config.json, a NUL byte, its
# model.safetensors (the input format of fuzz_loader.c). A few valid models and one
# case of each kind of header and config error keep the corpus small; regression
# inputs found by fuzzing live next to them under other names.
set -eu
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus/loader
mkdir -p "$out"
for c in valid valid-unaligned-f32 valid-mixed-dtypes valid-pre-learned-untied \
         st-overlapping-tensors st-shape-mismatch st-missing-tensor st-unexpected-tensor \
         st-header-duplicate-key st-byte-count-mismatch st-offsets-outside-file \
         config-odd-d-model-sinusoidal config-language-twice config-decoding-beam-zero; do
  d=tests/fixtures/malformed/$c
  { cat "$d/config.json"; printf '\000'; cat "$d/model.safetensors"; } > "$out/seed-$c"
done
