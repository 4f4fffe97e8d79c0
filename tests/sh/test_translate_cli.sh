#!/bin/sh
# test_translate_cli.sh — `deepmt translate` (TAP): one output line per input line in
# input order, n-best and scores, and the bad-input behaviour (unknown language,
# missing model, empty input, over-long and invalid UTF-8 lines, bad options).
# Uses tests/fixtures/tiny-model (random weights: garbage translations, real
# tokenizer). DEEPMT_BIN picks the binary (default build/deepmt).
set -u
cd "$(dirname "$0")/../.."
BIN=${DEEPMT_BIN:-build/deepmt}
FIX=${DEEPMT_FIXTURES:-tests/fixtures}
MODEL=$FIX/tiny-model
. tests/sh/tap.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
out=$tmp/out; errf=$tmp/err

t() { "$BIN" translate "$@" >"$out" 2>"$errf"; rc=$?; }   # sets rc
lines() { wc -l <"$1" | tr -d ' '; }

skip_unless_built "$BIN"

# --help and usage errors
t --help
ok "$([ "$rc" = 0 ] && grep -q '^usage: deepmt translate' "$out"; echo $?)" "--help: usage on stdout, exit 0" "exit $rc"
t
ok "$([ "$rc" = 2 ] && grep -q 'required' "$errf"; echo $?)" "no options: exit 2 with a message" "exit $rc: $(cat "$errf")"
t -m "$MODEL" --target de --beam 0 </dev/null
ok "$([ "$rc" = 2 ] && grep -q "\-\-beam: expected an integer from 1 to 64, got '0'" "$errf"; echo $?)" "--beam 0 refused (exit 2)" "exit $rc: $(cat "$errf")"
t -m "$MODEL" --target de --precision f16 </dev/null
ok "$([ "$rc" = 2 ] && grep -q "\-\-precision: expected f32 or bf16 or int8 or auto, got 'f16'" "$errf"; echo $?)" "--precision f16 refused (exit 2)" "exit $rc: $(cat "$errf")"
t -m "$MODEL" --target de --beam 2 --nbest 3 </dev/null
ok "$([ "$rc" = 2 ] && grep -q 'nbest' "$errf"; echo $?)" "--nbest above --beam refused (exit 2)" "exit $rc: $(cat "$errf")"
t -m "$MODEL" --target de --length-penalty abc </dev/null
ok "$([ "$rc" = 2 ] && grep -q 'length-penalty' "$errf"; echo $?)" "a non-numeric --length-penalty refused" "exit $rc: $(cat "$errf")"
t -m "$MODEL" --target de --frobnicate </dev/null
ok "$([ "$rc" = 2 ] && grep -q "unknown option '--frobnicate'" "$errf"; echo $?)" "an unknown option refused" "exit $rc: $(cat "$errf")"

# model and language
t -m "$tmp/no-such-model" --target de </dev/null
ok "$([ "$rc" = 1 ] && grep -q "no-such-model' not found" "$errf"; echo $?)" "a missing model directory: exit 1, named" "exit $rc: $(cat "$errf")"
mkdir "$tmp/empty-dir"
t -m "$tmp/empty-dir" --target de </dev/null
ok "$([ "$rc" = 1 ] && grep -q "config.json" "$errf"; echo $?)" "a directory without config.json: exit 1, says so" "exit $rc: $(cat "$errf")"
t -m "$MODEL" --target xx </dev/null
ok "$([ "$rc" = 1 ] && grep -q "unknown target language 'xx'" "$errf" && grep -q 'de (German)' "$errf" && grep -q 'cs (Czech)' "$errf"; echo $?)" \
    "an unknown target language: exit 1 and the model's languages listed" "exit $rc: $(cat "$errf")"

# empty input: no output, exit 0
t -m "$MODEL" --target de </dev/null
ok "$([ "$rc" = 0 ] && [ ! -s "$out" ]; echo $?)" "empty input: no output, exit 0" "exit $rc, $(lines "$out") lines: $(cat "$errf")"

# one line out per line in, in input order (also across batches, sorted internally by length)
cat >"$tmp/in.txt" <<'EOF'
The teacher reads a long letter today.
Der Lehrer liest heute einen langen Brief.

my sister buys three apples in the city after work with great pleasure before the meeting
le vieil homme
   
učitel čte dlouhý dopis
Every child likes warm coffee!
EOF
t -m "$MODEL" --target de --beam 3 --batch-size 3 <"$tmp/in.txt"
cp "$out" "$tmp/batched.txt"
ok "$([ "$rc" = 0 ] && [ "$(lines "$out")" = 8 ]; echo $?)" "8 lines in, 8 lines out (batch size 3)" "exit $rc, $(lines "$out") lines: $(cat "$errf")"
ok "$([ "$(sed -n 3p "$out")" = "" ] && [ "$(sed -n 6p "$out")" = "" ]; echo $?)" "empty and blank lines give empty lines"
: >"$tmp/alone.txt"
while IFS= read -r l; do printf '%s\n' "$l" | "$BIN" translate -m "$MODEL" --target de --beam 3 >>"$tmp/alone.txt" 2>/dev/null; done <"$tmp/in.txt"
ok "$(cmp -s "$tmp/alone.txt" "$tmp/batched.txt"; echo $?)" "output is in input order (= each line translated alone)" \
    "$(diff "$tmp/alone.txt" "$tmp/batched.txt" | head -5 | tr '\n' '|')"
t -m "$MODEL" --target de --beam 3 --batch-size 32 --workers 2 --threads 2 <"$tmp/in.txt"
ok "$(cmp -s "$out" "$tmp/batched.txt"; echo $?)" "--workers 2 --threads 2 and --batch-size 32 give the same output"
t -m "$MODEL" --target de --beam 3 --batch-size 3 --batching continuous <"$tmp/in.txt"
ok "$(cmp -s "$out" "$tmp/batched.txt"; echo $?)" "--batching continuous gives the same output"
t -m "$MODEL" --target fr --beam 3 <"$tmp/in.txt"
ok "$([ "$rc" = 0 ] && ! cmp -s "$out" "$tmp/batched.txt"; echo $?)" "--target fr gives other output than --target de"

# n-best and scores
t -m "$MODEL" --target de --beam 4 --nbest 3 --scores <"$tmp/in.txt"
ok "$([ "$rc" = 0 ] && [ "$(lines "$out")" = 24 ]; echo $?)" "--nbest 3: 3 lines per input line" "$(lines "$out") lines"
ok "$(awk -F '\t' 'NF < 2 || $1 !~ /^(-?[0-9]+\.[0-9]+|-inf)$/ { bad = 1 } END { exit bad }' "$out"; echo $?)" \
    "--scores: every line is score<TAB>translation" "$(head -3 "$out" | tr '\t\n' '>|')"
ok "$(awk -F '\t' 'NR % 3 == 1 { p = $1 } NR % 3 != 1 { if ($1 != "-inf" && $1 + 0 > p + 0) bad = 1; p = $1 } END { exit bad }' "$out"; echo $?)" \
    "--nbest: best first within each input line"

# bad lines: reported by line number, the rest translated, exit 1 at the end
long=$(awk 'BEGIN { for (i = 0; i < 400; i++) printf "word%d ", i; print "" }')
{ echo "first line"; printf 'bad \377 utf8\n'; echo "$long"; echo "last line"; } >"$tmp/bad.txt"
t -m "$MODEL" --target de -i "$tmp/bad.txt" -o "$tmp/bad.out"
ok "$([ "$rc" = 1 ]; echo $?)" "bad lines: exit 1" "exit $rc"
ok "$(grep -q 'line 2: invalid UTF-8' "$errf"; echo $?)" "invalid UTF-8 reported with its line number" "$(cat "$errf")"
ok "$(! grep -q 'line 3' "$errf"; echo $?)" "an over-long line is not refused (it is cut into chunks)" "$(cat "$errf")"
ok "$([ "$(lines "$tmp/bad.out")" = 4 ] && [ -n "$(sed -n 1p "$tmp/bad.out")" ] && [ -z "$(sed -n 2p "$tmp/bad.out")" ] &&
      [ -n "$(sed -n 3p "$tmp/bad.out")" ]; echo $?)" "the other lines are translated, the failed line is empty (--output)" \
    "$(tr '\n' '|' <"$tmp/bad.out")"
first_alone=$(echo "first line" | "$BIN" translate -m "$MODEL" --target de 2>/dev/null)
last_alone=$(echo "last line" | "$BIN" translate -m "$MODEL" --target de 2>/dev/null)
ok "$([ "$(sed -n 1p "$tmp/bad.out")" = "$first_alone" ] && [ "$(sed -n 4p "$tmp/bad.out")" = "$last_alone" ]; echo $?)" \
    "and they are the right translations"
ok "$(grep -q 'sentences/s' "$errf" && grep -q '1 of 4 lines failed' "$errf"; echo $?)" "--input: progress summary and failure count on stderr" "$(cat "$errf")"

# a last line without a newline, CRLF input
printf 'one\r\ntwo' | "$BIN" translate -m "$MODEL" --target de >"$out" 2>"$errf"; rc=$?
ok "$([ "$rc" = 0 ] && [ "$(lines "$out")" = 2 ]; echo $?)" "CRLF and a last line without newline: 2 lines" "exit $rc"
t -m "$MODEL" --target de -i "$tmp/no-such-file"
ok "$([ "$rc" = 1 ] && grep -q 'no-such-file' "$errf"; echo $?)" "a missing --input file: exit 1, named" "exit $rc: $(cat "$errf")"
echo "hello" >"$tmp/one.txt"
t -m "$MODEL" --target de -i "$tmp/one.txt" -o "$tmp/no-such-dir/out.txt"
ok "$([ "$rc" = 1 ] && grep -q 'no-such-dir/out.txt' "$errf"; echo $?)" "an unwritable --output: exit 1, named" "exit $rc: $(cat "$errf")"

# --alignments (the default model: real translations): "translation<TAB>i-j ...", word
# indices over the whole line, the second sentence's counted after the first's
DEF=models/default
if [ -f "$DEF/config.json" ]; then
    echo "A dog is running on the beach. Two men are playing football." >"$tmp/al.txt"
    t -m "$DEF" --target de --alignments -i "$tmp/al.txt" -q
    ok "$(awk -F '\t' -v src="$(cat "$tmp/al.txt")" '
        { ns = split(src, sw, " "); nt = split($1, tw, " "); n = split($2, pairs, " "); if (NF != 2 || n < nt) bad = 1
          for (k = 1; k <= n; k++) { split(pairs[k], ij, "-"); if (ij[1] < 0 || ij[1] >= ns || ij[2] < 0 || ij[2] >= nt) bad = 1
              seen[ij[2]] = 1; if (sw[ij[1] + 1] == "dog" && tw[ij[2] + 1] == "Hund") dog = 1
              if (sw[ij[1] + 1] == "men" && tw[ij[2] + 1] == "Männer") men = 1 }
          for (j = 0; j < nt; j++) if (!seen[j]) bad = 1 }
        END { exit bad || !dog || !men }' "$out"; echo $?)" \
        "--alignments: every target word aligned, indices in range, dog-Hund and (second sentence) men-Männer" "$(cat "$out")"
    # a no-break space (French "10 km", "Bonjour !") is no word boundary of the text, though the model
    # reads one there: the source words after it had been off by one, the last one out of range
    printf 'Il y a 10\302\240km de route jusqu\047\303\240 Paris.\n' >"$tmp/nbsp.txt"
    t -m "$DEF" --target en --alignments -i "$tmp/nbsp.txt" -q
    ok "$(awk -F '\t' -v src="$(cat "$tmp/nbsp.txt")" '
        { ns = split(src, sw, " "); nt = split($1, tw, " "); n = split($2, pairs, " "); if (NF != 2) bad = 1
          for (k = 1; k <= n; k++) { split(pairs[k], ij, "-"); if (ij[1] < 0 || ij[1] >= ns || ij[2] < 0 || ij[2] >= nt) bad = 1
              if (sw[ij[1] + 1] == "Paris." && tw[ij[2] + 1] == "Paris.") paris = 1 } }
        END { exit bad || !paris }' "$out"; echo $?)" \
        "--alignments over a no-break space: indices in range, Paris-Paris" "$(cat "$out")"
    t -m "$DEF" --target de --alignments --nbest 2 --beam 2 </dev/null
    ok "$([ "$rc" = 2 ] && grep -q 'alignments' "$errf"; echo $?)" "--alignments with --nbest 2 refused" "exit $rc: $(cat "$errf")"
    mkdir "$tmp/badalign"
    for f in "$DEF"/*; do ln -s "$(pwd)/$f" "$tmp/badalign/"; done
    rm "$tmp/badalign/config.json"
    /usr/bin/python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["decoding"]["alignment_layer"] = 3
json.dump(c, open(sys.argv[2], "w"))' "$DEF/config.json" "$tmp/badalign/config.json"
    echo "A dog." | t -m "$tmp/badalign" --target de
    ok "$([ "$rc" != 0 ] && grep -q 'alignment_layer 3, but the decoder has 3 layers' "$errf"; echo $?)" \
        "config.json decoding.alignment_layer past the decoder's layers: refused, said why" "exit $rc: $(cat "$errf")"
else
    n=$((n + 1)); echo "ok $n - # SKIP no $DEF: --alignments not checked"
fi

tap_done
