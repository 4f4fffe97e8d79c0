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

# fuzz_shortlist.c's seeds: valid shortlist.bin files for its 60-piece configuration
# (languages 4-7), u16 and u32 entries, no table, one and two tables.
out=tests/fuzz/corpus/shortlist
mkdir -p "$out"
"${PYTHON:-/usr/bin/python3}" - "$out" <<'PY'
import struct, sys
V = 60
def table(target, eb, per):
    start, entries = [0], []
    for s in range(V):
        entries += [(s * 7 + i * 3) % V for i in range(per if s % 5 else 0)]
        start.append(len(entries))
    body = b"".join(struct.pack("<H" if eb == 2 else "<I", e) for e in entries)
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<iI", target, len(entries)) + struct.pack(f"<{V + 1}I", *start) + body
def shortlist(eb, tables, frequent=(2, 3, 10, 11)):
    head = b"DMTSL01\n" + struct.pack("<4I", V, len(frequent), len(tables), eb)
    return head + struct.pack(f"<{len(frequent)}I", *frequent) + b"".join(tables)
seeds = {
    "u16-one-table": shortlist(2, [table(5, 2, 3)]),
    "u16-two-tables": shortlist(2, [table(5, 2, 2), table(6, 2, 1)]),
    "u32-one-table": shortlist(4, [table(4, 4, 3)]),
    "refused-no-tables": shortlist(2, []),
    "no-frequent-odd-entries": shortlist(2, [table(7, 2, 1)], frequent=()),
}
for name, data in seeds.items():
    open(f"{sys.argv[1]}/seed-{name}", "wb").write(data)
PY
