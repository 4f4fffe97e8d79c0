#!/bin/sh
# Runs every test program and counts TAP lines ("ok", "not ok", "# SKIP").
#   C tests:      $DEEPMT_BUILD/tests/test_*   (built from tests/c/test_*.c)
#   Python tests: tests/py/test_*.py           (run with /usr/bin/python3, standard library)
#   Shell tests:  tests/sh/test_*.sh
# A program that exits non-zero without a "not ok" line counts as one failure.
# Ends with "N passed, N failed" (and the skips); exits 1 when anything failed.
# TESTS="pattern ..." runs only the programs whose path contains one of the patterns;
# TESTS_EXCLUDE="pattern ..." leaves out those whose label contains one.
set -u
cd "$(dirname "$0")/.."
BUILD=${DEEPMT_BUILD:-build}
export DEEPMT_BUILD=$BUILD DEEPMT_BIN=$BUILD/deepmt
PY=${PYTHON:-/usr/bin/python3}
passed=0; failed=0; skipped=0; failed_programs=""
log=$(mktemp); trap 'rm -f "$log"' EXIT

run_one() {  # $1 = label, rest = command
    label=$1; shift
    if [ -n "${TESTS:-}" ]; then
        match=0
        for pattern in $TESTS; do case "$label" in *"$pattern"*) match=1 ;; esac; done
        [ "$match" = 1 ] || return
    fi
    for pattern in ${TESTS_EXCLUDE:-}; do case "$label" in *"$pattern"*) return ;; esac; done
    echo "== $label"
    start=$(date +%s)
    "$@" >"$log" 2>&1
    rc=$?
    cat "$log"
    p=$(grep -c '^ok ' "$log" | tr -d ' ')
    s=$(grep -c '^ok .*# SKIP' "$log" | tr -d ' ')
    f=$(grep -c '^not ok ' "$log" | tr -d ' ')
    p=$((p - s))
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; echo "not ok - $label exited with status $rc"; fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    [ "$f" != 0 ] && failed_programs="$failed_programs $label"
    echo "== $label: $p passed, $f failed, $s skipped ($(( $(date +%s) - start ))s)"
}

for t in "$BUILD"/tests/test_*; do [ -x "$t" ] && run_one "$t" "$t"; done
# The engine runs one kernel level (model/kernels/kernels.h) per process: the best
# the CPU has, above. The op, golden, beam and checkpoint tests run again at every
# other level, which is what other x86-64 servers run: natively where the CPU has the
# level (the deepmt binary, which links no emulation, accepts it), otherwise (AVX-VNNI,
# AVX-512, AMX on a CPU without them) on the test programs' SIMDe emulation, with the
# software tile model for amx, where it is built (test_gemm runs every level's
# products itself).
best=$("$BUILD"/deepmt --version 2>/dev/null | sed -n 's/^kernels: \([a-z0-9]*\);.*/\1/p')
for isa in generic avx2 avxvnni avx512 avx512vnni avx512bf16 amx; do
    [ "$isa" = "$best" ] && continue
    how=""
    if ! env DEEPMT_ISA=$isa "$BUILD"/deepmt --version >/dev/null 2>&1; then
        case $isa in avx512* | amx) emu=avx512 ;; *) emu=$isa ;; esac # the source file holding the level
        if [ ! -f "$BUILD/tests/c/kernels_${emu}_emulated.o" ] || ! grep -q avx2 /proc/cpuinfo 2>/dev/null; then
            echo "# $isa: not run (this CPU lacks it; its emulation needs libsimde-dev and an AVX2 CPU)"
            continue
        fi
        how=", emulated"
    fi
    for t in "$BUILD"/tests/test_ops "$BUILD"/tests/test_golden "$BUILD"/tests/test_beam "$BUILD"/tests/test_shortlist "$BUILD"/tests/test_checkpoint; do
        [ -x "$t" ] && run_one "$t (DEEPMT_ISA=$isa$how)" env DEEPMT_ISA=$isa "$t"
    done
done
for t in tests/py/test_*.py; do [ -f "$t" ] && run_one "$t" "$PY" "$t"; done
for t in tests/sh/test_*.sh; do [ -f "$t" ] && run_one "$t" sh "$t"; done

[ -n "$failed_programs" ] && echo "failed in:$failed_programs"
echo "($skipped skipped)"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
