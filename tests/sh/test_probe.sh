#!/bin/sh
# test_probe.sh — `deepmt probe` (cli/cmd_probe.c), the health check of images without
# curl: exit 0 on 200, 1 otherwise with the reason; the port from DEEPMT_PROBE_PORT,
# else DEEPMT_PORT; the command survives being joined into one string and run by
# /bin/sh -c, as podman runs a Kubernetes exec probe; a server that never answers
# fails within --timeout. TAP. DEEPMT_BIN picks the binary (default build/deepmt).
set -u
cd "$(dirname "$0")/../.."
BIN=${DEEPMT_BIN:-build/deepmt}
MODEL=tests/fixtures/tiny-model
. tests/sh/tap.sh
skip_unless_built "$BIN"
tmp=$(mktemp -d); pids=""
trap 'for p in $pids; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

port=$(free_port)
env -u DEEPMT_PROBE_PORT DEEPMT_PORT="$port" "$BIN" probe 2>"$tmp/err"; rc=$?
[ "$rc" = 1 ] && grep -q "cannot connect to 127.0.0.1:$port" "$tmp/err"
ok $? "no server: exit 1, says it cannot connect (port from DEEPMT_PORT)" "exit $rc: $(cat "$tmp/err")"

pport=$(free_port)
"$BIN" serve --model "$MODEL" --port "$port" --probe-port "$pport" >"$tmp/log" 2>&1 &
pids="$pids $!"
i=0
while [ $i -lt 100 ] && ! "$BIN" probe /ready --port "$port" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
env -u DEEPMT_PROBE_PORT DEEPMT_PORT="$port" "$BIN" probe; ok $? "GET /health: exit 0"
env -u DEEPMT_PROBE_PORT "$BIN" probe /ready --port "$port"; ok $? "GET /ready --port N: exit 0 once loaded"
env -u DEEPMT_PROBE_PORT "$BIN" probe /nope --port "$port" 2>"$tmp/err"; rc=$?
[ "$rc" = 1 ] && grep -q "answered 404" "$tmp/err"; ok $? "a 404: exit 1 and the status" "exit $rc: $(cat "$tmp/err")"
DEEPMT_PORT=1 DEEPMT_PROBE_PORT="$pport" "$BIN" probe /ready; ok $? "DEEPMT_PROBE_PORT wins over DEEPMT_PORT"
DEEPMT_PORT="$port" DEEPMT_PROBE_PORT=0 "$BIN" probe /ready; ok $? "DEEPMT_PROBE_PORT=0 (off): DEEPMT_PORT"

# podman kube play turns an exec probe into one string, "ARGS... || exit 1", run by a shell
cmd="$BIN probe /ready"
env -u DEEPMT_PROBE_PORT DEEPMT_PORT="$port" /bin/sh -c "$cmd || exit 1"; ok $? "joined and run by /bin/sh -c (as podman runs exec probes): exit 0"
env -u DEEPMT_PROBE_PORT DEEPMT_PORT="$port" /bin/sh -c "$BIN probe /nope || exit 1" 2>/dev/null; rc=$?
[ "$rc" = 1 ]; ok $? "... and exit 1 on a failure" "exit $rc"

# a listener that accepts and never answers: --timeout bounds the wait
sport=$(free_port)
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
open(sys.argv[2], "w").close(); time.sleep(30)' "$sport" "$tmp/listening" &
pids="$pids $!"
i=0; while [ $i -lt 50 ] && [ ! -e "$tmp/listening" ]; do sleep 0.1; i=$((i + 1)); done
t0=$(date +%s)
"$BIN" probe --port "$sport" --timeout 1 2>"$tmp/err"; rc=$?
t=$(( $(date +%s) - t0 ))
[ "$rc" = 1 ] && [ "$t" -le 3 ] && grep -q "no answer in time" "$tmp/err"
ok $? "a server that never answers: exit 1 within --timeout 1 ($t s)" "exit $rc: $(cat "$tmp/err")"
"$BIN" probe health >/dev/null 2>&1; rc=$?
[ "$rc" = 2 ]; ok $? "a path without / is a usage error (exit 2)" "exit $rc"
tap_done
