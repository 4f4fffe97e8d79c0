#!/usr/bin/python3
"""make eval's EVAL_BASELINE (scripts/eval_default.sh, TAP): the real server on 30
Tatoeba en-de sentences, twice; the second run, given the first's report, prints
the comparison (the same model: change +0.00, p 1). A baseline inside the folder
the run would overwrite, and a missing one, are refused before a server starts.

Environment: DEEPMT_BIN (default build/deepmt), DEEPMT_MODEL (default
models/default), DEEPMT_SHARED (default ../shared).
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import tap  # noqa: E402
from testutil import repo_path  # noqa: E402

SCRIPT = os.path.join(REPO, "scripts", "eval_default.sh")


def main():
    binary = repo_path(os.environ.get("DEEPMT_BIN") or "build/deepmt")
    model = repo_path(os.environ.get("DEEPMT_MODEL") or "models/default")
    shared = os.path.abspath(os.environ.get("DEEPMT_SHARED") or os.path.join(REPO, "..", "shared"))
    tatoeba = os.path.join(shared, "data", "general", "test", "tatoeba.en-de.de")
    if not os.path.isfile(tatoeba) or not os.path.isdir(os.path.join(shared, "data", "multi30k")):
        tap.skip(f"no Tatoeba en-de or Multi30k data under {shared} (set DEEPMT_SHARED)")
        return tap.done()
    if not os.access(binary, os.X_OK):
        tap.skip(f"{binary} not built")
        return tap.done()

    def evaluate(out, baseline=None):
        env = dict(os.environ, BUILD=os.path.dirname(binary), MODEL=model, SHARED=shared,
                   PYTHON=sys.executable, EVAL_OUT=out, EVAL_SETS="tatoeba", EVAL_DIRECTIONS="en-de",
                   EVAL_ROBUSTNESS_LIMIT="3")
        # the model's own precision (int8) and 4 requests at once: two runs must agree,
        # as a sentence's translation does not depend on its batch mates (test_beam)
        env.pop("DEEPMT_PRECISION", None)
        env.pop("EVAL_BASELINE", None)
        if baseline:
            env["EVAL_BASELINE"] = baseline
        r = subprocess.run([SCRIPT, "--limit", "30", "--quiet", "--concurrency", "4"], env=env, capture_output=True,
                           text=True, timeout=600)
        return r.returncode, r.stdout, r.stderr

    with tempfile.TemporaryDirectory(prefix="deepmt-eval-baseline-") as tmp:
        first, second = os.path.join(tmp, "first"), os.path.join(tmp, "second")
        rc, out, err = evaluate(first)
        if not tap.ok(rc == 0 and os.path.isfile(os.path.join(first, "report.json")),
                      "make eval without a baseline writes its report", (out + err)[-1500:]):
            return tap.done()
        tap.ok("compare" not in out and "mean change" not in out, "without EVAL_BASELINE: no comparison", out)

        rc, out, err = evaluate(second, os.path.join(first, "report.json"))
        row = [line for line in out.splitlines() if line.startswith("| tatoeba | en-de |")]
        cells = [c.strip() for c in row[0].strip("|").split("|")] if row else []
        tap.ok(rc == 0 and len(cells) == 7, "EVAL_BASELINE: the comparison table follows the report",
               (out + err)[-1500:])
        tap.ok(cells[4:5] == ["+0.00"] and cells[6:7] == ["1.0000"],
               "the same model twice: change +0.00, p 1 (the bootstrap ran on both runs' hypotheses)", cells)
        tap.ok("all: mean change +0.00 over 1 directions, 0 up, 0 down" in out, "the summary line", out)

        hyp = os.path.join(second, "tatoeba.en-de.hyp")
        log = os.path.join(second, "server.log")
        before = (os.stat(hyp).st_mtime_ns, os.stat(log).st_mtime_ns)
        rc, out, err = evaluate(second, os.path.join(second, "report.json"))
        tap.ok(rc == 2 and "which this run overwrites" in err, "a baseline in the folder the run overwrites is refused",
               err)
        tap.ok((os.stat(hyp).st_mtime_ns, os.stat(log).st_mtime_ns) == before,
               "... before anything ran (its hypotheses and server log untouched)")
        rc, out, err = evaluate(os.path.join(tmp, "third"), os.path.join(tmp, "missing", "report.json"))
        tap.ok(rc == 2 and "no baseline report" in err and not os.path.exists(os.path.join(tmp, "third", "server.log")),
               "a missing baseline is refused before a server starts", err)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
