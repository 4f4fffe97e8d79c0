#!/usr/bin/python3
"""Train several recipes side by side, then export the one with the best validation BLEU.

  train_sweep.py --runs runs/sweep --hours 0.14 --out runs/sweep/best \\
      --recipe "a: --lr 7e-4 --warmup 1000" --recipe "b: --lr 1e-3 --encoder-layers 12"

A small model leaves most of a GPU idle, so recipes trained at the same time cost
little more than one: each `tools/train.py train` gets the same time budget, its
own run folder (RUNS/NAME, log in RUNS/NAME.log) and the arguments given after
`--common` plus its own. Once all have stopped (a run still going after the budget
plus --grace seconds gets SIGTERM and saves cleanly), the run whose curve.csv holds
the highest mean validation BLEU is exported with `train.py export` to --out.
Exit status 1 when no run produced a validated checkpoint.
"""
import argparse
import csv
import os
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def best_of(curve):
    """-> (best mean val BLEU, its row) from a run's curve.csv, or (None, None)."""
    if not os.path.exists(curve):
        return None, None
    with open(curve) as f:
        rows = list(csv.DictReader(f))
    rows = [r for r in rows if r.get("val_bleu") not in (None, "")]
    if not rows:
        return None, None
    row = max(rows, key=lambda r: float(r["val_bleu"]))
    return float(row["val_bleu"]), row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="runs/sweep", help="parent folder of the run folders")
    ap.add_argument("--hours", required=True, help="each run's --time-budget")
    ap.add_argument("--recipe", action="append", required=True, metavar="'NAME: ARGS'")
    ap.add_argument("--common", default="", help="arguments every run gets (before its own)")
    ap.add_argument("--out", required=True, help="model directory for the best run")
    ap.add_argument("--grace", type=float, default=45, help="seconds past the budget before SIGTERM")
    a = ap.parse_args(argv)

    os.makedirs(a.runs, exist_ok=True)
    procs = {}
    start = time.time()
    for spec in a.recipe:
        name, _, extra = spec.partition(":")
        name = name.strip()
        run = os.path.join(a.runs, name)
        cmd = [sys.executable, os.path.join(HERE, "train.py"), "train", "--run", run,
               "--time-budget", a.hours] + shlex.split(a.common) + shlex.split(extra)
        log = open(os.path.join(a.runs, name + ".log"), "w")
        print(f"[sweep] {name}: {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
        procs[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), run, log)

    deadline = start + float(a.hours) * 3600 + a.grace
    termed = False
    while any(p.poll() is None for p, _, _ in procs.values()):
        if not termed and time.time() > deadline:
            for name, (p, _, _) in procs.items():
                if p.poll() is None:
                    print(f"[sweep] {name}: past the budget, SIGTERM", flush=True)
                    p.send_signal(signal.SIGTERM)
            termed = True
        time.sleep(2)

    results = []
    for name, (p, run, log) in procs.items():
        log.close()
        bleu, row = best_of(os.path.join(run, "curve.csv"))
        results.append((bleu if bleu is not None else -1.0, name, run, p.returncode, row))
        with open(os.path.join(a.runs, name + ".log")) as f:
            tail = f.readlines()[-3:]
        print(f"[sweep] {name}: exit {p.returncode}, best mean val BLEU {bleu}; "
              f"{row and {k: row[k] for k in ('step', 'val_nll', 'source_gain') if k in row}}", flush=True)
        for line in tail:
            print(f"    {line.rstrip()}", flush=True)
    results.sort(reverse=True)
    bleu, name, run, _, _ = results[0]
    if bleu < 0 or not os.path.exists(os.path.join(run, "best.pt")):
        print("[sweep] no run has a validated checkpoint", flush=True)
        return 1
    print(f"[sweep] best: {name} ({bleu:.2f}); exporting {run}/best.pt to {a.out}", flush=True)
    subprocess.run([sys.executable, os.path.join(HERE, "train.py"), "export", "--run", run,
                    "--out", a.out], check=True)
    with open(os.path.join(a.out, "sweep.txt"), "w") as f:
        for b, n, r, rc, row in results:
            f.write(f"{n}\t{b:.2f}\texit {rc}\t{row and row.get('step')}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
