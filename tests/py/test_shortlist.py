#!/usr/bin/python3
"""The vocabulary shortlist from the outside: tools/make_shortlist.py, `deepmt
translate`, `deepmt serve` and models.json.

  - make_shortlist.py build writes a shortlist.bin the engine loads (a copy of
    models/default, its first 3,000 Multi30k lines a language), the same bytes when
    run twice, and `deepmt inspect` describes it; --pivot lists more pieces a source
    piece; its composition through the pivot language on a hand-made table (the
    pieces reached through a pivot piece, ranked, frequent pieces left out);
    --target-frequent lists a target language's own frequent pieces under </s>;
  - make_shortlist.py check --directions measures only the directions named, and
    refuses a selection that leaves none;
  - `deepmt translate` on the shipped model: the default scores the shortlist (said
    on stderr) and gives other translations than --no-shortlist on some of 120
    Multi30k sentences (so a shortlist that is not read would be seen), every line
    answered either way;
  - a shortlist.bin that does not fit the model fails the load with its name, in
    translate (exit 1) and in serve (no start), and --no-shortlist ignores it;
  - serve's ready line says "vocabulary shortlist" (not with --no-shortlist), and a
    models.json "shortlist": false turns it off for that model, a non-boolean is
    refused naming the key; GET /models says "shortlist": true or false.

Environment: DEEPMT_BIN (build/deepmt), DEEPMT_SHARED (../shared, for Multi30k).
"""

import gzip
import hashlib
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

sys.path.insert(0, os.path.join(REPO, "tools"))
import make_shortlist  # noqa: E402


def translate(binary, model, lines, *extra):
    r = subprocess.run([binary, "translate", "-m", model, "-t", "de", "--no-split", "--progress", *extra],
                       input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=600)
    return r.stdout.splitlines(), r.stderr, r.returncode


def model_copy(tmp, source, name):
    """tmp/name: config.json copied, the weights and vocabulary linked."""
    d = os.path.join(tmp, name)
    os.mkdir(d)
    shutil.copy(os.path.join(source, "config.json"), d)
    for f in ("model.safetensors", "sentencepiece.model"):
        os.symlink(os.path.abspath(os.path.join(source, f)), os.path.join(d, f))
    return d


def pieces_per_source(binary, model):
    """deepmt inspect's "N pieces a source piece" for the model's shortlist, or None."""
    r = subprocess.run([binary, "inspect", model], capture_output=True, text=True)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("shortlist:")), "")
    words = line.split()
    return float(words[words.index("pieces") - 1]) if "pieces" in words else None


def check_pivot_table():
    """pivot_table on a vocabulary of 10: source piece 1 means pivot piece 2 (0.8) and
    pivot piece 4 (0.2); pivot 2 means target 5 and 3 (3 is frequent), pivot 4 means
    target 6; pivot 7 is frequent and means target 8; source 9 has no pivot."""
    import numpy as np
    V = 10
    C_pivot, n_pivot = np.zeros((V, V), dtype=np.int32), np.zeros(V, dtype=np.int64)
    C_target, n_target = np.zeros((V, V), dtype=np.int32), np.zeros(V, dtype=np.int64)
    n_pivot[1], C_pivot[1, 2], C_pivot[1, 4], C_pivot[1, 7] = 10, 8, 2, 10
    n_target[2], C_target[2, 5], C_target[2, 3] = 10, 9, 10
    n_target[4], C_target[4, 6] = 10, 10
    n_target[7], C_target[7, 8] = 10, 10
    n_pivot[9] = 5
    frequent = [3, 7]
    both = make_shortlist.pivot_table(C_pivot, n_pivot, C_target, n_target, frequent, top=5, via=3)
    tap.ok(both == {1: {5, 6}}, "pivot_table: source 1 lists what its pivot pieces mean, frequent ones left out",
           detail=str(both))
    best = make_shortlist.pivot_table(C_pivot, n_pivot, C_target, n_target, frequent, top=1, via=3)
    tap.ok(best == {1: {5}}, "pivot_table: top 1 keeps the target of highest p(e | s) p(t | e)", detail=str(best))


def eos_lists(path, eos, with_frequent=False):
    """shortlist.bin (model/shortlist.h's format) -> {table's language token: set of
    the pieces listed under source piece eos} (and the frequent pieces)."""
    import struct
    b = open(path, "rb").read()
    V, n_frequent, n_tables, eb = struct.unpack_from("<4I", b, 8)
    off = 24
    frequent = set(struct.unpack_from(f"<{n_frequent}I", b, off))
    off += 4 * n_frequent
    out = {}
    for _ in range(n_tables):
        token, n_entries = struct.unpack_from("<iI", b, off)
        off += 8
        start = struct.unpack_from(f"<{V + 1}I", b, off)
        off += 4 * (V + 1)
        entries = struct.unpack_from(f"<{n_entries}{'H' if eb == 2 else 'I'}", b, off)
        off += eb * n_entries + (-(eb * n_entries)) % 4
        out[token] = set(entries[start[eos]:start[eos + 1]])
    return (frequent, out) if with_frequent else out


def main():
    binary = repo_path(os.environ.get("DEEPMT_BIN", "build/deepmt"))
    source = repo_path("models/default")
    shared = os.environ.get("DEEPMT_SHARED", os.path.join(REPO, "..", "shared"))
    m30k = os.path.join(shared, "data", "multi30k")
    tmp = tempfile.mkdtemp(prefix="deepmt-shortlist-")
    try:
        # --- the tool ---------------------------------------------------------
        if not os.path.isfile(os.path.join(m30k, "train.en.gz")):
            tap.skip(f"no Multi30k training data under {m30k}: make_shortlist.py build not run")
        else:
            built = model_copy(tmp, source, "built")
            tool = [sys.executable, os.path.join(REPO, "tools", "make_shortlist.py"), "build", built,
                    "--data", m30k, "--max-pairs", "3000"]
            digests = []
            for _ in range(2):
                r = subprocess.run(tool, capture_output=True, text=True, timeout=600)
                path = os.path.join(built, "shortlist.bin")
                digests.append(hashlib.sha256(open(path, "rb").read()).hexdigest() if r.returncode == 0 else None)
            tap.ok(r.returncode == 0 and digests[0] and digests[0] == digests[1],
                   "make_shortlist.py build writes shortlist.bin, the same bytes twice",
                   detail=r.stderr[-800:])
            inspect = subprocess.run([binary, "inspect", built], capture_output=True, text=True)
            line = next((ln for ln in inspect.stdout.splitlines() if ln.startswith("shortlist:")), "")
            tap.ok(inspect.returncode == 0 and "4 target languages" in line,
                   "deepmt inspect loads and describes the built shortlist", detail=inspect.stdout + inspect.stderr)
            out, err, rc = translate(binary, built, ["A man is riding a bike.", "Two dogs play in the snow."])
            tap.ok(rc == 0 and len(out) == 2 and all(out) and "vocabulary shortlist" in err,
                   "the built shortlist translates", detail=f"{rc} {out} {err[-500:]}")
            plain = pieces_per_source(binary, built)
            r = subprocess.run(tool + ["--pivot", "30"], capture_output=True, text=True, timeout=600)
            pivoted = pieces_per_source(binary, built)
            tap.ok(r.returncode == 0 and "pivot 30 through en" in r.stderr and plain and pivoted and pivoted > plain,
                   "make_shortlist.py build --pivot lists more pieces a source piece",
                   detail=f"{plain} -> {pivoted}: {r.stderr[-600:]}")
            before = eos_lists(os.path.join(built, "shortlist.bin"), 2)
            r = subprocess.run(tool + ["--target-frequent", "en=200"], capture_output=True, text=True, timeout=600)
            frequent, after = eos_lists(os.path.join(built, "shortlist.bin"), 2, with_frequent=True)
            en = 4  # __en__
            tap.ok(r.returncode == 0 and len(after[en] - before[en]) == 200 and not after[en] & frequent
                   and all(after[t] == before[t] for t in before if t != en),
                   "--target-frequent en=200: English's 200 most frequent pieces beyond --frequent under </s>, "
                   "the other languages unchanged",
                   detail=f"{r.stderr[-400:]} {[(t, len(before[t]), len(after[t])) for t in after]}")
            r = subprocess.run(tool + ["--target-frequent", "en=many"], capture_output=True, text=True, timeout=60)
            tap.ok(r.returncode == 2 and "--target-frequent: expected N or LANG=N" in r.stderr,
                   "--target-frequent with a bad value: refused, exit 2", detail=f"{r.returncode} {r.stderr[-300:]}")
        check_pivot_table()

        # --- check -----------------------------------------------------------------------
        if not os.path.isfile(os.path.join(m30k, "test_2016_flickr.en.gz")):
            tap.skip(f"no Multi30k test set under {m30k}: make_shortlist.py check not run")
        else:
            tool = [sys.executable, os.path.join(REPO, "tools", "make_shortlist.py"), "check", source,
                    "--shared", shared, "--sets", "multi30k/test_2016_flickr", "--limit", "4"]
            r = subprocess.run(tool + ["--directions", "en-de,fr-cs"], capture_output=True, text=True, timeout=600)
            rows = [ln.split("|")[2].strip() for ln in r.stdout.splitlines() if ln.startswith("| multi30k")]
            tap.ok(r.returncode == 0 and rows == ["en-de", "fr-cs"] and "over 2 directions" in r.stdout,
                   "make_shortlist.py check --directions measures those directions only",
                   detail=r.stdout[-800:] + r.stderr[-400:])
            r = subprocess.run(tool + ["--directions", "xx-yy"], capture_output=True, text=True, timeout=600)
            tap.ok(r.returncode == 2 and "no direction" in r.stderr,
                   "make_shortlist.py check: directions no set has are refused", detail=r.stdout + r.stderr)

        # --- translate on the shipped model --------------------------------------
        if not os.path.isfile(os.path.join(source, "shortlist.bin")):
            tap.ok(False, "models/default ships a shortlist.bin")
        path = os.path.join(m30k, "test_2016_flickr.en.gz")
        if os.path.isfile(path):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                lines = [f.readline().rstrip("\n") for _ in range(120)]
        else:
            lines = [json.loads(x)["source"] for x in
                     open(os.path.join(REPO, "tests", "fixtures", "markup", "en-de.jsonl"), encoding="utf-8")][:120]
        short, err_s, rc1 = translate(binary, source, lines)
        full, err_f, rc2 = translate(binary, source, lines, "--no-shortlist")
        differ = sum(a != b for a, b in zip(short, full))
        tap.ok(rc1 == rc2 == 0 and len(short) == len(full) == len(lines) and all(short),
               "translate answers every line with and without the shortlist", detail=f"{rc1} {rc2} {len(short)}")
        tap.ok(0 < differ < len(lines) // 2,
               "the shortlist changes some translations, not most (the default reads it)",
               detail=f"{differ} of {len(lines)} differ")
        tap.ok("vocabulary shortlist" in err_s and "vocabulary shortlist" not in err_f,
               "translate's summary says when the shortlist is used", detail=err_s[-300:] + err_f[-300:])

        # --- a shortlist that does not fit -------------------------------------------
        broken = model_copy(tmp, source, "broken")
        with open(os.path.join(source, "shortlist.bin"), "rb") as f:
            blob = bytearray(f.read())
        blob[8:12] = (12345).to_bytes(4, "little")  # another vocabulary size
        with open(os.path.join(broken, "shortlist.bin"), "wb") as f:
            f.write(blob)
        out, err, rc = translate(binary, broken, ["A dog."])
        tap.ok(rc == 1 and "shortlist.bin" in err and "vocabulary of 12345" in err,
               "translate: a shortlist.bin for another vocabulary fails the load, named", detail=f"{rc} {err[-400:]}")
        out, err, rc = translate(binary, broken, ["A dog."], "--no-shortlist")
        tap.ok(rc == 0 and len(out) == 1 and out[0], "--no-shortlist ignores the file", detail=f"{rc} {err[-400:]}")
        log, rc, _ = serve_log(binary, ["-m", broken])
        tap.ok(rc not in (0, None) and "shortlist.bin" in log and "; ready" not in log,
               "serve: the same file stops the start, named", detail=log[-600:])

        # --- serve and models.json ------------------------------------------------------
        log, _, _ = serve_log(binary, ["-m", source])
        tap.ok("; ready" in log and "vocabulary shortlist" in log, "serve's ready line says vocabulary shortlist",
               detail=log[-600:])
        log, _, _ = serve_log(binary, ["-m", source, "--no-shortlist"])
        tap.ok("; ready" in log and "vocabulary shortlist" not in log, "serve --no-shortlist: it does not",
               detail=log[-600:])
        folder = os.path.join(tmp, "models")
        os.mkdir(folder)
        for name in ("a", "b"):
            d = model_copy(folder, source, name)
            shutil.copy(os.path.join(source, "shortlist.bin"), d)
        with open(os.path.join(folder, "models.json"), "w") as f:
            json.dump({"models": [{"name": "a"}, {"name": "b", "shortlist": False}]}, f)
        log, _, listed = serve_log(binary, ["--models", folder], get="/models")
        flags = {m["name"]: m.get("shortlist") for m in (listed or {}).get("models", [])}
        tap.ok(flags == {"a": True, "b": False}, "GET /models says which model scores a shortlist",
               detail=str(listed)[:600])
        ready = next((ln for ln in log.splitlines() if "; ready" in ln), "")
        part_a = ready[ready.find(" a "):ready.find(", b ")] if ", b " in ready else ""
        part_b = ready[ready.find(", b "):] if ", b " in ready else ""
        tap.ok("vocabulary shortlist" in part_a and "vocabulary shortlist" not in part_b,
               "models.json \"shortlist\": false turns it off for that model only", detail=ready or log[-600:])
        with open(os.path.join(folder, "models.json"), "w") as f:
            json.dump({"models": [{"name": "a", "shortlist": "no"}]}, f)
        log, rc, _ = serve_log(binary, ["--models", folder])
        tap.ok("shortlist must be true or false" in log and "; ready" not in log,
               "models.json: a shortlist that is not a boolean is refused, named", detail=log[-600:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
