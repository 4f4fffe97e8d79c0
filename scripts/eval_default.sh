#!/bin/sh
# make eval: serve a model on a free local port, evaluate it on every test set
# (Multi30k test_2016/test_2017, FLORES-101 devtest, Tatoeba, newstest; all their
# directions) with scripts/evaluate.py, run the robustness report
# (scripts/robustness.py), stop the server, even when something fails. Prints the
# tables; writes $EVAL_OUT/report.json, robustness.json and one hypothesis file a
# set and direction into $EVAL_OUT.
#
# Environment (defaults): BUILD (build), MODEL (models/default), SHARED (../shared),
# PYTHON (/usr/bin/python3), EVAL_OUT ($BUILD/eval), EVAL_SPLIT (all; or one Multi30k
# split such as test_2016_flickr, without the robustness report), EVAL_SETS (all, or
# e.g. tatoeba,flores101), EVAL_DIRECTIONS (all), EVAL_ROBUSTNESS_LIMIT (300 sentences
# a direction), EVAL_READY_TIMEOUT (120 s), EVAL_BASELINE (unset; an earlier report.json:
# the new one is compared with it by scripts/compare_reports.py, a bootstrap test per
# direction with every test set), EVAL_UI (runs/data/ui where it holds test/: the
# user-interface strings' test set, tools/ui_strings.py; empty: none). Extra
# arguments go to evaluate.py,
# e.g. scripts/eval_default.sh --limit 100 --concurrency 8
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/default}
SHARED=${SHARED:-../shared}
PYTHON=${PYTHON:-/usr/bin/python3}
EVAL_OUT=${EVAL_OUT:-$BUILD/eval}
EVAL_SPLIT=${EVAL_SPLIT:-all}
EVAL_SETS=${EVAL_SETS:-all}
EVAL_ROBUSTNESS_LIMIT=${EVAL_ROBUSTNESS_LIMIT:-300}
EVAL_DIRECTIONS=${EVAL_DIRECTIONS:-all}
EVAL_READY_TIMEOUT=${EVAL_READY_TIMEOUT:-120}
EVAL_BASELINE=${EVAL_BASELINE:-}
EVAL_UI=${EVAL_UI-runs/data/ui}
[ -n "$EVAL_UI" ] && [ ! -d "$EVAL_UI/test" ] && EVAL_UI=
BIN=$BUILD/deepmt
DATA=$SHARED/data/multi30k

die() { echo "eval: $*" >&2; exit 2; }
[ -x "$BIN" ] || die "no server binary at $BIN (run make)"
[ -d "$MODEL" ] || die "no model directory at $MODEL (set MODEL=...)"
[ -d "$DATA" ] || die "no Multi30k data at $DATA (set SHARED=...; see docs/evaluation.md)"
mkdir -p "$EVAL_OUT" || die "cannot create $EVAL_OUT"
if [ -n "$EVAL_BASELINE" ]; then
    # checked before the run, not after it: the baseline's folder must outlive it
    [ -f "$EVAL_BASELINE" ] || die "no baseline report at $EVAL_BASELINE (EVAL_BASELINE)"
    [ "$(cd "$(dirname "$EVAL_BASELINE")" && pwd -P)" != "$(cd "$EVAL_OUT" && pwd -P)" ] ||
        die "EVAL_BASELINE is in $EVAL_OUT, which this run overwrites: copy that folder first" \
            "(cp -r $EVAL_OUT $EVAL_OUT-before) or set EVAL_OUT elsewhere"
fi

PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') \
    || die "cannot find a free port"
URL=http://127.0.0.1:$PORT
LOG=$EVAL_OUT/server.log

"$BIN" serve --model "$MODEL" --host 127.0.0.1 --port "$PORT" >"$LOG" 2>&1 &
pid=$!

stop_server() {
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        echo "eval: server did not stop within 30 s of SIGTERM; killing it" >&2
        kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
}
trap stop_server EXIT
trap 'exit 130' INT TERM HUP

echo "eval: serving $MODEL on $URL (log: $LOG)" >&2
"$PYTHON" - "$URL" "$pid" "$EVAL_READY_TIMEOUT" <<'PY' || { tail -n 20 "$LOG" >&2; exit 1; }
import os, sys, time, urllib.error, urllib.request
url, pid, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
deadline = time.monotonic() + limit
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("eval: the server exited before it was ready")
    try:
        with opener.open(url + "/ready", timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except (urllib.error.URLError, OSError):
        pass
    time.sleep(0.25)
sys.exit(f"eval: {url}/ready did not answer 200 within {limit:.0f} s")
PY
# the scores are those of the precision the server runs (--precision auto: int8 where
# config.json vouches for it; DEEPMT_PRECISION=f32 make eval for F32's)
echo "eval: $(sed -n 's/.*loaded in [0-9.]* s[: ]*\(.*\); ready.*/\1/p' "$LOG" | head -1)" >&2

if [ "$EVAL_SPLIT" = all ]; then
    # every test set: Multi30k test_2016/test_2017 and the general-domain sets
    # (FLORES-101 devtest, Tatoeba, newstest), then the robustness report
    "$PYTHON" scripts/evaluate.py --url "$URL" --suite "$SHARED" --sets "$EVAL_SETS" \
        --directions "$EVAL_DIRECTIONS" --json "$EVAL_OUT/report.json" --hyp-dir "$EVAL_OUT" \
        ${EVAL_UI:+--ui "$EVAL_UI"} "$@"
    rc=$?
    if [ $rc = 0 ] && [ -d "$SHARED/data/general/test" ]; then
        "$PYTHON" scripts/robustness.py --url "$URL" --suite "$SHARED" --limit "$EVAL_ROBUSTNESS_LIMIT" \
            --json "$EVAL_OUT/robustness.json"
        rc=$?
    fi
else
    "$PYTHON" scripts/evaluate.py --url "$URL" --multi30k "$DATA" --split "$EVAL_SPLIT" \
        --directions "$EVAL_DIRECTIONS" --json "$EVAL_OUT/report.json" --hyp-dir "$EVAL_OUT" "$@"
    rc=$?
fi
[ $rc = 0 ] && echo "eval: report in $EVAL_OUT/report.json" >&2
if [ $rc = 0 ] && [ -n "$EVAL_BASELINE" ]; then
    echo "eval: against $EVAL_BASELINE" >&2
    if [ "$EVAL_SPLIT" = all ]; then
        "$PYTHON" scripts/compare_reports.py "$EVAL_BASELINE" "$EVAL_OUT/report.json" --suite "$SHARED"
    else
        "$PYTHON" scripts/compare_reports.py "$EVAL_BASELINE" "$EVAL_OUT/report.json"
    fi
    rc=$?
fi
exit $rc
