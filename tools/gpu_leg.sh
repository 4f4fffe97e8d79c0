#!/bin/bash
# gpu_leg.sh — a short GPU leg of the general model's training, in one command:
# continue from the shipped weights (--init-from models/default) for H1 hours, then
# a cooldown branch sized from the measured step rate (about COOL seconds, capped at
# H2 hours), export, and leave what the CPU side needs in $OUT (config.json, the
# weights split in 15 MB parts, logs, curves).
#
# For a lent accelerator machine that sees only the repository (and its ignored
# folders named to travel): put the data in an ignored folder first, e.g.
#   echo /.gpudata/ >> .git/info/exclude
#   mkdir .gpudata && cp -r ../shared/data/multi30k ../shared/data/general .gpudata/
# run `bash tools/gpu_leg.sh` there with .gpudata carried, then here:
#   cat OUT/model.part.* > models/default/model.safetensors; cp OUT/config.json models/default/
# and the shipping checks of docs/training.md (check_precision --write, make eval,
# the floor tests). On an H200 (2026-12-04): 24,000-token batches at 200,000-250,000
# target tokens/s, 3,340 steps in 4.5 minutes, then 1,275 cooldown steps.
# Environment: GPUDATA (default .gpudata), MT (tokens a batch, 24000), H1 (0.085),
# H2 (0.045), COOL (100), M30K (the Multi30k share, 0.25), PIVOT (the pivot share, 0.15), OUT (where results go; required).
cd "$(dirname "$0")/.." || exit 1
: "${OUT:?set OUT to a folder for the results}"
export PYTHONUNBUFFERED=1
G=${GPUDATA:-.gpudata}
D="--data $G/multi30k --general $G/general --spm models/default/sentencepiece.model --amp auto --threads 8 --max-tokens ${MT:-24000} --multi30k-share ${M30K:-0.25} --pivot-share ${PIVOT:-0.15}"
nvidia-smi -L 2>/dev/null
python3 tools/train.py train $D --run runs/gpu --time-budget "${H1:-0.085}" --init-from models/default >"$OUT/main.log" 2>&1
echo "main rc=$?"; tail -4 "$OUT/main.log"
N=$(python3 - "$OUT/main.log" "${COOL:-100}" <<'PY'
import re, sys
log = open(sys.argv[1]).read()
pts = [(int(h) * 3600 + int(m) * 60 + int(s), int(n))
       for h, m, s, n in re.findall(r"^\[(\d+):(\d+):(\d+)\] step (\d+) ", log, re.M)]
pts = pts[len(pts) // 3:]  # past the start-up
rate = (pts[-1][1] - pts[0][1]) / max(1, pts[-1][0] - pts[0][0]) if len(pts) > 1 else 5
print(max(100, int(rate * float(sys.argv[2]))))
PY
)
echo "cooldown steps: $N"
python3 tools/train.py train $D --run runs/gpu-cd --time-budget "${H2:-0.045}" --resume runs/gpu/checkpoint.pt \
    --cooldown "$N" >"$OUT/cd.log" 2>&1
echo "cooldown rc=$?"; tail -4 "$OUT/cd.log"
rm -rf /tmp/gpu-leg-model && cp -r models/default /tmp/gpu-leg-model && rm -rf /tmp/gpu-leg-model/data
python3 tools/train.py export --run runs/gpu-cd --checkpoint runs/gpu-cd/checkpoint.pt \
    --spm models/default/sentencepiece.model --out /tmp/gpu-leg-model >"$OUT/export.log" 2>&1
echo "export rc=$?"; tail -2 "$OUT/export.log"
cp /tmp/gpu-leg-model/config.json "$OUT/config.json"
split -b 15m /tmp/gpu-leg-model/model.safetensors "$OUT/model.part."
cp runs/gpu/curve.csv "$OUT/main_curve.csv" 2>/dev/null
cp runs/gpu-cd/curve.csv "$OUT/cd_curve.csv" 2>/dev/null
ls -la "$OUT"
