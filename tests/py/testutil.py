"""Small helpers shared by the Python tests (standard library only)."""

import http.client
import importlib.util
import json
import os
import socket
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def repo_path(p):
    """p as given when absolute, else relative to the repository root."""
    return p if os.path.isabs(p) else os.path.join(REPO, p)


def serve_log(binary, args, wait_for=("; ready", "cannot", "error"), get=None):
    """`binary serve --port P --threads 1 ARGS`: its log up to a line holding one of
    wait_for (or its exit), then it is stopped. -> (log, exit status, the JSON of GET
    get once ready, else None)."""
    port = free_port()
    p = subprocess.Popen([binary, "serve", "--port", str(port), "--threads", "1", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log, answer = "", None
    try:
        t0 = time.time()
        while time.time() - t0 < 60:
            line = p.stdout.readline()
            if not line:
                break
            log += line
            if any(w in line for w in wait_for):
                break
        if get and "; ready" in log:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", get)
            answer = json.loads(c.getresponse().read())
    finally:
        if p.poll() is None:
            p.terminate()
        p.wait(timeout=30)
    return log, p.returncode, answer


MODEL_FILES = ("model.safetensors", "sentencepiece.model", "shortlist.bin")


def model_with_config(src, tmp, name, change):
    """A model directory tmp/name that links src's files and holds src's config.json
    as change(config) leaves it (change edits the dict in place)."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    for f in MODEL_FILES:
        if os.path.exists(os.path.join(src, f)):
            os.symlink(os.path.abspath(os.path.join(src, f)), os.path.join(d, f))
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    change(cfg)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d


def model_with_decoding(src, tmp, name, **decoding):
    """model_with_config with the given decoding settings replaced (e.g.
    copy_numbers=False): one decoding rule on and off with the same weights."""
    return model_with_config(src, tmp, name, lambda cfg: cfg.setdefault("decoding", {}).update(decoding))


def translate_lines(binary, model, lines, *extra, split=False, timeout=300):
    """`binary translate -m model -t de -q` over lines, one a line (no sentence
    splitting unless split); later -t in extra wins. -> (exit status, one output a
    line, stderr)."""
    args = [binary, "translate", "-m", model, "-t", "de", "-q"] + ([] if split else ["--no-split"])
    r = subprocess.run(args + list(extra), input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=timeout)
    return r.returncode, r.stdout.split("\n")[:len(lines)], r.stderr


def shared_data(*parts):
    """A path under the shared data folder ($DEEPMT_SHARED/data, default ../shared/data
    beside the repository), e.g. shared_data("general")."""
    return os.path.join(repo_path(os.environ.get("DEEPMT_SHARED", os.path.join("..", "shared"))), "data", *parts)


def load_script(name):
    """A module from scripts/ (scripts/bleu.py: load_script("bleu"))."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "scripts", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def engine():
    """(the deepmt binary, the model directory) the end-to-end tests run: $DEEPMT_BIN
    (build/deepmt) and $DEEPMT_MODEL (models/default). The binary is None, reported as
    a failed check, when it is missing."""
    import tap
    binary = repo_path(os.environ.get("DEEPMT_BIN", "build/deepmt"))
    model = repo_path(os.environ.get("DEEPMT_MODEL", "models/default"))
    if not os.access(binary, os.X_OK):
        tap.ok(False, "deepmt binary present", detail=f"{binary} missing: run make")
        return None, model
    return binary, model
