#!/usr/bin/python3
"""tests/fuzz/fuzz_unpickler.py for a few seconds: the checkpoint reader only ever loads a
mutated checkpoint or refuses it with its own error (no other exception, no code run, no
input over the time limit). The corpus (seeds and regression inputs) is replayed first.
Then the same fuzzer against pickle.loads must report the code it runs: the check can
fail. TAP output; skips without torch. A longer run: tests/fuzz/fuzz_unpickler.py --seconds 600
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import tap  # noqa: E402

FUZZ = os.path.join(REPO, "tests", "fuzz", "fuzz_unpickler.py")
SECONDS = os.environ.get("DEEPMT_FUZZ_SECONDS", "5")

try:
    import torch  # noqa: F401
except Exception as e:  # noqa: BLE001
    tap.skip(f"PyTorch not importable ({e}); install python3-torch (scripts/deps.sh test)")
    sys.exit(tap.done())

r = subprocess.run([sys.executable, FUZZ, "--seconds", SECONDS, "--seed", "1"], capture_output=True, text=True,
                   timeout=300)
tap.ok(r.returncode == 0 and " executions in " in r.stdout,
       f"fuzz_unpickler.py --seconds {SECONDS}: corpus replayed, every mutated input loaded or refused cleanly",
       detail=r.stdout + r.stderr)
tap.diag(r.stdout.strip())
r = subprocess.run([sys.executable, FUZZ, "--seconds", "2", "--seed", "1", "--unsafe"], capture_output=True,
                   text=True, timeout=300)
tap.ok(r.returncode == 1 and "marker" in r.stderr,
       "the fuzzer catches a reader that runs code (pickle.loads on the same inputs: marker found, exit 1)",
       detail=f"rc {r.returncode}\n{r.stdout}{r.stderr[-2000:]}")
sys.exit(tap.done())
