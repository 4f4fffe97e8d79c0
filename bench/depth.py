"""Sections 3 and 4: depth and size, on random-init DeepNorm models, ids only.

Depth: 12 (6+6), 100 (50+50) and 1,000 (500+500) layers at d_model 64, written by
tools/make_random_model.py; bench/bench_beam (deepmt) and tools/bench_torch.py --ids
(PyTorch) run beam search (beam 4) on the same random sources of 20 ids, interleaved.
Size: the DeepNet paper's 3.2B shape (100+100 layers, d_model 1024, FFN 4096,
vocab 256,000, tied embeddings), F16 on disk, one sentence, deepmt only (the
PyTorch reference loader holds the file, a random-init model and the loaded copy at
once: ~30 GB). The size model is deleted afterwards.
"""
import os
import random
import shutil

from common import PYTHON, last_json, log, median, mib, run, table

DEPTHS = [(6, 6), (50, 50), (500, 500)]
SIZE = {"layers": (100, 100), "d": 1024, "heads": 16, "ffn": 4096, "vocab": 256000}


def make_model(path, enc, dec, d, heads, ffn, vocab):
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        run([PYTHON, "tools/make_random_model.py", "--out", path, "--encoder-layers", enc, "--decoder-layers", dec,
             "--d-model", d, "--heads", heads, "--ffn", ffn, "--vocab", vocab, "--dtype", "F16"])
    return path


def write_sources(path, n, vocab, seed=1):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            f.write(" ".join(str(rng.randrange(4, vocab)) for _ in range(20)) + "\n")
    return path


def c_run(build, model, src, hyp, threads, batch, workers=None, precision=None):
    r = run([os.path.join(build, "bench", "bench_beam"), model, "-i", src, "-o", hyp, "--beam", "4",
             "--batch-size", batch, "--threads", threads] + (["--workers", workers] if workers else []) +
            (["--precision", precision] if precision else []), check=not precision)
    return dict(last_json(r["out"]), peak_rss_kb=r["peak_rss_kb"], wall_s=r["wall_s"])


def torch_run(model, src, hyp, threads, batch):
    r = run([PYTHON, "tools/bench_torch.py", "-m", model, "--ids", "-i", src, "--out-ids", hyp, "--beam", "4",
             "--batch-size", batch, "--threads", threads])
    return dict(last_json(r["out"]), peak_rss_kb=r["peak_rss_kb"], wall_s=r["wall_s"])


def same_lines(a, b):
    x, y = open(a).read().splitlines(), open(b).read().splitlines()
    return sum(p == q for p, q in zip(x, y)), max(len(x), len(y))


def bench_depth(cfg):
    out = os.path.join(cfg["out"], "depth")
    os.makedirs(out, exist_ok=True)
    n, threads = cfg["depth_sentences"], cfg["threads"][0]
    src = write_sources(os.path.join(out, "src.ids"), n, 1000)
    rows, md_rows = [], []
    for enc, dec in DEPTHS:
        model = make_model(os.path.join(out, f"deepnorm-{enc}x{dec}"), enc, dec, 64, 4, 256, 1000)
        res = {"deepmt": [], "pytorch": []}
        for r in range(cfg["rounds"]):
            log(f"depth {enc}+{dec}: round {r + 1}/{cfg['rounds']}")
            res["deepmt"].append(c_run(cfg["build"], model, src, os.path.join(out, f"c.{enc}.ids"), threads, n))
            res["pytorch"].append(torch_run(model, src, os.path.join(out, f"torch.{enc}.ids"), threads, n))
        agree = same_lines(os.path.join(out, f"c.{enc}.ids"), os.path.join(out, f"torch.{enc}.ids"))
        spt = {e: [x["translate_s"] / x["sentences"] for x in v] for e, v in res.items()}
        ratio = median([b / a for a, b in zip(spt["deepmt"], spt["pytorch"])])  # PyTorch s / deepmt s
        c0 = res["deepmt"][0]
        for e, v in res.items():
            row = {"layers": enc + dec, "encoder_layers": enc, "decoder_layers": dec, "engine": e,
                   "params": c0["params"], "load_s": median([x["load_s"] for x in v]),
                   "s_per_sentence": median(spt[e]), "peak_rss_mib": mib(max(x["peak_rss_kb"] for x in v)),
                   "target_tokens": v[0]["target_tokens"], "deepmt_speedup": ratio,
                   "token_agreement": list(agree), "per_round": v}
            rows.append(row)
            md_rows.append([f"{enc}+{dec}", e, f"{c0['params'] / 1e6:.1f}M", row["load_s"], row["s_per_sentence"],
                            row["peak_rss_mib"], row["target_tokens"],
                            f"{ratio:.1f}x" if e == "deepmt" else "", f"{agree[0]}/{agree[1]}"])
    md = table(["layers", "engine", "params", "load s", "s/sentence", "peak RSS MiB", "target tokens",
                "deepmt speed-up", "same 1-best ids"], md_rows)
    md += (f"\n\nd_model 64, 4 heads, FFN 256, vocab 1,000, F16 on disk; {n} random sources of 20 ids + </s>, "
           f"one batch, beam 4, {threads} thread(s).\n")
    return md, {"rows": rows}


def bench_size(cfg):
    out = os.path.join(cfg["out"], "size")
    threads = cfg["threads"][-1]
    L, d, ffn, V = SIZE["layers"], SIZE["d"], SIZE["ffn"], SIZE["vocab"]
    params = L[0] * (4 * d * d + 2 * d * ffn) + L[1] * (8 * d * d + 2 * d * ffn) + V * d
    avail = int(next(l for l in open("/proc/meminfo") if l.startswith("MemAvailable")).split()[1]) * 1024
    os.makedirs(out, exist_ok=True)
    disk = shutil.disk_usage(out).free
    if avail < params * 4 * 1.1 or disk < params * 2 * 1.05:
        msg = (f"skipped: needs {params * 4 / 2**30:.1f} GiB free memory and {params * 2 / 2**30:.1f} GiB disk; "
               f"{avail / 2**30:.1f} GiB and {disk / 2**30:.1f} GiB available\n")
        return msg, {"skipped": msg}
    model = os.path.join(out, "deepnorm-3.2b")
    try:
        gen = run([PYTHON, "tools/make_random_model.py", "--out", model, "--encoder-layers", L[0],
                   "--decoder-layers", L[1], "--d-model", d, "--heads", SIZE["heads"], "--ffn", ffn, "--vocab", V,
                   "--dtype", "F16"])
        src = write_sources(os.path.join(out, "src.ids"), 1, V)
        file_bytes = os.path.getsize(os.path.join(model, "model.safetensors"))
        r = c_run(cfg["build"], model, src, os.path.join(out, "hyp.ids"), threads, 1, workers=1)
        # bf16 products: half the weight memory (refused where the CPU lacks AVX-512 BF16)
        try:
            rb = c_run(cfg["build"], model, src, os.path.join(out, "hyp.bf16.ids"), threads, 1, workers=1,
                       precision="bf16")
        except Exception as e:  # noqa: BLE001 - no JSON: the CPU refused bf16
            log(f"size: no bf16 run ({e})")
            rb = None
        # int8: the quantised file (deepmt quantize), loaded without widening
        qmodel = model + "-int8"
        run([os.path.join(cfg["build"], "deepmt"), "quantize", model, qmodel])
        q_file_bytes = os.path.getsize(os.path.join(qmodel, "model.safetensors"))
        shutil.rmtree(model, ignore_errors=True)
        rq = c_run(cfg["build"], qmodel, src, os.path.join(out, "hyp.int8.ids"), threads, 1, workers=1)
    finally:
        shutil.rmtree(model, ignore_errors=True)
        shutil.rmtree(model + "-int8", ignore_errors=True)
    gib = 2 ** 30
    steps = max(r["target_tokens"], 1)                 # 1 prefix step + tokens - 1 (</s> or cut-off)
    dec_bytes = 4 * (L[1] * (8 * d * d + 2 * d * ffn) + V * d)
    res = dict(r, generate_s=gen["wall_s"], file_bytes=file_bytes, threads=threads,
               overhead_anon_bytes=r["end_rss_anon_kb"] * 1024 - r["weight_bytes_f32"])
    per_step = f"{r['translate_s'] / steps:.2f} s, ~{dec_bytes * steps / r['translate_s'] / 1e9:.1f} GB/s"
    rows = [["parameters", f"{r['params'] / 1e9:.3f} B"], ["file (F16)", f"{file_bytes / gib:.2f} GiB"],
            ["weights as F32", f"{r['weight_bytes_f32'] / gib:.2f} GiB"], ["load", f"{r['load_s']:.1f} s"],
            ["beam search, 1 sentence (20 ids), beam 4", f"{r['translate_s']:.1f} s"],
            ["target tokens", r["target_tokens"]],
            ["per decoder step (streams the decoder + output weights, F32)", per_step],
            ["peak RSS (VmHWM)", f"{r['peak_rss_kb'] / 2**20:.2f} GiB"],
            ["after load: anonymous / file-backed RSS",
             f"{r['load_rss_anon_kb'] / 2**20:.2f} / {r['load_rss_file_kb'] / 2**20:.2f} GiB"],
            ["at the end: anonymous / file-backed RSS",
             f"{r['end_rss_anon_kb'] / 2**20:.2f} / {r['end_rss_file_kb'] / 2**20:.2f} GiB"],
            ["anonymous memory beyond the F32 weights", f"{res['overhead_anon_bytes'] / 2**20:.0f} MiB"],
            ["threads", f"{threads} threads, one worker"],
            ["kernels", r.get("kernels", "?")]]
    if rb:
        res["bf16"] = rb
        same = same_lines(os.path.join(out, "hyp.ids"), os.path.join(out, "hyp.bf16.ids"))
        rows += [["--precision bf16: weights in memory", f"{rb['weight_bytes_memory'] / gib:.2f} GiB"],
                 ["--precision bf16: load", f"{rb['load_s']:.1f} s"],
                 ["--precision bf16: beam search, same sentence", f"{rb['translate_s']:.1f} s "
                  f"({rb['target_tokens']} tokens; same ids as F32: {'yes' if same[0] == same[1] else 'no'})"],
                 ["--precision bf16: peak RSS (VmHWM)", f"{rb['peak_rss_kb'] / 2**20:.2f} GiB"]]
    res["int8"] = dict(rq, file_bytes=q_file_bytes)
    same = same_lines(os.path.join(out, "hyp.ids"), os.path.join(out, "hyp.int8.ids"))
    rows += [["int8 (`deepmt quantize`): file", f"{q_file_bytes / gib:.2f} GiB"],
             ["int8: weights in memory", f"{rq['weight_bytes_memory'] / gib:.2f} GiB"],
             ["int8: load", f"{rq['load_s']:.1f} s"],
             ["int8: beam search, same sentence", f"{rq['translate_s']:.1f} s "
              f"({rq['target_tokens']} tokens; same ids as F32: {'yes' if same[0] == same[1] else 'no'})"],
             ["int8: peak RSS (VmHWM)", f"{rq['peak_rss_kb'] / 2**20:.2f} GiB"]]
    rows += [["generating the model (Python)", f"{gen['wall_s']:.0f} s"]]
    title = f"{params / 1e9:.1f}B model ({L[0]}+{L[1]} layers, d_model {d}, FFN {ffn}, vocab {V:,}, tied)"
    return table([title, "value"], rows) + "\n", res
