#!/bin/sh
# test_quantize.sh — `deepmt quantize IN_DIR OUT_DIR` round trip (TAP): the quantised
# copy loads without widening (inspect: I8 on disk, about a quarter of the F32 file and
# of the F32 weight memory), translates exactly as the F32 model does with
# --precision int8 (the loader quantises by the same rule), and runs int8 at every
# kernel level this CPU has; bad uses are refused with clear messages.
# DEEPMT_BIN picks the binary (default build/deepmt); DEEPMT_MODEL the model.
set -u
cd "$(dirname "$0")/../.."
BIN=${DEEPMT_BIN:-build/deepmt}
MODEL=${DEEPMT_MODEL:-models/default}
. tests/sh/tap.sh
skip_unless_built "$BIN"
if [ ! -f "$MODEL/model.safetensors" ]; then echo "ok 1 - # SKIP no $MODEL/model.safetensors"; exit 0; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
q=$tmp/q

"$BIN" quantize "$MODEL" "$q" 2>"$tmp/err"; rc=$?
ok "$rc" "quantize $MODEL exits 0" "exit $rc: $(cat "$tmp/err")"
for f in config.json model.safetensors sentencepiece.model; do
    [ -s "$q/$f" ]; ok $? "the copy has $f"
done
in_bytes=$(wc -c <"$MODEL/model.safetensors"); q_bytes=$(wc -c <"$q/model.safetensors")
# F32 in: int8 matrices + scales are ~26% of it; F16 in: ~52%
ok "$([ $((q_bytes * 100 / in_bytes)) -le 55 ] && echo 0 || echo 1)" \
    "the quantised file is smaller ($q_bytes of $in_bytes bytes)"

"$BIN" inspect "$q" >"$tmp/inspect" 2>&1; rc=$?
ok "$rc" "inspect the quantised model" "$(cat "$tmp/inspect")"
grep -q '^dtype on disk: *I8+' "$tmp/inspect"; ok $? "inspect: I8 on disk" "$(grep '^dtype' "$tmp/inspect")"
grep -q '^kernels: .*INT8 products' "$tmp/inspect"; ok $? "inspect: int8 products" "$(grep '^kernels' "$tmp/inspect")"
f32=$(sed -n 's/^memory as F32: *\([0-9.]*\) MB (as loaded: \([0-9.]*\) MB.*/\1 \2/p' "$tmp/inspect")
ok "$(echo "$f32" | awk '{ exit !($2 <= 0.3 * $1) }'; echo $?)" "resident weights <= 30% of F32 (F32, loaded MB: $f32)"

printf 'A man is riding a bicycle.\nTwo dogs are playing in the snow.\nA woman in a red dress sings on a stage.\n' >"$tmp/in"
"$BIN" translate -m "$MODEL" -t de -q --precision int8 -i "$tmp/in" -o "$tmp/on_the_fly" 2>"$tmp/err"; rc1=$?
"$BIN" translate -m "$q" -t de -q -i "$tmp/in" -o "$tmp/from_file" 2>>"$tmp/err"; rc2=$?
ok "$([ $rc1 = 0 ] && [ $rc2 = 0 ] && [ "$(wc -l <"$tmp/from_file")" = 3 ] && echo 0 || echo 1)" \
    "the quantised model translates" "$(cat "$tmp/err")"
cmp -s "$tmp/on_the_fly" "$tmp/from_file"; ok $? "the quantised file translates as --precision int8 does" \
    "$(paste "$tmp/on_the_fly" "$tmp/from_file")"
best=$("$BIN" --version | sed -n 's/^kernels: \([a-z0-9]*\);.*/\1/p')
for isa in generic avx2 avxvnni avx512 avx512vnni avx512bf16 amx; do
    DEEPMT_ISA=$isa "$BIN" translate -m "$q" -t de -q -i "$tmp/in" -o "$tmp/$isa" 2>"$tmp/err"; rc=$?
    if grep -q 'cannot run it' "$tmp/err"; then
        echo "ok $((n = n + 1)) - # SKIP DEEPMT_ISA=$isa: this CPU cannot run it"
    else
        cmp -s "$tmp/$isa" "$tmp/from_file"; ok $? "DEEPMT_ISA=$isa: the same int8 translations" \
            "exit $rc: $(cat "$tmp/err")"
    fi
    [ "$isa" = "$best" ] && break
done

"$BIN" quantize "$q" "$tmp/qq" 2>"$tmp/err"; rc=$?
ok "$([ $rc != 0 ] && grep -q 'is int8 already' "$tmp/err" && echo 0 || echo 1)" \
    "quantising a quantised model is refused" "exit $rc: $(cat "$tmp/err")"
"$BIN" quantize "$MODEL" "$MODEL" 2>"$tmp/err"; rc=$?
ok "$([ $rc != 0 ] && grep -q 'OUT_DIR is IN_DIR' "$tmp/err" && echo 0 || echo 1)" \
    "quantising into the input directory is refused" "exit $rc: $(cat "$tmp/err")"
"$BIN" quantize "$tmp/nowhere" "$tmp/q3" 2>"$tmp/err"; rc=$?
ok "$([ $rc != 0 ] && grep -q 'not a model directory' "$tmp/err" && echo 0 || echo 1)" \
    "a missing input is refused" "exit $rc: $(cat "$tmp/err")"
"$BIN" quantize 2>/dev/null; rc=$?
ok "$([ $rc = 2 ] && echo 0 || echo 1)" "no arguments: usage, exit 2"
tap_done
