#!/bin/sh
# test_same_translation.sh — the shipped model translates alike on every CPU (TAP):
# every kernel level with FMA this CPU runs (avx2 and up: model/kernels/portable.inc
# sums in one order at every vector width) and every OpenBLAS kernel family
# (OPENBLAS_CORETYPE: the engine no longer routes attention through sgemm, whose
# kernels sum in a CPU-specific order) give the same n-best lists, scores and
# alignments, in int8 and in F32. Replicas behind a balancer on different CPUs then
# answer alike (docs/deployment.md). DEEPMT_BIN picks the binary (default build/deepmt).
set -u
cd "$(dirname "$0")/../.."
BIN=${DEEPMT_BIN:-build/deepmt}
MODEL=${DEEPMT_MODEL_DIR:-models/default}
. tests/sh/tap.sh
skip_unless_built "$BIN"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# short and long sentences: sources of 2 to ~90 pieces, beams of several hypotheses
cat >"$tmp/in" <<'EOT'
Good morning.
Where is the train station?
The meeting has been moved to Thursday afternoon because the director is ill.
Can you help me find my keys?
Scientists at the university announced on Monday that they had developed a new diagnostic tool that can sort cells by type, a tiny printable chip that can be made with standard inkjet printers for possibly about one cent each.
The weather was cold, the roads were icy, and the flight was delayed by two hours, so we spent the night in a small hotel near the airport, where the staff were friendly and the food was surprisingly good, and in the morning we took the first train into the city, which was crowded with commuters reading newspapers and drinking coffee.
I have three brothers and two sisters.
Please send the report to the office before Friday.
EOT

run() { # run NAME ENV... : 4-best lists with scores, then alignments, into $tmp/NAME
    name=$1; shift
    { env "$@" "$BIN" translate -m "$MODEL" -t de -q --beam 4 --nbest 4 --scores <"$tmp/in" &&
      env "$@" "$BIN" translate -m "$MODEL" -t de -q --alignments <"$tmp/in"; } >"$tmp/$name" 2>"$tmp/$name.err"
}

levels=""
for isa in avx2 avxvnni avx512 avx512vnni avx512bf16 amx; do
    env DEEPMT_ISA=$isa "$BIN" --version >/dev/null 2>&1 && levels="$levels $isa"
done
if [ -z "$levels" ]; then
    echo "ok 1 - # SKIP this CPU has no kernel level with FMA (avx2 and up): nothing to compare"
    exit 0
fi
first=${levels# }; first=${first%% *}
for precision in int8 f32; do
    run ref-$precision DEEPMT_ISA=$first DEEPMT_PRECISION=$precision
    [ "$(wc -l <"$tmp/ref-$precision")" = 40 ]
    ok $? "$first $precision: 8 sentences translated (4-best lists, then alignments)" "$(head -3 "$tmp/ref-$precision.err")"
    for isa in $levels; do
        [ "$isa" = "$first" ] && continue
        run $isa-$precision DEEPMT_ISA=$isa DEEPMT_PRECISION=$precision
        cmp -s "$tmp/ref-$precision" "$tmp/$isa-$precision"
        ok $? "$isa $precision: the same n-best lists, scores and alignments as $first" \
            "$(diff "$tmp/ref-$precision" "$tmp/$isa-$precision" | head -4)"
    done
done
for core in Prescott Sandybridge Haswell SkylakeX; do
    # a family this CPU cannot run falls back (OpenBLAS says so on stderr): compare anyway
    run blas-$core OPENBLAS_CORETYPE=$core DEEPMT_ISA=$first DEEPMT_PRECISION=int8
    cmp -s "$tmp/ref-int8" "$tmp/blas-$core"
    ok $? "OPENBLAS_CORETYPE=$core: the same as OpenBLAS's own choice" "$(diff "$tmp/ref-int8" "$tmp/blas-$core" | head -4)"
done
tap_done
