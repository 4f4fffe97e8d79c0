#!/bin/sh
# test_model_files.sh — `deepmt serve` against model files that change or are not
# files (docs/security.md). TAP.
#   - an F32 model (every tensor could be a view of the file) keeps answering after
#     its model.safetensors is truncated and rewritten (cp over it) or deleted;
#   - a FIFO as config.json or model.safetensors is refused at once (it used to
#     block for ever, and SIGTERM then hung), and SIGTERM ends the server promptly;
#   - SIGTERM during a long load stops the server without waiting for the loader.
# DEEPMT_BIN picks the binary (default build/deepmt).
set -u
cd "$(dirname "$0")/../.."
BIN=${DEEPMT_BIN:-build/deepmt}
PY=${PYTHON:-/usr/bin/python3}
. tests/sh/tap.sh
skip_unless_built "$BIN"
command -v curl >/dev/null || { echo "ok 1 - # SKIP curl not installed"; exit 0; }
tmp=$(mktemp -d); pid=""
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
log=$tmp/log

# start DIR [flags]: serves DIR on a free port; sets pid and port (empty if it never listened)
start() {
    dir=$1; shift
    : >"$log"
    "$BIN" serve --model "$dir" --host 127.0.0.1 --port 0 --workers 1 "$@" >"$log" 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 100 ] && ! grep -q 'listening on' "$log" && kill -0 "$pid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -n1)
}
# wait_log PATTERN [tenths]: 0 once the log matches
wait_log() {
    i=0
    while [ $i -lt "${2:-100}" ]; do grep -q "$1" "$log" && return 0; sleep 0.1; i=$((i + 1)); done
    return 1
}
# stop_within TENTHS: SIGTERM, then 0 if the server exited within that time (else kill -9)
stop_within() {
    kill -TERM "$pid" 2>/dev/null
    i=0
    while [ $i -lt "$1" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=""; return 1; fi
    wait "$pid" 2>/dev/null; pid=""; return 0
}
translate() {
    curl -s -m 30 -o "$tmp/out" -w '%{http_code}' "http://127.0.0.1:$port/translate" \
         -H 'Content-Type: application/json' -d '{"q": "the teacher reads a long letter", "source": "en", "target": "de"}'
}

# ---- an F32 copy of the tiny model (standard library only)
mkdir -p "$tmp/f32"
cp tests/fixtures/tiny-model/config.json tests/fixtures/tiny-model/sentencepiece.model "$tmp/f32/"
"$PY" - tests/fixtures/tiny-model/model.safetensors "$tmp/f32/model.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
hdr, data = json.loads(b[8:8 + n]), b[8 + n:]
out, blobs, pos = {}, [], 0
for k, v in hdr.items():
    if k == "__metadata__":
        continue
    s, e = v["data_offsets"]
    fmt = {"F16": "e", "F32": "f"}[v["dtype"]]
    vals = struct.unpack("<%d%s" % ((e - s) // struct.calcsize(fmt), fmt), data[s:e])
    blob = struct.pack("<%df" % len(vals), *vals)
    out[k] = {"dtype": "F32", "shape": v["shape"], "data_offsets": [pos, pos + len(blob)]}
    blobs.append(blob)
    pos += len(blob)
h = json.dumps(out).encode()
h += b" " * (-(8 + len(h)) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
ok $? "an F32 copy of the tiny model"

start "$tmp/f32"
wait_log 'ready'; ok $? "the F32 model loads" "$(head -c 400 "$log")"
code=$(translate); cp "$tmp/out" "$tmp/before"
[ "$code" = 200 ]; ok $? "it translates" "HTTP $code: $(head -c 300 "$tmp/out")"
# cp truncates the file and writes the new bytes into the same inode
head -c 100000 /dev/zero | tr '\0' 'x' >"$tmp/other"
: >"$tmp/f32/model.safetensors"
code=$(translate)
[ "$code" = 200 ] && cmp -s "$tmp/out" "$tmp/before"; ok $? "same answer after model.safetensors is truncated" \
    "HTTP $code: $(head -c 300 "$tmp/out"); $(tail -c 300 "$log")"
cp "$tmp/other" "$tmp/f32/model.safetensors"
code=$(translate)
[ "$code" = 200 ] && cmp -s "$tmp/out" "$tmp/before"; ok $? "same answer after another file is copied over it" "HTTP $code"
rm -f "$tmp/f32/model.safetensors"
code=$(translate)
[ "$code" = 200 ] && cmp -s "$tmp/out" "$tmp/before"; ok $? "same answer after it is deleted" "HTTP $code"
kill -0 "$pid" 2>/dev/null; ok $? "the server is still running"
stop_within 100; ok $? "and stops on SIGTERM"

# ---- FIFOs instead of files
for f in config.json model.safetensors; do
    rm -rf "$tmp/fifo"; mkdir -p "$tmp/fifo"
    cp tests/fixtures/tiny-model/* "$tmp/fifo/"
    rm "$tmp/fifo/$f"; mkfifo "$tmp/fifo/$f"
    start "$tmp/fifo"
    wait_log 'not a regular file' 50; found=$?
    i=0; while [ $i -lt 50 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        ok 1 "$f as a FIFO: refused and the server exits" "still running after 5 s: $(head -c 300 "$log")"
        stop_within 50; ok $? "$f as a FIFO: SIGTERM stops the server within 5 s"
    else
        wait "$pid"; rc=$?; pid=""
        [ "$found" = 0 ] && [ "$rc" != 0 ]; ok $? "$f as a FIFO: refused at once, exit status $rc" "$(head -c 300 "$log")"
    fi
done

# ---- SIGTERM during a long load: a zero-filled F16 model of ~200 MB (sparse on disk)
mkdir -p "$tmp/big"
cp tests/fixtures/tiny-model/config.json tests/fixtures/tiny-model/sentencepiece.model "$tmp/big/"
"$PY" - "$tmp/big" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
cfg = json.load(open(os.path.join(d, "config.json")))
cfg.update(d_model=1024, heads=16, ffn_dim=4096, encoder_layers=4, decoder_layers=4)
json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
D, F, V = 1024, 4096, cfg["vocab_size"]
shapes = [("encoder.embed_tokens.weight", [V, D])]
if not cfg["share_embeddings"]:
    shapes.append(("decoder.embed_tokens.weight", [V, D]))
if not cfg["tie_output"]:
    shapes.append(("decoder.output_projection.weight", [V, D]))
for st in ("encoder", "decoder"):
    for i in range(cfg[st + "_layers"]):
        p = "%s.layers.%d" % (st, i)
        for a in ["self_attn"] + (["encoder_attn"] if st == "decoder" else []):
            for pr in ("q", "k", "v", "out"):
                shapes += [("%s.%s.%s_proj.weight" % (p, a, pr), [D, D]), ("%s.%s.%s_proj.bias" % (p, a, pr), [D])]
            shapes += [("%s.%s_layer_norm.weight" % (p, a), [D]), ("%s.%s_layer_norm.bias" % (p, a), [D])]
        shapes += [(p + ".fc1.weight", [F, D]), (p + ".fc1.bias", [F]), (p + ".fc2.weight", [D, F]),
                   (p + ".fc2.bias", [D]), (p + ".final_layer_norm.weight", [D]), (p + ".final_layer_norm.bias", [D])]
hdr, pos = {}, 0
for name, shape in shapes:
    n = 2
    for s in shape:
        n *= s
    hdr[name] = {"dtype": "F16", "shape": shape, "data_offsets": [pos, pos + n]}
    pos += n
h = json.dumps(hdr).encode()
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.truncate(8 + len(h) + pos)
PY
start "$tmp/big"
stop_within 30; stopped=$?
if grep -q 'ready' "$log"; then
    echo "ok $((n + 1)) - # SKIP the load finished before the signal (a fast machine)"; n=$((n + 1))
else
    [ "$stopped" = 0 ] && grep -q 'stopped while the model was loading' "$log"
    ok $? "SIGTERM during the load: stops within 3 s without waiting for the loader" "$(tail -c 400 "$log")"
fi
tap_done
