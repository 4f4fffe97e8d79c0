#!/bin/sh
# test_cli_options.sh — the command line as a user meets it (TAP): a mistyped option
# gets a "did you mean" in one line (not the whole help), --help prints to stdout and
# exits 0 for every command, a refused option value says what it depends on, and the
# options commands share (base/options.h) mean and read the same everywhere.
# DEEPMT_BIN picks the binary (default build/deepmt).
set -u
cd "$(dirname "$0")/../.."
BIN=${DEEPMT_BIN:-build/deepmt}
MODEL=tests/fixtures/tiny-model
. tests/sh/tap.sh
skip_unless_built "$BIN"
out=$(mktemp); err=$(mktemp); trap 'rm -f "$out" "$err"' EXIT

run() { "$BIN" "$@" </dev/null >"$out" 2>"$err"; rc=$?; }

run translate --modle "$MODEL" --target de
ok "$([ "$rc" = 2 ] && grep -q "did you mean --model?" "$err" && [ "$(wc -l <"$err")" = 1 ]; echo $?)" \
    "translate --modle: exit 2 and one line with \"did you mean --model?\"" "rc $rc: $(head -c 300 "$err")"
run translate -m "$MODEL" --targt de
ok "$([ "$rc" = 2 ] && grep -q "did you mean --target?" "$err" && [ "$(wc -l <"$err")" = 1 ]; echo $?)" \
    "translate --targt: \"did you mean --target?\", not the whole help" "rc $rc: $(head -c 300 "$err")"
run translate -m "$MODEL" --target de --zzzzzz
ok "$([ "$rc" = 2 ] && grep -q "unknown option '--zzzzzz'" "$err" && ! grep -q "did you mean" "$err"; echo $?)" \
    "an option like none: no suggestion, a pointer to --help" "$(cat "$err")"
run serve --prot 5000
ok "$([ "$rc" = 2 ] && grep -q "did you mean --port?" "$err"; echo $?)" "serve --prot: \"did you mean --port?\"" \
    "rc $rc: $(cat "$err")"
run serve --max-chrs 5
ok "$([ "$rc" = 2 ] && grep -q "did you mean --max-chars?" "$err"; echo $?)" "serve --max-chrs: \"did you mean --max-chars?\"" \
    "rc $rc: $(cat "$err")"
for cmd in translate serve inspect forward quantize probe; do
    run "$cmd" --help
    ok "$([ "$rc" = 0 ] && [ -s "$out" ] && grep -q "usage" "$out"; echo $?)" "$cmd --help: usage on stdout, exit 0" \
        "rc $rc, stdout $(wc -c <"$out") bytes, stderr: $(head -c 200 "$err")"
done
run serve --help
missing=""
for e in "POST /translate " "POST /translate_file" "GET  /download_file" "POST /detect" "POST /suggest" "GET  /languages" \
         "GET  /frontend/settings" "GET  /spec" "GET  /health, /ready" "GET  /metrics"; do
    grep -q "$e" "$out" || missing="$missing|$e"
done
ok "$([ -z "$missing" ]; echo $?)" "serve --help lists every endpoint" "missing: $missing"
echo "A dog." | "$BIN" translate -m "$MODEL" --target de -n 8 >"$out" 2>"$err"; rc=$?
ok "$([ "$rc" = 2 ] && grep -q "beam_size (4 here" "$err"; echo $?)" "-n 8 above the beam: the message gives the beam" \
    "rc $rc: $(cat "$err")"
# one vocabulary (base/options.h): the options serve and translate share are listed
# word for word the same, with the same variable
run serve --help; cp "$out" "$out.serve"
run translate --help
differ=""
for o in model threads workers batching precision max-batch-sentences; do
    a=$(grep -A1 -- "--$o " "$out.serve"); b=$(grep -A1 -- "--$o " "$out")
    [ -n "$a" ] && [ "$a" = "$b" ] || differ="$differ $o"
done
rm -f "$out.serve"
ok "$([ -z "$differ" ]; echo $?)" "serve and translate --help: model, threads, workers, batching, precision, max-batch-sentences alike" \
    "differ:$differ"
echo "A dog." | DEEPMT_MODEL="$MODEL" "$BIN" translate --target de >"$out" 2>"$err"; rc=$?
ok "$([ "$rc" = 0 ] && [ -s "$out" ]; echo $?)" "translate reads DEEPMT_MODEL, as serve does" "rc $rc: $(cat "$err")"
echo "A dog." | "$BIN" translate -m "$MODEL" --target de --batch-size 4 --max-batch-sentences 4 --beam-size 2 -q >"$out" 2>"$err"; rc=$?
ok "$([ "$rc" = 0 ]; echo $?)" "translate: --max-batch-sentences, --batch-size (its old name) and --beam-size (the API's beam_size) accepted" "rc $rc: $(cat "$err")"
run inspect -m "$MODEL"
ok "$([ "$rc" = 0 ] && grep -q "^model: *$MODEL" "$out"; echo $?)" "inspect -m DIR, as the other commands" "rc $rc: $(cat "$err")"
run inspect "$MODEL"
ok "$([ "$rc" = 0 ] && grep -q "^model: *$MODEL" "$out"; echo $?)" "inspect DIR still works" "rc $rc: $(cat "$err")"
log=$(mktemp)
"$BIN" serve "$MODEL" --port 0 >"$log" 2>&1 &
pid=$!
i=0
while [ $i -lt 50 ] && ! grep -q 'listening on' "$log"; do sleep 0.1; i=$((i + 1)); done
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
ok "$(grep -q "$MODEL" "$log" && grep -q 'listening on' "$log"; echo $?)" "serve DIR works like serve -m DIR" "$(head -c 300 "$log")"
rm -f "$log"
run translate -m "$MODEL" --target de --threads abc
ok "$([ "$rc" = 2 ] && grep -q -- "--threads: expected an integer from 0 to 1024, got 'abc'" "$err"; echo $?)" \
    "a bad value names the option and its range, in every command alike" "rc $rc: $(cat "$err")"

tap_done
