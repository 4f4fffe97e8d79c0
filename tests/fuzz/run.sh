#!/bin/sh
# Runs the libFuzzer targets built by `make fuzz-bin`.
#   tests/fuzz/run.sh SECONDS [NAME...]     (NAME: text for fuzz_text; default: every target)
# libFuzzer targets are $FUZZ_DIR/fuzz_NAME; a tests/fuzz/fuzz_NAME.py runs as
# `fuzz_NAME.py --seconds SECONDS` (its own mutator and corpus handling).
# Each target starts from its committed corpus tests/fuzz/corpus/NAME/ (seeds and
# regression inputs, replayed first), writes new inputs to $FUZZ_WORK/NAME/ (default
# $FUZZ_DIR/corpus) and crashes to $FUZZ_DIR/artifacts/, and runs for SECONDS. Extra libFuzzer flags:
# FUZZ_FLAGS. The log of a run: $FUZZ_WORK/NAME.log. Exits 1 when any target found a crash, leak or timeout; prints each
# target's last stats line (executions, exec/s, cov, ft).
set -u
cd "$(dirname "$0")/../.."
FUZZ_DIR=${FUZZ_DIR:-build/fuzz}
seconds=${1:?usage: tests/fuzz/run.sh SECONDS [NAME...]}
shift
names=$*
if [ -z "$names" ]; then
  for b in "$FUZZ_DIR"/fuzz_*; do [ -x "$b" ] && [ -f "$b" ] && names="$names ${b##*/fuzz_}"; done
  for p in tests/fuzz/fuzz_*.py; do [ -f "$p" ] && p=${p##*/fuzz_} && names="$names ${p%.py}"; done
fi
[ -n "$names" ] || { echo "run.sh: no fuzz targets in $FUZZ_DIR (make fuzz-bin)" >&2; exit 1; }
status=0
mkdir -p "$FUZZ_DIR/artifacts"
for name in $names; do
  bin=$FUZZ_DIR/fuzz_$name
  if [ ! -x "$bin" ] && [ -f "tests/fuzz/fuzz_$name.py" ]; then
    # a Python target (its own mutator; see its header): SECONDS of it
    if "${PYTHON:-/usr/bin/python3}" "tests/fuzz/fuzz_$name.py" --seconds "$seconds"; then
      echo "fuzz_$name: ok in ${seconds}s"
    else
      echo "fuzz_$name: FAILED"; status=1
    fi
    continue
  fi
  [ -x "$bin" ] || { echo "run.sh: $bin not built" >&2; status=1; continue; }
  work=${FUZZ_WORK:-$FUZZ_DIR/corpus}/$name
  mkdir -p "$work" "tests/fuzz/corpus/$name"
  log=$work.log
  dict=""; [ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
  # ASan's leak check runs at exit; -timeout catches hangs (a load must not block).
  "$bin" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$FUZZ_DIR/artifacts/${name}-" $dict ${FUZZ_FLAGS:-} \
    "$work" "tests/fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  stats=$(grep -E '^#[0-9]+' "$log" | tail -1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  persec=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  if [ "$rc" = 0 ]; then
    echo "fuzz_$name: ok, ${runs:-?} runs, ${persec:-?} exec/s in ${seconds}s; last: $stats"
  else
    echo "fuzz_$name: FAILED (status $rc); log: $log"
    grep -E 'ERROR|SUMMARY|Test unit written|fuzz_[a-z]+: ' "$log" | head -20
    status=1
  fi
done
exit $status
