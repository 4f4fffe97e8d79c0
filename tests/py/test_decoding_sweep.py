#!/usr/bin/python3
"""scripts/decoding_sweep.py (TAP) on the tiny random model and a made-up data
folder: one row per setting with a BLEU per direction, their mean and the time
against the first setting; references that are the model's own beam-4 output score
100 for that setting; directions without files are left out; --lines limits the
lines; bad settings, missing data and a failing model are refused with a message.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import tap  # noqa: E402
import test_server as ts  # noqa: E402

SCRIPT = os.path.join(REPO, "scripts", "decoding_sweep.py")
TINY = os.path.join(REPO, "tests", "fixtures", "tiny-model")
ENGLISH = ["A man is walking.", "Two dogs play in the snow.", "The woman reads.", "Children run on the beach."]
FRENCH = ["Un homme marche.", "Deux chiens jouent.", "La femme lit.", "Des enfants courent."]


def sweep(general, *args, model=TINY):
    r = subprocess.run([sys.executable, SCRIPT, "--general", general, "--model", model, "--bin", ts.BIN, *args],
                       capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def rows(out):
    """-> {setting: [cells]} from the Markdown table."""
    table = {}
    for line in out.splitlines():
        if line.startswith("| beam "):
            cells = [c.strip() for c in line.strip("|").split("|")]
            table[cells[0]] = cells[1:]
    return table


def main():
    if not os.access(ts.BIN, os.X_OK):
        tap.skip(f"{ts.BIN} not built")
        return tap.done()
    with tempfile.TemporaryDirectory(prefix="deepmt-sweep-") as general:
        os.mkdir(os.path.join(general, "dev"))
        # the German references are the model's own beam-4 translations: BLEU 100 there
        r = subprocess.run([ts.BIN, "translate", "-m", TINY, "-t", "de", "-b", "4", "--length-penalty", "1",
                            "--no-split", "--threads", "1", "-q"], input="\n".join(ENGLISH) + "\n",
                           capture_output=True, text=True)
        german = r.stdout.rstrip("\n").split("\n")
        files = {"en-de.en": ENGLISH, "en-de.de": german, "en-fr.en": ENGLISH, "en-fr.fr": FRENCH}
        for name, lines in files.items():
            with open(os.path.join(general, "dev", name), "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        tap.ok(r.returncode == 0 and len(german) == 4 and all(german), "the tiny model translates the sources",
               r.stderr[-300:])

        rc, out, err = sweep(general, "4:1.0", "2:0.5")
        table = rows(out)
        header = next((l for l in out.splitlines() if l.startswith("| setting")), "")
        tap.ok(rc == 0 and len(table) == 2, "two settings, two rows", f"rc {rc}: {out} {err}")
        tap.ok("en-de | de-en | en-fr | fr-en | mean" in header and "en-cs" not in header,
               "the directions with files, both ways; en-cs has none and is left out", header)
        first = table.get("beam 4, length penalty 1", [])
        tap.ok(len(first) == 7 and first[0] == "100.00", "references that are the setting's own output: BLEU 100",
               f"{first}")
        means_right = all(len(c) == 7 and abs(sum(float(x) for x in c[:4]) / 4 - float(c[4])) < 0.01
                          for c in table.values())
        tap.ok(means_right, "the mean is the mean of the directions", f"{table}")
        tap.ok(first[-1:] == ["1.00x"] and all(c[-1].endswith("x") and float(c[-1][:-1]) > 0 for c in table.values()),
               "times are against the first setting", f"{table}")

        rc, out, err = sweep(general, "--lines", "2", "4:1.0")
        tap.ok(rc == 0 and "en-de 2, de-en 2, en-fr 2, fr-en 2 lines" in out, "--lines 2: two lines a direction",
               f"rc {rc}: {out} {err}")

        for bad in ("4:x", "0:1.0", "4"):
            rc, out, err = sweep(general, bad)
            tap.ok(rc == 2 and ("BEAM:LENGTH_PENALTY" in err or "beam 1-64" in err), f"setting {bad!r} refused (exit 2)",
                   f"rc {rc}: {err[-300:]}")
        rc, out, err = sweep(general, "--set", "tatoeba", "4:1.0")
        tap.ok(rc == 2 and "no tatoeba files" in err, "a set without files: exit 2 with a message",
               f"rc {rc}: {err[-300:]}")
        rc, out, err = sweep(general, "4:1.0", model=os.path.join(general, "no-model"))
        tap.ok(rc == 1 and "exit" in err, "a model that cannot load: exit 1 with the engine's message",
               f"rc {rc}: {err[-300:]}")
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
