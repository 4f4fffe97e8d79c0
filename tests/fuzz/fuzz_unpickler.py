#!/usr/bin/python3
"""Mutation fuzzer for the converter's checkpoint reader (tools/dmt/checkpoint.py).

    tests/fuzz/fuzz_unpickler.py [--seconds 600] [--seed N] [--timeout 5]
    tests/fuzz/fuzz_unpickler.py --make-seeds      # rewrite the seed corpus

Seeds are the files in tests/fuzz/corpus/unpickler/ (small zip and legacy checkpoints,
raw pickles, code-running payloads, a legacy tar). Every execution takes a seed, mutates
it (bit flips, interesting bytes, truncation, splices with another seed, inserted or
deleted chunks, pickle opcodes and code-running GLOBALs inserted into the pickle; for zip
seeds the same mutations applied to one archive entry, re-zipped, so that the zip CRC does
not hide the pickle from the fuzzer) and hands it, in a worker process, to
load_checkpoint, then to what tools/convert_fairseq.py does with a loaded checkpoint
(checkpoint_args, Converter: refusals, renaming, config, tensor checks). The only
acceptable outcomes are a loaded (or converted) checkpoint or ConvertError (the reader's
own CheckpointError, or the converter's refusal). A
failure is any other exception, the marker file that the inserted payloads `touch`, a
worker that dies, or one input taking longer than --timeout seconds. Failing inputs are
saved under --crashes (default: a temporary folder) and make the exit status 1; copy them
into the corpus as regress-* so that every run replays them.
Every run first replays the whole corpus unmutated.
"""
import argparse
import io
import os
import random
import select
import struct
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus", "unpickler")


# --------------------------------------------------------------------------- worker

def worker(marker, unsafe):
    """Reads inputs (4-byte length + bytes) from stdin, answers one line each:
    'loaded', 'clean <class>' or 'bad <traceback, escaped>'."""
    sys.path.insert(0, os.path.join(REPO, "tools"))
    import traceback

    from convert_fairseq import Converter, detect_framework
    from dmt.checkpoint import ConvertError, checkpoint_args, load_checkpoint
    import torch  # noqa: F401 - imported before the first input, not timed with it
    path = os.path.join(os.path.dirname(marker), "input.pt")
    stdin, stdout = sys.stdin.buffer, sys.stdout
    stdout.write("ready\n")
    stdout.flush()
    while True:
        head = stdin.read(4)
        if len(head) < 4:
            return 0
        data = stdin.read(struct.unpack("<I", head)[0])
        with open(path, "wb") as f:
            f.write(data)
        answer = None
        try:
            if unsafe:  # the self-check: a reader that trusts the pickle must be caught
                import pickle
                try:
                    pickle.loads(data)
                except Exception:  # noqa: BLE001
                    pass
                answer = "loaded"
            else:
                ck, sd = load_checkpoint(path)
                for t in sd.values():  # touch every tensor's memory
                    float(t.float().sum()) if t.numel() else None
                answer = "loaded"
                # then what the converter does with it, up to the tensors it would write
                args, args_from = checkpoint_args(ck)
                conv = Converter(ck, sd, args, args_from, detect_framework(ck, sd, args), log=lambda msg: None)
                conv.refuse_unsupported()
                conv.rename()
                conv.build_config()
                conv.check_tensors()
                answer = "converted"
        except ConvertError as e:
            if answer != "loaded":
                answer = "clean " + type(e).__name__
            else:
                answer = "loaded-then-refused-by-converter"
        except BaseException:  # noqa: BLE001 - the finding itself
            answer = "bad " + traceback.format_exc().replace("\\", "\\\\").replace("\n", "\\n")
        stdout.write(answer + "\n")
        stdout.flush()


class Worker:
    def __init__(self, marker, unsafe):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", marker] + (["--unsafe"] if unsafe else [])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=os.path.dirname(marker))
        self.buf = b""
        ready = self.answer(120)
        if ready != "ready":
            raise SystemExit(f"fuzz_unpickler: the worker did not start ({ready})")

    def run(self, data, timeout):
        """-> answer line, 'hang' or 'died <status>'."""
        try:
            self.proc.stdin.write(struct.pack("<I", len(data)) + data)
            self.proc.stdin.flush()
        except BrokenPipeError:
            return f"died {self.proc.wait()}"
        return self.answer(timeout)

    def answer(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "hang"
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    return f"died {self.proc.wait()}"
                self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


# --------------------------------------------------------------------------- mutations

INTERESTING = [0, 1, 0x7f, 0x80, 0xff, ord("."), ord("("), ord("t"), ord("R"), ord("c"), 0x93, 0x95]
# pickle opcodes worth inserting (one byte) and short opcode sequences
OPCODES = b"().0123abcdeghijlmoprstuFGIJKLMNPQRSTUVX]}\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89" \
          b"\x8a\x8b\x8c\x8d\x8e\x8f\x90\x91\x92\x93\x94\x95\x96\x97\x98"


def gadgets(marker):
    shell = f"touch {marker}"
    return [
        f"cposix\nsystem\n(S'{shell}'\ntR".encode(),
        f"cbuiltins\neval\n(S\"__import__('os').system('{shell}')\"\ntR".encode(),
        b"\x8c\x05posix\x8c\x06system\x93" + f"(S'{shell}'\ntR".encode(),
        f"csubprocess\ncall\n((S'touch'\nS'{marker}'\nltR".encode(),
        b"ctorch._utils\n_rebuild_tensor_v2\n", b"ccollections\nOrderedDict\n)R",
        b"ctorch\nFloatStorage\n", b"cargparse\nNamespace\n)\x81", b"N", b"K\x00", b"J\xff\xff\xff\x7f",
        b"\x8a\x08" + b"\xff" * 8, b"h\x00", b"q\x00", b"(", b"t", b"R", b"b", b"s", b"u", b"e", b"}", b"]",
    ]


def mutate_bytes(rng, data, seeds, gad):
    data = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
        op = rng.randrange(9)
        n = len(data)
        if op == 0 and n:  # bit flip
            i = rng.randrange(n)
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # interesting byte
            data[rng.randrange(n)] = rng.choice(INTERESTING)
        elif op == 2 and n:  # truncate
            del data[rng.randrange(n):]
        elif op == 3:  # splice with another seed
            other = rng.choice(seeds)
            a = rng.randrange(n + 1)
            b = rng.randrange(len(other) + 1)
            data = data[:a] + bytearray(other[b:])
        elif op == 4:  # insert an opcode
            data.insert(rng.randrange(n + 1), rng.choice(OPCODES))
        elif op == 5:  # insert a gadget / opcode sequence
            i = rng.randrange(n + 1) if rng.random() < 0.8 else 0
            data[i:i] = rng.choice(gad)
        elif op == 6 and n:  # delete a chunk
            a = rng.randrange(n)
            del data[a:a + rng.randint(1, 16)]
        elif op == 7 and n:  # duplicate a chunk
            a = rng.randrange(n)
            b = min(n, a + rng.randint(1, 64))
            data[a:a] = data[a:b]
        elif op == 8 and n >= 4:  # overwrite an int field
            i = rng.randrange(n - 3)
            data[i:i + 4] = struct.pack("<i", rng.choice((0, 1, -1, 255, 65536, 2 ** 31 - 1, -2 ** 31,
                                                          rng.randrange(-1000, 1000))))
    return bytes(data)


def mutate(rng, seed, seeds, gad):
    if seed[:4] == b"PK\x03\x04" and rng.random() < 0.8:
        try:
            zf = zipfile.ZipFile(io.BytesIO(seed))
            entries = [(i.filename, zf.read(i)) for i in zf.infolist()]
        except Exception:  # noqa: BLE001 - a seed that is not a clean zip: mutate its bytes
            return mutate_bytes(rng, seed, seeds, gad)
        pkl = [i for i, (n, _) in enumerate(entries) if n.endswith("data.pkl")]
        k = pkl[0] if pkl and rng.random() < 0.7 else rng.randrange(len(entries))
        r = rng.random()
        if r < 0.85:
            entries[k] = (entries[k][0], mutate_bytes(rng, entries[k][1], seeds, gad))
        elif r < 0.9:
            del entries[k]
        elif r < 0.95:
            entries.append((entries[0][0].split("/")[0] + "/byteorder", rng.choice((b"big", b"little", b"middle"))))
        else:
            entries[k] = (entries[k][0] + rng.choice(("x", "/", "")), entries[k][1])
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
            for name, data in entries:
                z.writestr(name, data)
        return out.getvalue()
    return mutate_bytes(rng, seed, seeds, gad)


# --------------------------------------------------------------------------- seeds

def make_seeds(folder):
    """Small checkpoints in every format, and the payloads (these never load)."""
    import argparse as ap
    import collections
    import pickle
    import tarfile

    import torch
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(1)
    emb = torch.randn(6, 4)
    sd = collections.OrderedDict([("encoder.embed_tokens.weight", emb), ("decoder.embed_tokens.weight", emb),
                                  ("fc.weight", torch.randn(3, 4).t()), ("half", torch.randn(3).half()),
                                  ("ids", torch.arange(4)), ("p", torch.nn.Parameter(torch.ones(2)))])
    ck = {"model": sd, "args": ap.Namespace(deepnorm=True, encoder_layers=1, lr=[0.1], name="x"),
          "extra": {"epoch": 1, "s": {1, 2}, "b": b"\x00\x01", "c": 1 + 2j}}
    torch.save(ck, os.path.join(folder, "seed-zip.pt"))
    torch.save(ck, os.path.join(folder, "seed-legacy.pt"), _use_new_zipfile_serialization=False)
    torch.save({"model": {"w": torch.zeros(2, 2)}, "cfg": {"model": {"_name": "t"}}, "args": None},
               os.path.join(folder, "seed-zip-cfg.pt"))
    sys.path.insert(0, os.path.join(REPO, "tools"))
    from dmt.model import Transformer, default_config
    cfg = default_config(vocab_size=12, d_model=4, heads=1, ffn_dim=8, encoder_layers=1, decoder_layers=1,
                         max_positions=16, normalization="post")
    model = Transformer(cfg)
    fsd = collections.OrderedDict(model.state_dict())
    fsd["decoder.output_projection.weight"] = model.decoder.embed_tokens.weight
    for side in ("encoder", "decoder"):
        fsd[side + ".embed_positions._float_tensor"] = torch.FloatTensor(1)
        fsd[side + ".version"] = torch.Tensor([3])
    fargs = ap.Namespace(arch="transformer", encoder_embed_dim=4, decoder_embed_dim=4, encoder_ffn_embed_dim=8,
                         decoder_ffn_embed_dim=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=1,
                         decoder_attention_heads=1, encoder_normalize_before=False, decoder_normalize_before=False,
                         activation_fn="relu", share_all_embeddings=True, share_decoder_input_output_embed=True,
                         max_source_positions=16, max_target_positions=16, no_token_positional_embeddings=False)
    torch.save({"model": fsd, "args": fargs}, os.path.join(folder, "seed-zip-fairseq.pt"))
    torch.save({"model": fsd, "args": None, "cfg": {"model": vars(fargs)}},
               os.path.join(folder, "seed-legacy-fairseq.pt"), _use_new_zipfile_serialization=False)
    for name, data in (("seed-raw-posix.pkl", b"cposix\nsystem\n(S'touch MARKER'\ntR."),
                       ("seed-raw-p2.pkl", pickle.dumps({"model": {}, "args": {"a": [1, 2.5, "x", None]}},
                                                        protocol=2)),
                       ("seed-raw-p4.pkl", pickle.dumps(collections.OrderedDict(a=(1, 2)), protocol=4))):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for member in ("storages", "tensors", "pickle", "sys_info"):
            info = tarfile.TarInfo(member)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"N."))
    with open(os.path.join(folder, "seed-legacy-tar.pt"), "wb") as f:
        f.write(buf.getvalue())
    print(f"wrote seeds to {folder}: {', '.join(sorted(os.listdir(folder)))}")


# --------------------------------------------------------------------------- driver

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="how long to fuzz (default 10)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: from the time)")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds one input may take (default 5)")
    ap.add_argument("--corpus", default=CORPUS)
    ap.add_argument("--crashes", default=None, help="folder for failing inputs (default: a temporary one)")
    ap.add_argument("--make-seeds", action="store_true", help="write the seed corpus and exit")
    ap.add_argument("--unsafe", action="store_true", help="fuzz pickle.loads instead (checks that the fuzzer "
                                                          "catches a reader that runs code)")
    ap.add_argument("--worker", metavar="MARKER", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.worker:
        return worker(opts.worker, opts.unsafe)
    if opts.make_seeds:
        make_seeds(opts.corpus)
        return 0

    files = sorted(os.listdir(opts.corpus)) if os.path.isdir(opts.corpus) else []
    seeds = []
    for name in files:
        with open(os.path.join(opts.corpus, name), "rb") as f:
            seeds.append((name, f.read()))
    if not seeds:
        print(f"fuzz_unpickler: no seeds in {opts.corpus} (run with --make-seeds)", file=sys.stderr)
        return 2
    seed = opts.seed if opts.seed is not None else int(time.time())
    rng = random.Random(seed)
    # each input is written to a file (the reader takes a path): in memory where possible
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    work = tempfile.mkdtemp(prefix="deepmt-fuzz-unpickler-", dir=shm)
    crashes = opts.crashes or os.path.join(work, "crashes")
    os.makedirs(crashes, exist_ok=True)
    marker = os.path.join(work, "MARKER")
    gad = gadgets(marker)
    seed_bytes = [d for _, d in seeds]
    counts = {}
    failures = []
    w = Worker(marker, opts.unsafe)
    start = time.monotonic()
    execs = 0
    slowest = [0.0, b"", ""]

    def record(kind, data, detail):
        path = os.path.join(crashes, f"{kind}-{len(failures):04d}.pt")
        with open(path, "wb") as f:
            f.write(data)
        failures.append((kind, path, detail))
        print(f"fuzz_unpickler: {kind}: {path}\n  {detail[:2000]}", file=sys.stderr, flush=True)

    def one(data, origin):
        nonlocal w, execs, slowest
        t0 = time.monotonic()
        answer = w.run(data, opts.timeout)
        if time.monotonic() - t0 > slowest[0]:
            slowest[:] = [time.monotonic() - t0, data, origin]
        execs += 1
        kind = answer.split(" ", 1)[0]
        if os.path.exists(marker):
            os.unlink(marker)
            record("marker", data, f"the input ran code ({origin}); answer: {answer[:200]}")
            kind = "marker"
        elif kind == "bad":
            record("exception", data, f"{origin}: " + answer[4:].replace("\\n", "\n").replace("\\\\", "\\"))
        elif kind in ("hang", "died"):
            record(kind, data, f"{origin}: {answer}")
            w.stop()
            w = Worker(marker, opts.unsafe)
        counts[answer if kind == "clean" else kind] = counts.get(answer if kind == "clean" else kind, 0) + 1

    try:
        for name, data in seeds:  # replay: every seed and regression input, unmutated
            one(data, f"corpus file {name}")
        while time.monotonic() - start < opts.seconds:
            name, data = rng.choice(seeds)
            if name.startswith("seed-raw") and rng.random() < 0.5:  # the zip/legacy seeds go deeper
                name, data = rng.choice(seeds)
            one(mutate(rng, data, seed_bytes, gad), f"mutation of {name} (--seed {seed}, exec {execs})")
    finally:
        w.stop()
    took = time.monotonic() - start
    slow_path = os.path.join(crashes, "slowest.pt")
    with open(slow_path, "wb") as f:
        f.write(slowest[1])
    outcome = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    print(f"fuzz_unpickler: {execs} executions in {took:.0f} s ({execs / max(took, 1e-9):.0f}/s), --seed {seed}, "
          f"{len(seeds)} corpus files, slowest input {slowest[0]:.2f} s ({slowest[2]}); outcomes: {outcome}")
    if failures:
        print(f"fuzz_unpickler: {len(failures)} failing input(s) in {crashes}", file=sys.stderr)
        return 1
    if opts.crashes:
        return 0  # keep the slowest input there
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
