#!/bin/sh
# test_serve_defaults.sh — how `deepmt serve` splits the cores into workers and BLAS
# threads (base/options.h, the same in deepmt translate), read from its start-up
# line. TAP. --threads is the CPU threads in all (default: the cores), --workers the
# decoding threads (default: min(threads, 4)), each with threads / workers BLAS threads:
#   no flags          -> min(cores, 4) workers, cores / workers BLAS threads each
#   --threads N       -> min(N, 4) workers, N / workers BLAS threads each
#   --workers W       -> W workers, cores / W BLAS threads each (at least 1)
#   both              -> W workers, N / W each; DEEPMT_* variables count as flags
# DEEPMT_BIN picks the binary (default build/deepmt).
set -u
cd "$(dirname "$0")/../.."
BIN=${DEEPMT_BIN:-build/deepmt}
MODEL=tests/fixtures/tiny-model
. tests/sh/tap.sh
skip_unless_built "$BIN"
log=$(mktemp); trap 'rm -f "$log"' EXIT
cores=$(getconf _NPROCESSORS_ONLN)

# start_line [env VAR=...] -- serve flags: prints "W T" from the start-up line
split() {
    : >"$log" # now: the server's own redirect may come after the first grep below
    "$@" "$BIN" serve --model "$MODEL" --port 0 >"$log" 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 50 ] && ! grep -q 'listening on' "$log"; do sleep 0.1; i=$((i + 1)); done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    sed -n 's/.*loading; \([0-9]*\) workers\{0,1\}, \([0-9]*\) BLAS threads\{0,1\} each.*/\1 \2/p' "$log" | head -n1
}
min4=$((cores < 4 ? cores : 4))
each=$((cores / min4 > 0 ? cores / min4 : 1))
per=$((cores / 2 > 0 ? cores / 2 : 1))

got=$(split env -u DEEPMT_WORKERS -u DEEPMT_THREADS)
[ "$got" = "$min4 $each" ]; ok $? "no flags: $min4 workers x $each BLAS threads ($cores cores)" "got '$got': $(head -c 300 "$log")"
got=$(split env -u DEEPMT_WORKERS -u DEEPMT_THREADS -- env DEEPMT_THREADS=8)
[ "$got" = "4 2" ]; ok $? "DEEPMT_THREADS=8 alone: 4 workers x 2 BLAS threads" "got '$got'"
got=$(split env -u DEEPMT_WORKERS -u DEEPMT_THREADS -- env DEEPMT_WORKERS=2)
[ "$got" = "2 $per" ]; ok $? "DEEPMT_WORKERS=2 alone: 2 workers x $per BLAS threads" "got '$got'"
got=$(split env DEEPMT_WORKERS=3 DEEPMT_THREADS=6)
[ "$got" = "3 2" ]; ok $? "both given: 3 workers x 2 BLAS threads (6 / 3)" "got '$got'"
got=$(split env DEEPMT_WORKERS=1 DEEPMT_THREADS=3)
[ "$got" = "1 3" ]; ok $? "one worker with 3 threads: 1 x 3 (the old --threads 3)" "got '$got'"

# --precision: the ready line names the products; a bad value is refused before serving
"$BIN" serve --model "$MODEL" --port 0 --precision nope >"$log" 2>&1; rc=$?
[ "$rc" != 0 ] && grep -q "expected f32 or bf16 or int8 or auto, got 'nope'" "$log"; ok $? "--precision nope refused" "exit $rc: $(head -c 300 "$log")"
ready_line() {
    : >"$log"
    "$BIN" serve --model "$MODEL" --port 0 "$@" >"$log" 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 50 ] && ! grep -q 'ready\|cannot load' "$log"; do sleep 0.1; i=$((i + 1)); done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
}
ready_line
grep -q 'products: .*); ready' "$log"; ok $? "the ready line names the product kernels and why that precision" "$(head -c 400 "$log")"
ready_line --precision bf16
if grep -q 'lacks' "$log"; then
    grep -q 'bf16 precision needs a CPU with AVX-512 BF16' "$log"; ok $? "--precision bf16 on a CPU without it: clear error"
else
    grep -q '(\(avx512bf16\|amx\) BF16 products: asked for); ready' "$log"; ok $? "--precision bf16 serves with bf16 products" "$(head -c 400 "$log")"
fi
# one option vocabulary: -m DIR as in deepmt translate
"$BIN" serve -m "$MODEL" --port 0 >"$log" 2>&1 &
pid=$!
i=0
while [ $i -lt 50 ] && ! grep -q 'ready\|cannot\|unexpected' "$log"; do sleep 0.1; i=$((i + 1)); done
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
grep -q "model $MODEL loading" "$log" && grep -q 'ready' "$log"; ok $? "serve -m DIR works like translate -m DIR" "$(head -c 300 "$log")"
tap_done
