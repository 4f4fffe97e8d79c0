# tap.sh — TAP helpers for tests/sh/test_*.sh; source it after cd to the repository root.
#   ok STATUS "what" [diagnostic]   one result line; STATUS 0 passes, else "not ok" + diagnostic
#   skip_unless_built BIN            a single SKIP line and exit 0 when BIN is not built
#   tap_done                         the plan line; returns 1 when anything failed
# tests/run.sh counts the "ok" / "not ok" / "# SKIP" lines.
n=0; failed=0

ok() {
    n=$((n + 1))
    if [ "$1" = 0 ]; then echo "ok $n - $2"
    else echo "not ok $n - $2"; failed=$((failed + 1)); [ -n "${3:-}" ] && printf '#   %s\n' "$3"; fi
}

skip_unless_built() {
    if [ ! -x "$1" ]; then echo "ok 1 - # SKIP $1 not built"; exit 0; fi
}

tap_done() {
    echo "1..$n"
    [ "$failed" = 0 ]
}
