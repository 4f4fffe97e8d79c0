#!/usr/bin/python3
"""Precision by default: `--precision auto` (the default of serve and translate) runs
the fastest precision the model directory vouches for, and says why.

A copy of models/default (config.json copied, the weights and vocabulary linked)
gets its precision_checks from tools/check_precision.py, measured on the first
sentences of the in-repo markup fixture (English, with German references); then:
  - the tool wrote a check with the fields the loader reads;
  - with a passing int8 check, plain `deepmt translate` writes exactly what
    `--precision int8` writes, and not all of what `--precision f32` writes (the
    two differ on these sentences, so the check can fail), and says why on stderr;
  - with a check that misses the bar, the default is F32 again;
  - `deepmt serve`'s ready line and GET /models name the precision and the reason;
  - a malformed check is refused at load with the key named.
On a CPU whose best level is generic (no AVX2) auto keeps F32: checked as such.

Environment: DEEPMT_BIN (build/deepmt), DEEPMT_MODEL (models/default).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import tap  # noqa: E402
from testutil import repo_path, serve_log  # noqa: E402

LINES = 60


def translate(binary, model, lines, *extra):
    r = subprocess.run([binary, "translate", "-m", model, "-t", "de", "--no-split", "--progress", *extra],
                       input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=600)
    return r.stdout.splitlines(), r.stderr, r.returncode


def set_checks(model, checks):
    path = os.path.join(model, "config.json")
    cfg = json.load(open(path))
    if checks is None:
        cfg.pop("precision_checks", None)
    else:
        cfg["precision_checks"] = checks
    json.dump(cfg, open(path, "w"), indent=2)


def serve_ready(binary, model):
    """The server's log up to its ready line, and GET /models."""
    log, _, models = serve_log(binary, ["-m", model], wait_for=("; ready", "cannot load"), get="/models")
    return log, models


def main():
    binary = repo_path(os.environ.get("DEEPMT_BIN", "build/deepmt"))
    source = repo_path(os.environ.get("DEEPMT_MODEL", "models/default"))
    fixture = os.path.join(REPO, "tests", "fixtures", "markup", "en-de.jsonl")
    rows = [json.loads(line) for line in open(fixture, encoding="utf-8")][:LINES]
    src, ref = [r["source"] for r in rows], [r["reference"] for r in rows]
    tmp = tempfile.mkdtemp(prefix="deepmt-precision-")
    try:
        model = os.path.join(tmp, "model")
        os.mkdir(model)
        shutil.copy(os.path.join(source, "config.json"), model)
        for name in ("model.safetensors", "sentencepiece.model"):
            os.symlink(os.path.abspath(os.path.join(source, name)), os.path.join(model, name))
        set_checks(model, None)
        for name, lines in (("src.en", src), ("ref.de", ref)):
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        inspect = subprocess.run([binary, "inspect", model], capture_output=True, text=True).stdout
        level = next((ln.split(":", 1)[1].split("(")[0].strip() for ln in inspect.splitlines()
                      if ln.startswith("kernels")), "?")
        fast_int8 = level != "generic"  # model.h: int8 by default from avx2 up
        tap.diag(f"kernel level {level}")

        tool = [sys.executable, os.path.join(REPO, "tools", "check_precision.py"), model, "--binary", binary,
                "--src", os.path.join(tmp, "src.en"), "--ref", os.path.join(tmp, "ref.de"), "--direction", "en-de",
                "--precisions", "int8", "--threads", "2"]
        r = subprocess.run(tool + ["--write"], capture_output=True, text=True, timeout=900)
        check = json.load(open(os.path.join(model, "config.json"))).get("precision_checks", {}).get("int8", {})
        tap.ok(r.returncode == 0 and check.get("directions") == 1 and check.get("lines") == LINES
               and isinstance(check.get("mean_bleu_change"), float)
               and check["worst_bleu_change"] == check["mean_bleu_change"],
               "check_precision --write: config.json holds the int8 check (BLEU change, directions, lines)",
               detail=f"exit {r.returncode}: {check} {r.stderr[-800:]}")
        tap.diag(f"int8 against F32 on {LINES} lines: {check.get('mean_bleu_change')} BLEU")

        f32, _, rc1 = translate(binary, model, src, "--precision", "f32")
        int8, _, rc2 = translate(binary, model, src, "--precision", "int8")
        differ = sum(a != b for a, b in zip(f32, int8))
        tap.ok(rc1 == rc2 == 0 and len(f32) == len(int8) == LINES and differ > 0,
               "f32 and int8 translations differ on these sentences (so the checks below can fail)",
               detail=f"exit {rc1} {rc2}, {differ} differ")

        passing = {"mean_bleu_change": 0.0, "worst_bleu_change": -0.2, "directions": 12, "test_set": "a test"}
        set_checks(model, {"int8": passing})
        out, err, rc = translate(binary, model, src)
        if fast_int8:
            tap.ok(rc == 0 and out == int8, "a passing int8 check: the default translates as --precision int8",
                   detail=f"exit {rc}, {sum(a != b for a, b in zip(out, int8))} lines differ from int8 {err[-300:]}")
            tap.ok(out != f32, "... and not as F32")
            tap.ok("INT8 products: config.json vouches for int8: BLEU +0.00 on average, -0.20 at worst, over 12 "
                   "directions of a test)" in err, "translate's summary says which precision and why",
                   detail=err[-500:])
        else:
            tap.ok(rc == 0 and out == f32, "generic level: a passing int8 check still keeps F32 (no fast int8 here)",
                   detail=err[-300:])

        set_checks(model, {"int8": {"mean_bleu_change": -0.1, "worst_bleu_change": -0.9, "directions": 12}})
        out, err, rc = translate(binary, model, src)
        tap.ok(rc == 0 and out == f32 and "misses the bar" in err,
               "an int8 check with a direction 0.9 BLEU worse: the default is F32, and the summary says why",
               detail=f"exit {rc} {err[-400:]}")
        out, err, rc = translate(binary, model, src, "--precision", "f32")
        set_checks(model, {"int8": passing})
        out2, err2, rc2 = translate(binary, model, src, "--precision", "f32")
        tap.ok(rc2 == 0 and out2 == f32 and "asked for" in err2, "--precision f32 is one flag away",
               detail=err2[-300:])

        log, models = serve_ready(binary, model)
        want = "INT8 products: config.json vouches for int8" if fast_int8 else "F32 products: "
        tap.ok(want in log and "; ready" in log, "serve: the ready line names the precision and why",
               detail=log[-600:])
        m = (models or {}).get("models", [{}])[0]
        tap.ok(m.get("precision") == ("int8" if fast_int8 else "f32") and m.get("precision_reason", "").startswith(
            "config.json vouches for int8" if fast_int8 else "the precision config.json vouches for"),
               "GET /models: precision and precision_reason", detail=json.dumps(m)[:600])

        set_checks(model, {"int8": {"mean_bleu_change": "small", "worst_bleu_change": -0.1, "directions": 1}})
        out, err, rc = translate(binary, model, src[:2])
        tap.ok(rc != 0 and "precision_checks.int8.mean_bleu_change must be a number" in err,
               "a malformed check: the model is refused, the key named", detail=f"exit {rc} {err[-300:]}")

        r = subprocess.run([sys.executable, os.path.join(REPO, "tools", "check_precision.py"), model, "--binary",
                            binary, "--src", os.path.join(tmp, "src.en")], capture_output=True, text=True)
        tap.ok(r.returncode == 2 and "go together" in r.stderr, "check_precision: --src without --ref: exit 2, said",
               detail=r.stderr[-300:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
