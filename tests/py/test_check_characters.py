#!/usr/bin/python3
"""tools/check_characters.py: it measures the characters a model loses with the model
alone (pass_through off, whatever the directory's config says), stores them with
--write as decoding.pass_through_characters in a form the engine loads, and refuses bad
usage. TAP.

With the shipped model, the characters lost in every one of its outputs (~ ^ \\ `,
and <, which the vocabulary lacks) must be among those chosen, and what the shipped
config.json holds must agree with what the tool measures there, so that a new model is
not shipped with the old model's list: every character lost in at least half of the
outputs is in it, none lost in under a tenth (the margin lets a precision or a CPU
change one output without failing the test).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tap  # noqa: E402
from testutil import engine, model_with_config, model_with_decoding, repo_path  # noqa: E402

TOOL = repo_path("tools/check_characters.py")


def run(*args):
    r = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=600)
    return r.returncode, r.stdout, r.stderr


def rates(stdout):
    """{character: share of outputs that lost it} from the tool's table"""
    for i, line in enumerate(stdout.splitlines()):
        if line.startswith("lost by"):
            cells = stdout.splitlines()[i + 1].split("  ")
            pairs = [c.strip().rsplit(" ", 1) for c in cells if c.strip()]
            return {c: int(f.split("/")[0]) / int(f.split("/")[1]) for c, f in pairs}
    return {}


def chosen(stdout):
    for line in stdout.splitlines():
        if line.startswith("pass_through_characters"):
            return json.loads(line.split(": ", 1)[1])
    return None


def main():
    binary, base = engine()
    if not binary:
        return tap.done()
    tmp = tempfile.mkdtemp(prefix="deepmt-chars-test-")
    try:
        with open(os.path.join(base, "config.json")) as f:
            shipped = json.load(f).get("decoding", {}).get("pass_through_characters", "")
        # a directory whose config already passes everything through: the tool must measure the model alone
        d = model_with_decoding(base, tmp, "copy", pass_through=True, pass_through_characters="$~")
        rc, out, err = run(d, "--binary", binary, "--write")
        got = chosen(out)
        tap.ok(rc == 0 and got is not None and all(c in got for c in "~^\\`<"),
               "the characters lost in every output are chosen", detail=f"{rc} {got!r}\n{out}{err}")
        loss = rates(out)
        stale = [c for c, r in loss.items() if (r >= 0.5 and c not in shipped) or (r < 0.1 and c in shipped)]
        tap.ok(len(loss) > 10 and not stale, f"the shipped config.json agrees with what the tool measures ({shipped!r})",
               detail=f"measured {got!r}, these disagree: {stale}: run tools/check_characters.py {base} --write")
        with open(os.path.join(d, "config.json")) as f:
            written = json.load(f)["decoding"]
        tap.ok(written.get("pass_through_characters") == got and written.get("pass_through") is True,
               "--write stores the list and leaves pass_through as it was", detail=str(written))
        r = subprocess.run([binary, "inspect", d], capture_output=True, text=True, timeout=120)
        tap.ok(r.returncode == 0 and f"(and words with any of {got})" in r.stdout,
               "the engine loads the written config.json and names the characters", detail=r.stdout + r.stderr)

        no_en = model_with_config(base, tmp, "no-en", lambda c: c["languages"][0].update(code="xx"))
        rc, out, err = run(no_en, "--binary", binary)
        tap.ok(rc == 2 and "no \"en\"" in err, "a model without English is refused: the sentences are English",
               detail=f"{rc} {err}")
        rc, out, err = run(d, "--binary", binary, "--min-loss", "0")
        tap.ok(rc == 2 and "--min-loss" in err, "--min-loss 0 is refused", detail=f"{rc} {err}")
        rc, out, err = run(os.path.join(tmp, "nowhere"), "--binary", binary)
        tap.ok(rc == 2 and "config.json" in err, "a missing model directory is refused, named", detail=f"{rc} {err}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
