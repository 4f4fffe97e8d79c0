#!/bin/sh
# test_inspect.sh — `deepmt inspect MODEL_DIR` (TAP): the summary of a good model, and a
# non-zero exit with a clear message for a missing directory and a malformed one.
# DEEPMT_BIN picks the binary (default build/deepmt); run from anywhere.
set -u
cd "$(dirname "$0")/../.."
BIN=${DEEPMT_BIN:-build/deepmt}
FIX=${DEEPMT_FIXTURES:-tests/fixtures}
. tests/sh/tap.sh
out=$(mktemp); errf=$(mktemp); trap 'rm -f "$out" "$errf"' EXIT

has() { grep -q -- "$1" "$2"; echo $?; }   # has PATTERN FILE -> 0 when found

skip_unless_built "$BIN"

# A good model: the golden deepnorm-6x6 fixture (F32, 6 + 6 layers, 130304 parameters).
"$BIN" inspect "$FIX/golden/deepnorm-6x6" >"$out" 2>"$errf"; rc=$?
ok "$rc" "inspect deepnorm-6x6 exits 0" "exit $rc: $(cat "$errf")"
ok "$(has '^layers: *6 encoder + 6 decoder$' "$out")" "prints the layers" "$(grep '^layers' "$out")"
ok "$(has '^parameters: *130304 ' "$out")" "prints the parameter count (130304)" "$(grep '^parameters' "$out")"
ok "$(has '^dtype on disk: *F32, ' "$out")" "prints the dtype on disk (F32)" "$(grep '^dtype' "$out")"
ok "$(has '^memory as F32: *[0-9.]* MB' "$out")" "prints the memory as F32" "$(grep '^memory' "$out")"
ok "$(has '^d_model: *32 (heads 4, ffn 64)$' "$out")" "prints d_model, heads and ffn" "$(grep '^d_model' "$out")"
ok "$(has '^tokenizer: .*sentencepiece.model' "$out")" "reports the missing tokenizer without failing" \
    "$(grep '^tokenizer' "$out")"

# F16 on disk: widened at load.
if [ -d "$FIX/golden/deepnorm-6x6-f16" ]; then
    "$BIN" inspect "$FIX/golden/deepnorm-6x6-f16" >"$out" 2>"$errf"; rc=$?
    ok "$([ "$rc" = 0 ] && has '^dtype on disk: *F16, ' "$out" || echo 1)" "an F16 model reports dtype F16" \
        "exit $rc: $(grep '^dtype' "$out")"
fi

# A directory that does not exist.
missing="$FIX/no-such-model-dir"
"$BIN" inspect "$missing" >"$out" 2>"$errf"; rc=$?
ok "$([ "$rc" != 0 ]; echo $?)" "a missing directory exits non-zero" "exit $rc"
ok "$(has "$missing: not a model directory" "$errf")" "and says it is not a model directory" "$(cat "$errf")"
ok "$([ ! -s "$out" ]; echo $?)" "and prints nothing on stdout" "$(cat "$out")"

# Malformed cases (tests/fixtures/malformed/*/expect): the loader's message reaches stderr.
for case in st-missing-tensor st-truncated-data config-bad-enum; do
    dir="$FIX/malformed/$case"
    [ -f "$dir/expect" ] || { ok 1 "malformed/$case exists" "$dir/expect missing"; continue; }
    want=$(cat "$dir/expect")
    "$BIN" inspect "$dir" >"$out" 2>"$errf"; rc=$?
    ok "$([ "$rc" != 0 ]; echo $?)" "malformed/$case exits non-zero" "exit $rc"
    ok "$(grep -qF -- "deepmt inspect: " "$errf" && grep -qF -- "$want" "$errf"; echo $?)" \
        "malformed/$case: stderr says $want" "$(cat "$errf")"
done

# Usage errors.
"$BIN" inspect --frobnicate >"$out" 2>"$errf"; rc=$?
ok "$([ "$rc" = 2 ] && grep -q '^usage: deepmt inspect' "$errf"; echo $?)" "an unknown option: usage and exit 2" "exit $rc"
"$BIN" inspect a b >"$out" 2>"$errf"; rc=$?
ok "$([ "$rc" = 2 ] && grep -q "unexpected argument 'b'" "$errf"; echo $?)" "two directories: refused, exit 2" "exit $rc"
if [ -f models/default/config.json ]; then
    env -u DEEPMT_MODEL "$BIN" inspect >"$out" 2>"$errf"; rc=$?
    ok "$([ "$rc" = 0 ] && grep -q '^model: *models/default' "$out"; echo $?)" \
        "no argument: the default model, as in serve and translate" "exit $rc"
fi

tap_done
