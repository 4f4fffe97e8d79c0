#!/bin/sh
# test_fuzz.sh — every libFuzzer target (tests/fuzz/fuzz_*.c) for a few seconds:
# its committed corpus (seeds and regression inputs) replayed, then FUZZ_TEST_SECONDS
# (default 5) of fuzzing. One TAP line per target. Skips with a message when clang or
# its libFuzzer runtime (Debian: clang, libclang-rt-14-dev) is missing. `make fuzz`
# runs the same targets for 10 minutes each.
set -u
cd "$(dirname "$0")/../.."
BUILD=${DEEPMT_BUILD:-build}
. tests/sh/tap.sh
CLANG=${FUZZ_CC:-clang}
if ! command -v "$CLANG" >/dev/null 2>&1; then
    echo "ok 1 - # SKIP $CLANG not installed (apt-get install clang libclang-rt-14-dev)"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' >"$tmp/probe.c"
if ! "$CLANG" -fsanitize=fuzzer,address,undefined "$tmp/probe.c" -o "$tmp/probe" >"$tmp/log" 2>&1; then
    echo "ok 1 - # SKIP $CLANG cannot link libFuzzer with ASan/UBSan (apt-get install libclang-rt-14-dev): $(head -c 200 "$tmp/log")"
    exit 0
fi
make --no-print-directory -s fuzz-bin BUILD="$BUILD" >"$tmp/build.log" 2>&1
ok $? "fuzz targets build with clang, ASan and UBSan" "$(tail -c 600 "$tmp/build.log")"
for src in tests/fuzz/fuzz_*.c; do
    name=${src##*/fuzz_}; name=${name%.c}
    out=$(FUZZ_DIR=$BUILD/fuzz FUZZ_WORK=$tmp/corpus tests/fuzz/run.sh "${FUZZ_TEST_SECONDS:-5}" "$name" 2>&1)
    ok $? "fuzz_$name: corpus replayed and ${FUZZ_TEST_SECONDS:-5} s of fuzzing without a finding" "$out"
    echo "# $out" | head -n 1
done
tap_done
