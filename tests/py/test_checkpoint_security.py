#!/usr/bin/python3
"""tools/dmt/checkpoint.py: a crafted checkpoint never runs code, real ones still load.

1. Payloads that run `touch MARKER` when unpickled (os.system, posix.system,
   subprocess, eval, exec, __import__ + getattr, torch's own rebuild helpers fed a
   callable, builtins) in every format torch.save has had: a raw pickle, the legacy
   format (payload as the magic-number pickle, as sys_info, inside the object), the legacy
   tar format and the zip format. Each must leave no marker and be refused with a clear
   message (exit 1 and no traceback from the converter).
2. Real checkpoints in both formats (zip, legacy) load to exactly what torch.load gives:
   dtypes, shared storages, views with offsets and strides, parameters, 0-d and empty
   tensors, big-endian archives.
3. Storage records that do not match the pickle are refused (short records, tensors past
   their storage, stride-0 tensors larger than the file).
4. Pickles that would crash or exhaust the unpickler itself (deep nesting, huge memo
   indices) and args that share lists exponentially are refused in bounded time.
TAP output; skips without torch.
"""

import argparse
import collections
import io
import os
import pickle
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools"))

import tap  # noqa: E402

try:
    import torch
    from dmt.checkpoint import ConvertError, load_checkpoint
except Exception as e:  # noqa: BLE001
    tap.skip(f"PyTorch not importable ({e}); install python3-torch (scripts/deps.sh test)")
    sys.exit(tap.done())

CONVERTER = os.path.join(REPO, "tools", "convert_fairseq.py")
TMP = tempfile.mkdtemp(prefix="deepmt-test-cksec-")
MARKER = os.path.join(TMP, "MARKER")
SHELL = f"touch {MARKER}"


# --------------------------------------------------------------------------- payloads

class Reduce:
    """Pickles as `fn(*args)`: what a crafted checkpoint embeds."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def p0_global(module, name):
    return f"c{module}\n{name}\n".encode()


def payloads():
    """(name, pickle bytes) pairs; each runs `touch MARKER` under an unrestricted unpickler."""
    import builtins
    import subprocess as sp
    import torch._utils
    out = [
        ("posix.system (protocol 0, by hand)", p0_global("posix", "system") + f"(S'{SHELL}'\ntR.".encode()),
        ("os.system", pickle.dumps(Reduce(os.system, SHELL), protocol=2)),
        ("subprocess.call", pickle.dumps(Reduce(sp.call, ["touch", MARKER]), protocol=2)),
        ("subprocess.Popen (protocol 4)", pickle.dumps(Reduce(sp.Popen, ["touch", MARKER]), protocol=4)),
        ("builtins.eval", pickle.dumps(Reduce(builtins.eval, f"__import__('os').system({SHELL!r})"), protocol=2)),
        ("builtins.exec", pickle.dumps(Reduce(builtins.exec, f"import os; os.system({SHELL!r})"), protocol=2)),
        ("__import__ + getattr (protocol 0, by hand)",
         p0_global("builtins", "getattr") + b"(" + p0_global("builtins", "__import__")
         + b"(S'os'\ntRS'system'\ntR" + f"(S'{SHELL}'\ntR.".encode()),
        ("__builtin__.eval (Python 2 name)", p0_global("__builtin__", "eval")
         + f"(S\"__import__('os').system('{SHELL}')\"\ntR.".encode()),
        ("INST opcode os.system", b"(" + f"S'{SHELL}'\n".encode() + b"ios\nsystem\n."),
        ("OBJ opcode with eval", b"(" + p0_global("builtins", "eval")
         + f"S\"__import__('os').system('{SHELL}')\"\no.".encode()),
        # torch's own helpers call what they are given
        ("torch._tensor._rebuild_from_type_v2(os.system, ...)",
         pickle.dumps(Reduce(torch._tensor._rebuild_from_type_v2, os.system, torch.Tensor, (SHELL,), {}),
                      protocol=2)),
        ("torch._utils._rebuild_parameter with a hook",
         pickle.dumps(Reduce(torch._utils._rebuild_parameter, Reduce(os.system, SHELL), False,
                             collections.OrderedDict()), protocol=2)),
        ("torch._utils._rebuild_parameter_with_state(state=os.system(...))",
         p0_global("torch._utils", "_rebuild_parameter_with_state") + b"(I0\nI00\n(dp0\n"
         + p0_global("posix", "system") + f"(S'{SHELL}'\ntRtR.".encode()),
        ("torch.storage._load_from_bytes (torch.load of embedded bytes)",
         pickle.dumps(Reduce(torch.storage._load_from_bytes, p0_global("posix", "system")
                             + f"(S'{SHELL}'\ntR.".encode()), protocol=2)),
        ("collections.OrderedDict of an os.system result",
         pickle.dumps(collections.OrderedDict(x=Reduce(os.system, SHELL)), protocol=2)),
        ("builtins.open + write", pickle.dumps(Reduce(builtins.open, MARKER, "w"), protocol=2)),
        ("copyreg._reconstructor(posix.system)", p0_global("copy_reg", "_reconstructor")
         + b"(" + p0_global("posix", "system") + p0_global("__builtin__", "object") + f"S'{SHELL}'\ntR.".encode()),
    ]
    return out


def state_dict():
    torch.manual_seed(0)
    emb = torch.randn(10, 4)
    sd = collections.OrderedDict()
    sd["encoder.embed_tokens.weight"] = emb
    sd["decoder.embed_tokens.weight"] = emb  # shared storage, as tied embeddings are
    sd["encoder.layers.0.fc1.weight"] = torch.randn(6, 4)
    sd["transposed"] = torch.randn(3, 5).t()  # non-contiguous strides
    sd["view_with_offset"] = torch.randn(20)[7:15]  # storage offset
    sd["half"] = torch.randn(3, 2).half()
    sd["bf16"] = torch.randn(5).bfloat16()
    sd["int64"] = torch.arange(7)
    sd["bool"] = torch.tensor([True, False, True])
    sd["scalar"] = torch.tensor(3.5)
    sd["empty"] = torch.zeros(0, 4)
    return sd


def good_checkpoint(**extra):
    ck = {"model": state_dict(), "args": argparse.Namespace(deepnorm=True, encoder_layers=2, lr=[5e-4]),
          "extra_state": {"epoch": 3}}
    ck["model"]["param"] = torch.nn.Parameter(torch.randn(2, 2))
    ck.update(extra)
    return ck


def save(obj, name, legacy=False):
    path = os.path.join(TMP, name)
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    return path


def write(name, data):
    path = os.path.join(TMP, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def legacy_with_first_pickle(first, name):
    """A legacy checkpoint whose magic-number pickle is replaced by `first`."""
    good = save(good_checkpoint(), name + ".good", legacy=True)
    with open(good, "rb") as f:
        pickle.load(f)  # the real magic number (plain data, safe to load)
        rest = f.read()
    return write(name, first + rest)


def legacy_tar(first, name):
    """torch < 0.4's tar layout with the payload as the 'storages' member (read first)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member, data in (("storages", first), ("tensors", pickle.dumps(0, protocol=2)),
                             ("pickle", pickle.dumps({"model": {}}, protocol=2)),
                             ("sys_info", pickle.dumps({"little_endian": True}, protocol=2))):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return write(name, buf.getvalue())


def load(path):
    """-> (checkpoint or None, error message or None, marker created)."""
    if os.path.exists(MARKER):
        os.unlink(MARKER)
    try:
        ck, sd = load_checkpoint(path)
        res = (ck, None)
    except ConvertError as e:
        res = (None, str(e))
    except Exception as e:  # noqa: BLE001 - anything else is a failure of the check
        res = (None, f"UNEXPECTED {type(e).__name__}: {e}")
    made = os.path.exists(MARKER)
    if made:
        os.unlink(MARKER)
    return res[0], res[1], made


# --------------------------------------------------------------------------- 1. payloads

def payload_checks():
    eval_magic = pickle.dumps(Reduce(eval, f"__import__('os').system({SHELL!r}) or 0x1950a86a20f9469cfc6c"),
                              protocol=2)
    for what, data in payloads():
        cases = [
            ("raw pickle", write("raw.pt", data), ["refused"]),
            ("legacy, as the magic-number pickle", legacy_with_first_pickle(data, "legacy-first.pt"), ["refused"]),
            ("legacy tar", legacy_tar(data, "tar.pt"), ["legacy tar", "torch.save"]),
        ]
        for fmt, path, words in cases:
            ck, err, made = load(path)
            tap.ok(not made and ck is None and err is not None and not err.startswith("UNEXPECTED")
                   and all(w in err for w in words),
                   f"{what}, {fmt}: no code runs, refused with a clear message",
                   detail=f"marker created: {made}\nloaded: {ck is not None}\nmessage: {err}\nwants {words}")

    # A payload that evaluates to the magic number, followed by a real legacy checkpoint:
    # converted "successfully" by a reader that unpickles the first pickle freely.
    ck, err, made = load(legacy_with_first_pickle(eval_magic, "eval-magic.pt"))
    tap.ok(not made and ck is None and err and "refused" in err and "eval" in err,
           "legacy: eval(...) evaluating to the magic number before a real checkpoint is refused, nothing runs",
           detail=f"marker {made}, loaded {ck is not None}, message {err}")

    # Payloads inside the object pickle of both formats (as the args, as a tensor's hooks).
    class Hooked:
        def __reduce__(self):
            return (torch._utils._rebuild_parameter,
                    (torch.zeros(2), False, collections.OrderedDict([(0, Reduce(os.system, SHELL))])))

    inner = [
        ("os.system as 'args'", dict(args=Reduce(os.system, SHELL))),
        ("subprocess.call in the state dict's metadata", dict(extra=Reduce(subprocess.call, ["touch", MARKER]))),
        ("a parameter with an os.system backward hook", dict(hook=Hooked())),
        ("builtins.exec in a nested list", dict(nested=[1, {"x": Reduce(exec, f"import os; os.system({SHELL!r})")}])),
    ]
    for what, extra in inner:
        for legacy in (False, True):
            fmt = "legacy" if legacy else "zip"
            path = save(good_checkpoint(**extra), f"inner-{fmt}.pt", legacy=legacy)
            ck, err, made = load(path)
            tap.ok(not made and ck is None and err and "refused" in err,
                   f"{fmt} checkpoint with {what}: no code runs, refused",
                   detail=f"marker {made}, loaded {ck is not None}, message {err}")

    # the converter itself, as users run it
    path = write("cli-raw.pt", payloads()[0][1])
    out = os.path.join(TMP, "cli-out")
    r = subprocess.run([sys.executable, CONVERTER, path, out], capture_output=True, text=True)
    made = os.path.exists(MARKER)
    tap.ok(r.returncode == 1 and not made and "refused" in r.stderr and "posix.system" in r.stderr
           and "Traceback" not in r.stderr and not os.path.exists(out),
           "convert_fairseq.py on the posix.system pickle: exit 1, one message naming posix.system, no marker",
           detail=f"rc {r.returncode}, marker {made}\n{r.stderr}")
    if r.returncode == 1:
        tap.diag("  " + r.stderr.strip())


# --------------------------------------------------------------------------- 2. real checkpoints

def same_tensors(a, b):
    if list(a) != list(b):
        return f"names differ: {list(a)} vs {list(b)}"
    for k in a:
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape or x.stride() != y.stride() or not torch.equal(x, y):
            return f"{k}: {x.dtype} {list(x.shape)} {x.stride()} vs {y.dtype} {list(y.shape)} {y.stride()}"
    return None


def real_checks():
    for legacy in (False, True):
        fmt = "legacy" if legacy else "zip"
        path = save(good_checkpoint(), f"good-{fmt}.pt", legacy=legacy)
        ref = torch.load(path)  # our own file: safe to compare against
        ck, err, made = load(path)
        if not tap.ok(ck is not None, f"{fmt}: a real checkpoint loads", detail=err):
            continue
        diff = same_tensors(ref["model"], ck["model"])
        tap.ok(diff is None, f"{fmt}: every tensor equals torch.load's (dtype, shape, strides, values: float32/16, "
                             "bf16, int64, bool, 0-d, empty, transposed, offset views, nn.Parameter)", detail=diff)
        sd = ck["model"]
        tap.ok(sd["encoder.embed_tokens.weight"].data_ptr() == sd["decoder.embed_tokens.weight"].data_ptr(),
               f"{fmt}: tensors that shared a storage still share it (tied embeddings)")
        from dmt.checkpoint import checkpoint_args
        args, src = checkpoint_args(ck)
        tap.ok(args == {"deepnorm": True, "encoder_layers": 2, "lr": [5e-4]} and ck["extra_state"] == {"epoch": 3},
               f"{fmt}: argparse.Namespace args and plain entries are read as data", detail=f"{args} {ck}")

    # big-endian archives (torch.save on such a machine writes byteorder 'big'), one dtype a file
    for dtype in (torch.float32, torch.float16, torch.int64):
        sd = {"a": (torch.randn(3, 4) * 100).to(dtype), "b": (torch.randn(5) * 100).to(dtype).t()}
        path = save({"model": sd, "args": {}}, "le.pt")
        src = zipfile.ZipFile(path)
        n = sd["a"].element_size()
        be = os.path.join(TMP, "be.pt")
        with zipfile.ZipFile(be, "w", zipfile.ZIP_STORED) as dst:
            prefix = src.namelist()[0].split("/")[0] + "/"
            for info in src.infolist():
                data = src.read(info)
                if info.filename.startswith(prefix + "data/"):
                    data = b"".join(data[i:i + n][::-1] for i in range(0, len(data), n))
                dst.writestr(info.filename, data)
            dst.writestr(prefix + "byteorder", b"big")
        ck, err, _ = load(be)
        diff = same_tensors(sd, ck["model"]) if ck else err
        tap.ok(diff is None, f"a big-endian {dtype} archive (byteorder 'big', swapped records) gives the same "
                             "tensors", detail=diff)


# --------------------------------------------------------------------------- 3. bad records

def record_checks():
    path = save({"model": {"w": torch.arange(12, dtype=torch.float32)}, "args": {}}, "rec.pt")
    src = zipfile.ZipFile(path)
    prefix = src.namelist()[0].split("/")[0] + "/"

    def variant(name, change):
        out = os.path.join(TMP, name)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                data = change(info.filename[len(prefix):], src.read(info))
                if data is not None:
                    dst.writestr(info.filename, data)
        return out

    cases = [
        ("a storage record shorter than the pickle says",
         variant("short.pt", lambda n, d: d[:20] if n.startswith("data/") else d), ["data/0", "bytes"]),
        ("a missing storage record", variant("missing.pt", lambda n, d: None if n.startswith("data/") else d),
         ["no data/0"]),
        ("a tensor reaching past its storage",
         variant("past.pt", lambda n, d: d.replace(b"K\x0c\x85", b"K\x0d\x85") if n == "data.pkl" else d),
         ["reaches past"]),
        ("a compressed entry (zip bomb shape)", None, ["compressed"]),
        ("a stride-0 tensor larger than its storage", None, ["more elements"]),
    ]
    # compressed entry
    bomb = os.path.join(TMP, "bomb.pt")
    with zipfile.ZipFile(bomb, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info),
                         compress_type=zipfile.ZIP_DEFLATED if info.filename.endswith("data.pkl") else zipfile.ZIP_STORED)
    cases[3] = (cases[3][0], bomb, cases[3][2])
    big = torch.zeros(1).expand(1000000)
    cases[4] = (cases[4][0], save({"model": {"w": big}, "args": {}}, "stride0.pt"), cases[4][2])
    for what, path, words in cases:
        ck, err, made = load(path)
        tap.ok(ck is None and err and not err.startswith("UNEXPECTED") and all(w in err for w in words),
               f"refused: {what}", detail=f"loaded {ck is not None}; message {err}; wants {words}")


def args_checks():
    """Args that share one list many times over (or hold themselves) are read in bounded time."""
    import time
    from dmt.checkpoint import checkpoint_args
    shared = []
    for _ in range(60):
        shared = [shared, shared]  # 2^60 paths through 61 lists
    loop = []
    loop.extend([loop, loop])
    for what, args in (("2^60 paths through shared lists", shared), ("a list holding itself twice", loop)):
        for legacy in (False, True):
            path = save({"model": state_dict(), "args": {"a": args, "deepnorm": True}}, "dag.pt", legacy=legacy)
            t0 = time.monotonic()
            try:
                ck, _ = load_checkpoint(path)
                checkpoint_args(ck)
                res = "read"
            except ConvertError as e:
                res = str(e)
            took = time.monotonic() - t0
            tap.ok(took < 20 and "more than" in res,
                   f"{'legacy' if legacy else 'zip'}: args with {what}: refused in {took:.1f} s (a value budget), "
                   "not an exponential walk", detail=res)


def crash_checks():
    """Pickles that crash or exhaust the process inside the C unpickler, before any check
    of the reader's own could run: each load runs in its own process, which must end
    with the reader's message, not a signal, within the time limit."""
    src = save({"model": {}, "args": {}}, "small.pt")
    zf = zipfile.ZipFile(src)
    cases = [
        ("a tuple nested 300,000 deep as a dict key (hash() overflows the C stack)",
         b"\x80\x02}" + b")" + b"\x85" * 300000 + b"K\x01s.", "nested deeper"),
        ("a frozenset of a tuple nested 300,000 deep, memoized at every level",
         b"\x80\x04(" + b")\x94" + b"\x85\x94" * 300000 + b"\x91.", "nested deeper"),
        ("LONG_BINPUT 4294967295 (the memo would be resized to 32 GiB)",
         b"\x80\x02N" + b"r\xff\xff\xff\xff" + b".", "memo index"),
        ("LONG_BINPUT 100,000,000 (0.8 GB memo, slow rather than refused)",
         b"\x80\x02N" + b"r\x00\xe1\xf5\x05" + b".", "memo index"),
    ]
    for what, body, words in cases:
        path = os.path.join(TMP, "crash.pt")
        with zipfile.ZipFile(path, "w") as dst:
            for info in zf.infolist():
                dst.writestr(info.filename, body if info.filename.endswith("data.pkl") else zf.read(info))
        code = ("import sys; sys.path.insert(0, sys.argv[1]); from dmt.checkpoint import load_checkpoint, "
                "ConvertError\ntry:\n    load_checkpoint(sys.argv[2]); print('loaded')\n"
                "except ConvertError as e:\n    print(e)")
        try:
            r = subprocess.run([sys.executable, "-c", code, os.path.join(REPO, "tools"), path], capture_output=True,
                               text=True, timeout=30)
            res = (r.returncode, r.stdout.strip(), r.stderr[-500:])
        except subprocess.TimeoutExpired:
            res = ("timeout after 30 s", "", "")
        tap.ok(res[0] == 0 and words in res[1], f"refused without crashing: {what}",
               detail=f"exit {res[0]}{' (killed by a signal)' if isinstance(res[0], int) and res[0] < 0 else ''}"
                      f"\n{res[1]}\n{res[2]}")


def main():
    crash_checks()
    args_checks()
    payload_checks()
    real_checks()
    record_checks()
    import shutil
    shutil.rmtree(TMP, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
