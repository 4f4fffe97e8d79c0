#!/bin/sh
# test_isa.sh — the kernel level (model/kernels/kernels.h) is chosen in one place and
# named everywhere (TAP): `deepmt --version`, `deepmt inspect`, the server's ready
# line; DEEPMT_ISA forces a level the CPU has and is refused, with a clear message
# and a non-zero exit, for an unknown name or a level the CPU lacks.
# DEEPMT_BIN picks the binary (default build/deepmt).
set -u
cd "$(dirname "$0")/../.."
BIN=${DEEPMT_BIN:-build/deepmt}
MODEL=tests/fixtures/tiny-model
. tests/sh/tap.sh
skip_unless_built "$BIN"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

level() { "$@" "$BIN" --version 2>/dev/null | sed -n 's/^kernels: \([a-z0-9]*\);.*/\1/p'; }
best=$(level env -u DEEPMT_ISA)
case "$best" in generic|avx2|avxvnni|avx512|avx512vnni|avx512bf16|amx) r=0 ;; *) r=1 ;; esac
ok $r "--version names the CPU's best level ($best)" "got '$best'"
got=$(level env DEEPMT_ISA=generic)
[ "$got" = generic ]; ok $? "DEEPMT_ISA=generic: --version says generic" "got '$got'"
"$BIN" --version >/dev/null 2>&1; ok $? "--version exits 0"

env DEEPMT_ISA=sse9 "$BIN" --version >"$tmp/out" 2>&1; rc=$?
[ $rc != 0 ] && grep -q 'DEEPMT_ISA=sse9: unknown level (generic, avx2' "$tmp/out"
ok $? "an unknown DEEPMT_ISA is refused with the choices" "exit $rc: $(cat "$tmp/out")"
env DEEPMT_ISA=sse9 "$BIN" translate -m "$MODEL" -t de -q <<EOT >"$tmp/out" 2>&1
hello
EOT
rc=$?
[ $rc != 0 ] && grep -q 'unknown level' "$tmp/out"; ok $? "translate refuses it too" "exit $rc: $(cat "$tmp/out")"

# the first level above the best is one this CPU lacks
above=$(echo "generic avx2 avxvnni avx512 avx512vnni avx512bf16 amx" | tr ' ' '\n' | sed -n "/^$best\$/{n;p;}")
if [ -n "$above" ]; then
    env DEEPMT_ISA="$above" "$BIN" --version >"$tmp/out" 2>&1; rc=$?
    [ $rc != 0 ] && grep -q "DEEPMT_ISA=$above: this CPU cannot run it (its best level is $best)" "$tmp/out"
    ok $? "DEEPMT_ISA=$above (beyond this CPU) is refused" "exit $rc: $(cat "$tmp/out")"
    env DEEPMT_ISA="$above" "$BIN" inspect "$MODEL" >"$tmp/out" 2>&1; rc=$?
    [ $rc != 0 ] && grep -q "cannot run it" "$tmp/out"; ok $? "inspect refuses it too" "exit $rc: $(cat "$tmp/out")"
else
    echo "ok $((n = n + 1)) - # SKIP this CPU runs every level: none to refuse"
fi

"$BIN" inspect "$MODEL" >"$tmp/out" 2>&1
grep -q "^kernels: *$best (" "$tmp/out"; ok $? "inspect names the level" "$(cat "$tmp/out")"
env DEEPMT_ISA=generic "$BIN" inspect "$MODEL" >"$tmp/out" 2>&1
grep -q '^kernels: *generic (generic (OpenBLAS) F32 products)' "$tmp/out"; ok $? "inspect at generic: OpenBLAS products" \
    "$(grep kernels "$tmp/out")"

: >"$tmp/log"
env DEEPMT_ISA=generic "$BIN" serve --model "$MODEL" --port 0 --precision int8 >"$tmp/log" 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q 'ready\|cannot load' "$tmp/log"; do sleep 0.1; i=$((i + 1)); done
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
grep -q '(generic INT8 products: asked for); ready' "$tmp/log"; ok $? "the ready line names level and products" \
    "$(head -c 600 "$tmp/log")"
tap_done
