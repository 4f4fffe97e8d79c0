#!/bin/sh
# Is a new snapshot of the general run worth shipping? Measures it against the
# shipped model the way the model card's figures are measured, one build for both,
# and prints what the shipping rule asks (docs/training.md, "Shipping a snapshot"):
# a lower general dev NLL, ahead on most whole-set directions, +0.10 on average.
#
#   scripts/snapshot_check.sh RUN_DIR [CHECKPOINT]   (default RUN_DIR/checkpoint.pt)
#
# Environment (defaults): BUILD (build: its deepmt serves both), BASE (models/default),
# OUT (build/snapshot-check), SHARED (../shared), PYTHON (/usr/bin/python3),
# CHECK_LIMIT (unset: the whole sets, as the card; N: the first N lines a direction,
# a quick trial whose figures are not the card's), UI (runs/data/ui: where it holds
# test/, the user-interface strings' six directions too, reported beside the rule).
#
# Steps, each logged to OUT/*.log: the candidate is BASE with the new weights
# (tools/train.py export over a copy: the same vocabulary, shortlist, decoding rules
# and batch size) in OUT/candidate; the whole Tatoeba and FLORES sets of the six
# English directions, FLORES's six directions without English, `make eval`'s 300
# lines a direction, for BASE (kept in OUT/base-* while BASE and the build are
# unchanged) and the candidate against it (a paired bootstrap test a direction);
# the teacher-forced NLL of both on the run's dev data (tools/train.py nll --like);
# int8 against F32 for the candidate (tools/check_precision.py --write). About 8
# minutes on 2 otherwise idle cores (Sapphire Rapids, amx kernels; 2026-12-07), 6
# without the baseline; several times that beside a training run.
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
RUN=$1
CKPT=${2:-$RUN/checkpoint.pt}
BUILD=${BUILD:-build}
BASE=${BASE:-models/default}
OUT=${OUT:-build/snapshot-check}
SHARED=${SHARED:-../shared}
PYTHON=${PYTHON:-/usr/bin/python3}
LIMIT=${CHECK_LIMIT:-}
UI=${UI-runs/data/ui}
[ -n "$UI" ] && [ ! -d "$UI/test" ] && UI=

die() { echo "snapshot_check: $*" >&2; exit 2; }
[ -f "$CKPT" ] || die "no checkpoint at $CKPT"
[ -x "$BUILD/deepmt" ] || die "no $BUILD/deepmt (run make)"
[ -f "$BASE/config.json" ] || die "no model directory at $BASE"
mkdir -p "$OUT"
say() { echo "[$(date +%H:%M:%S)] $*"; }

# the three measurements of one model: whole English sets, whole FLORES without
# English, make eval's 300 lines (evaluate.py's --limit where CHECK_LIMIT is set)
measure() { # model, prefix, baseline prefix (or "")
    model=$1 pre=$2 base=$3
    whole=${LIMIT:+--limit $LIMIT}
    for part in ew ewj e ${UI:+eu}; do
        case $part in
        ew) sets=tatoeba,flores101 dirs=en-de,de-en,en-fr,fr-en,en-cs,cs-en rob=20 lim=$whole ;;
        ewj) sets=flores101 dirs=de-fr,fr-de,de-cs,cs-de,fr-cs,cs-fr rob=20 lim=$whole ;;
        e) sets=all dirs=all rob=150 lim="--limit ${LIMIT:-300}" ;;
        eu) sets=ui dirs=all rob=20 lim=$whole ;;
        esac
        say "$model: $part"
        # shellcheck disable=SC2086  # $lim is options, split on purpose
        env BUILD="$BUILD" MODEL="$model" SHARED="$SHARED" EVAL_OUT="$OUT/$pre-$part" EVAL_SETS=$sets \
            EVAL_DIRECTIONS=$dirs EVAL_ROBUSTNESS_LIMIT=$rob EVAL_UI="$UI" \
            EVAL_BASELINE="${base:+$OUT/$base-$part/report.json}" \
            scripts/eval_default.sh $lim >"$OUT/$pre-$part.log" 2>&1 ||
            die "$part of $model failed: $OUT/$pre-$part.log"
    done
}

stamp=$(cat "$BASE/model.safetensors" "$BASE/config.json" "$BASE/shortlist.bin" "$BUILD/deepmt" \
    ${UI:+"$UI"/test/*} 2>/dev/null |
    sha256sum | cut -c1-16)-${LIMIT:-whole}
if [ "$(cat "$OUT/base.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -f "$OUT/base.stamp"
    measure "$BASE" base ""
    echo "$stamp" >"$OUT/base.stamp"
else
    say "$BASE: measured before with this build (OUT/base-*)"
fi

say "export $CKPT"
rm -rf "$OUT/candidate"
cp -r "$BASE" "$OUT/candidate"
"$PYTHON" tools/train.py export --run "$RUN" --checkpoint "$CKPT" --spm "$BASE/sentencepiece.model" \
    --out "$OUT/candidate" >"$OUT/export.log" 2>&1 || die "export failed: $OUT/export.log"
measure "$OUT/candidate" cand base
say "dev NLL"
"$PYTHON" tools/train.py nll "$BASE" "$OUT/candidate" --like "$CKPT" --general-val-lines 400 \
    --out "$OUT/nll.json" >"$OUT/nll.log" 2>&1 || die "nll failed: $OUT/nll.log"
say "int8"
"$PYTHON" tools/check_precision.py "$OUT/candidate" --sets multi30k/test_2016_flickr,flores101,tatoeba \
    --limit "${LIMIT:-500}" --precisions int8 --write >"$OUT/int8.log" 2>&1 || die "int8 check failed: $OUT/int8.log"
say "characters the model loses"
"$PYTHON" tools/check_characters.py "$OUT/candidate" --write >"$OUT/characters.log" 2>&1 ||
    die "character check failed: $OUT/characters.log"
tail -2 "$OUT/characters.log"

"$PYTHON" scripts/snapshot_summary.py "$OUT"
