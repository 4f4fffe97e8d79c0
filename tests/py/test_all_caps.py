#!/usr/bin/python3
"""The all-caps rule (config.json decoding.all_caps, model/casing.h) end to end. TAP.

With "lower", a sentence typed in capitals is translated as its sentence-case form
and answered in capitals: the output must equal the upper-cased translation of the
sentence-case input, through `deepmt translate` in both batching modes and through
`deepmt serve`. Length limits count the pieces the model will see (sentence case), so a long
shouted line that fits in sentence case is translated. With "as_is" the same input goes to the model unchanged (and comes
out differently). A bad value is refused at load with a message.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tap  # noqa: E402
from testutil import engine, free_port, model_with_decoding, translate_lines  # noqa: E402

SHOUTED = ["THE CHILDREN ARE PLAYING IN THE PARK.", "A DOG RUNS ON THE BEACH."]
SENTENCE = ["The children are playing in the park.", "A dog runs on the beach."]


def main():
    binary, base = engine()
    if not binary:
        return tap.done()
    tmp = tempfile.mkdtemp(prefix="deepmt-caps-")
    try:
        lower = model_with_decoding(base, tmp, "lower", all_caps="lower")
        as_is = model_with_decoding(base, tmp, "as_is", all_caps="as_is")
        rc, normal, err = translate_lines(binary, lower, SENTENCE, split=True)
        want = [x.upper() for x in normal]
        for mode in ("whole", "continuous"):
            rc2, got, err2 = translate_lines(binary, lower, SHOUTED, "--batching", mode, split=True)
            tap.ok(rc == 0 and rc2 == 0 and got == want,
                   f"all_caps lower ({mode} batching): ALL-CAPS input = the sentence-case translation in capitals",
                   detail=f"{got} vs {want}\n{err}{err2}")
        rc3, raw, err3 = translate_lines(binary, as_is, SHOUTED, split=True)
        tap.ok(rc3 == 0 and raw != want, "all_caps as_is: the capitals reach the model unchanged (another output)",
               detail=f"{raw}\n{err3}")
        rc4, mixed, _ = translate_lines(binary, lower, ["THE CHILDREN are playing."], split=True)
        rc5, mixed_raw, _ = translate_lines(binary, as_is, ["THE CHILDREN are playing."], split=True)
        tap.ok(rc4 == 0 and mixed == mixed_raw, "a sentence with lower-case letters is not touched by the rule",
               detail=f"{mixed} vs {mixed_raw}")

        long_line = "A DOG RUNS ON THE BEACH AND A MAN WALKS WITH HIS CHILDREN. " * 8
        for mode in ("whole", "continuous"):
            rc7, out7, err7 = translate_lines(binary, lower, [long_line.strip()], "--batching", mode, split=True)
            tap.ok(rc7 == 0 and out7[0] and out7[0] == out7[0].upper(),
                   f"a long ALL-CAPS line over the piece limit in capitals (not in sentence case) translates ({mode})",
                   detail=f"exit {rc7}: {err7[-300:]}")
        bad = model_with_decoding(base, tmp, "bad", all_caps="shout")
        rc6, _, err6 = translate_lines(binary, bad, ["x"], split=True)
        tap.ok(rc6 != 0 and "all_caps" in err6, "decoding.all_caps \"shout\" is refused at load, named", detail=err6)

        port = free_port()
        proc = subprocess.Popen([binary, "serve", "-m", lower, "--host", "127.0.0.1", "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            ready = False
            while time.monotonic() < deadline and not ready:
                try:
                    with urllib.request.urlopen(url + "/ready", timeout=2) as r:
                        ready = r.status == 200
                except OSError:
                    time.sleep(0.2)
            body = json.dumps({"q": SHOUTED, "source": "en", "target": "de"}).encode()
            req = urllib.request.Request(url + "/translate", data=body, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    got = json.loads(r.read())["translatedText"]
            except OSError as e:
                got = str(e)
            tap.ok(ready and got == want, "deepmt serve: ALL-CAPS sentences answered in capitals, as the CLI",
                   detail=f"{got} vs {want}")
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
