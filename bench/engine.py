"""Section 1: deepmt vs the PyTorch baseline on Multi30k test_2016_flickr en->de.

For each thread count and batch size, `deepmt translate` and tools/bench_torch.py
run interleaved (deepmt, PyTorch, deepmt, PyTorch, ...) on the same model and
input; throughput is each tool's own timer (model loading excluded), peak RSS the
process's (wait4). At more than one thread a third engine is interleaved too:
deepmt with one worker and N BLAS threads, the way PyTorch uses its threads.
Where the CPU has AVX-512 BF16, `deepmt-bf16` (--precision bf16) runs as well;
`deepmt-int8` (--precision int8) always. The kernel levels: `deepmt-generic`
(DEEPMT_ISA=generic: OpenBLAS sgemm, what CPUs without AVX2 run) and, when the CPU
has more than AVX2, `deepmt-avx2` (DEEPMT_ISA=avx2). Every row but these scores the whole
vocabulary (--no-shortlist); where the model directory has a shortlist.bin,
`deepmt-shortlist` (F32) and `deepmt-int8-shortlist` (int8, what `serve` runs by
default) score only each sentence's candidate pieces. `vs deepmt` is the median over
rounds of each engine's tokens/s over deepmt F32's in the same round; the targets
table puts the ratios the kernels are aimed at side by side.
Agreement: the translations line by line, and (once, on token ids) bench_beam's
1-best token sequences against PyTorch's; BLEU against the reference translations
(batch 32, all 1,000 lines) shows what reduced precision costs, if anything.
"""
import gzip
import importlib.util
import json
import os
import re
import subprocess

from common import PYTHON, last_json, log, median, mib, run, table

SUMMARY = re.compile(r"(\d+) (?:lines|sentences) in [\d.]+ s: ([\d.]+) sentences/s, ([\d.]+) target tokens/s")


def prepare_input(shared, out, n_b1, n_full=None):
    src = os.path.join(shared, "data", "multi30k", "test_2016_flickr.en.gz")
    with gzip.open(src, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    full, b1 = os.path.join(out, "test.en"), os.path.join(out, f"test.first{n_b1}.en")
    for path, part in ((full, lines[:n_full] if n_full else lines), (b1, lines[:n_b1])):
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(part) + "\n")
    return src, full, b1


def run_deepmt(build, model, inp, out, threads, batch, workers=None, precision=None, isa=None, shortlist=False):
    cmd = [os.path.join(build, "deepmt"), "translate", "-m", model, "--target", "de", "--beam", "4",
           "--batch-size", batch, "--threads", threads, "--batching", "whole", "-i", inp, "-o", out]
    if workers:
        cmd += ["--workers", workers]
    cmd += ["--precision", precision or "f32"]  # the baseline is F32, whatever the model vouches for
    if not shortlist:  # the baseline scores the whole vocabulary, as PyTorch does
        cmd += ["--no-shortlist"]
    r = run(cmd, env={"DEEPMT_ISA": isa} if isa else None)
    m = SUMMARY.search(r["err"])
    if not m:
        raise SystemExit(f"bench: no summary line from deepmt translate:\n{r['err'][-1000:]}")
    return {"sentences": int(m.group(1)), "sentences_per_s": float(m.group(2)),
            "tokens_per_s": float(m.group(3)), "wall_s": r["wall_s"], "peak_rss_kb": r["peak_rss_kb"]}


def run_torch(model, inp, out, threads, batch, ids_out=None, src_ids_out=None):
    cmd = [PYTHON, "tools/bench_torch.py", "-m", model, "--target", "de", "--beam", "4", "--batch-size", batch,
           "--threads", threads, "-i", inp, "-o", out]
    if ids_out:
        cmd += ["--out-ids", ids_out, "--out-src-ids", src_ids_out]
    r = run(cmd)
    j = last_json(r["out"])
    return {"sentences": j["sentences"], "sentences_per_s": j["sentences_per_s"], "tokens_per_s": j["tokens_per_s"],
            "wall_s": r["wall_s"], "peak_rss_kb": r["peak_rss_kb"]}


def bf16_available(build, model):
    """deepmt refuses --precision bf16 (exit 1) on a CPU without AVX-512 BF16."""
    r = subprocess.run([os.path.join(build, "deepmt"), "translate", "-m", model, "--target", "de", "-q",
                        "--precision", "bf16"], input="Hello.\n", capture_output=True, text=True)
    return r.returncode == 0


def kernel_level(build):
    """The level deepmt runs here by default (`deepmt --version`: "kernels: avx2; ...")."""
    r = run([os.path.join(build, "deepmt"), "--version"], check=False)
    m = re.search(r"^kernels: ([a-z0-9]+);", r["out"], re.M)
    return m.group(1) if m else "unknown"


def bleu_of(hyp_path, ref_path):
    spec = importlib.util.spec_from_file_location("bleu", os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "scripts", "bleu.py"))
    bleu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bleu)
    with open(hyp_path, encoding="utf-8") as f:
        hyps = f.read().splitlines()
    with gzip.open(ref_path, "rt", encoding="utf-8") as f:
        refs = f.read().splitlines()
    return bleu.corpus_bleu(hyps, refs[:len(hyps)])["score"]


def agreement(a, b):
    with open(a, encoding="utf-8") as f, open(b, encoding="utf-8") as g:
        x, y = f.read().splitlines(), g.read().splitlines()
    same = sum(p == q for p, q in zip(x, y))
    return same, max(len(x), len(y))


def bench(cfg):
    """cfg: build, model, shared, out, threads [int], rounds, b1_lines. -> (markdown, json)."""
    out = os.path.join(cfg["out"], "engine")
    os.makedirs(out, exist_ok=True)
    src, full, b1 = prepare_input(cfg["shared"], out, cfg["b1_lines"], cfg.get("lines"))
    results, md_rows = [], []
    ref_de = src.replace(".en.gz", ".de.gz")
    with_bf16 = bf16_available(cfg["build"], cfg["model"])
    if not with_bf16:
        log("engine: no deepmt-bf16 rows (this CPU lacks AVX-512 BF16)")
    level = kernel_level(cfg["build"])
    levels = ["deepmt-generic"] + (["deepmt-avx2"] if level not in ("avx2", "generic") else [])
    variants = {"deepmt-1worker": {"workers": 1}, "deepmt-bf16": {"precision": "bf16"},
                "deepmt-int8": {"precision": "int8"}, "deepmt-generic": {"isa": "generic"},
                "deepmt-avx2": {"isa": "avx2"}, "deepmt-shortlist": {"shortlist": True},
                "deepmt-int8-shortlist": {"precision": "int8", "shortlist": True}}
    shortlisted = ["deepmt-shortlist", "deepmt-int8-shortlist"] \
        if os.path.isfile(os.path.join(cfg["model"], "shortlist.bin")) else []
    targets = []
    for threads in cfg["threads"]:
        for batch, inp in ((32, full), (1, b1)):
            engines = ["deepmt"] + ([] if cfg.get("no_pytorch") else ["pytorch"]) + (["deepmt-1worker"] if threads > 1 and batch > 1 and not cfg.get("no_pytorch") else []) + \
                (["deepmt-bf16"] if with_bf16 else []) + ["deepmt-int8"] + levels + shortlisted
            runs = {e: [] for e in engines}
            agree = {}
            for r in range(cfg["rounds"]):
                for e in engines:
                    hyp = os.path.join(out, f"{e}.t{threads}.b{batch}.de")
                    log(f"engine: {e}, {threads} threads, batch {batch}, round {r + 1}/{cfg['rounds']}")
                    if e == "pytorch":
                        first = threads == cfg["threads"][0] and batch == 32 and r == 0
                        runs[e].append(run_torch(cfg["model"], inp, hyp, threads, batch,
                                                 *((os.path.join(out, "pytorch.ids"), os.path.join(out, "src.ids"))
                                                   if first else ())))
                    else:
                        runs[e].append(run_deepmt(cfg["build"], cfg["model"], inp, hyp, threads, batch,
                                                  **variants.get(e, {})))
            ref = os.path.join(out, f"pytorch.t{threads}.b{batch}.de")
            for e in engines:
                if e != "pytorch" and "pytorch" in runs:
                    agree[e] = agreement(os.path.join(out, f"{e}.t{threads}.b{batch}.de"), ref)
            base, own = runs.get("pytorch", runs["deepmt"]), runs["deepmt"]
            own_agree = {e: agreement(os.path.join(out, f"{e}.t{threads}.b{batch}.de"),
                                      os.path.join(out, f"deepmt.t{threads}.b{batch}.de"))
                         for e in engines if e.startswith("deepmt-")}
            for e in engines:
                rs = runs[e]
                # ratio per round (interleaved pairs), then the median of the ratios
                ratio = median([a["tokens_per_s"] / b["tokens_per_s"] for a, b in zip(rs, base)]) \
                    if "pytorch" in runs else float("nan")
                vs_own = median([a["tokens_per_s"] / b["tokens_per_s"] for a, b in zip(rs, own)])
                row = {"threads": threads, "batch": batch, "engine": e, "sentences": rs[0]["sentences"],
                       "rounds": len(rs), "tokens_per_s": median([x["tokens_per_s"] for x in rs]),
                       "sentences_per_s": median([x["sentences_per_s"] for x in rs]),
                       "peak_rss_mib": mib(max(x["peak_rss_kb"] for x in rs)),
                       "wall_s": median([x["wall_s"] for x in rs]), "ratio_vs_pytorch": ratio,
                       "ratio_vs_deepmt": vs_own, "per_round": rs}
                if e in own_agree:
                    row["same_text_as_deepmt"] = f"{own_agree[e][0]}/{own_agree[e][1]}"
                if e in agree:
                    row["text_agreement"] = f"{agree[e][0]}/{agree[e][1]}"
                if batch == 32:
                    row["bleu"] = bleu_of(os.path.join(out, f"{e}.t{threads}.b{batch}.de"), ref_de)
                results.append(row)
                md_rows.append([threads, batch, e, row["sentences"], row["tokens_per_s"], row["sentences_per_s"],
                                row["peak_rss_mib"], row["wall_s"], f"{ratio:.2f}x" if ratio == ratio else "-", f"{vs_own:.2f}x",
                                row.get("text_agreement", "-"), row.get("same_text_as_deepmt", "-"),
                                f"{row['bleu']:.2f}" if "bleu" in row else "-"])
            # the kernels' targets: int8 over F32; AVX2 over the OpenBLAS path
            def per_round(a, b):
                return median([x["tokens_per_s"] / y["tokens_per_s"] for x, y in zip(runs[a], runs[b])])
            targets.append([threads, batch, "int8 / F32", f"{per_round('deepmt-int8', 'deepmt'):.2f}x",
                            "1.9x" if batch > 1 else "2.5x"])
            if shortlisted:  # what `serve` runs by default (int8 with the shortlist) over F32 without
                targets.append([threads, batch, "int8 + shortlist / F32",
                                f"{per_round('deepmt-int8-shortlist', 'deepmt'):.2f}x", "3x" if batch > 1 else "4x"])
            avx2 = "deepmt-avx2" if "deepmt-avx2" in runs else "deepmt" if level == "avx2" else None
            if avx2:
                targets.append([threads, batch, "avx2 F32 / generic (OpenBLAS) F32",
                                f"{per_round(avx2, 'deepmt-generic'):.2f}x", "1.5x"])
    md = (f"Kernel level: {level} (deepmt --version).\n\n"
          + table(["threads", "batch", "engine", "sentences", "target tok/s", "sent/s", "peak RSS MiB",
                   "process wall s", "tok/s vs PyTorch", "vs deepmt", "same text as PyTorch", "same text as deepmt",
                   "BLEU"], md_rows)
          + "\n\nTargets (medians of per-round ratios, same run):\n\n"
          + table(["threads", "batch", "ratio", "measured", "target"], targets))
    if cfg.get("no_pytorch"):
        return md + "\n\n(--no-pytorch: no PyTorch runs, no token-level agreement.)\n", \
            {"input": src, "rows": results, "kernel_level": level, "targets": targets}
    # token-level agreement: the engine on the very source ids PyTorch used
    with open(os.path.join(cfg["model"], "config.json")) as f:
        de_id = next(l["id"] for l in json.load(f)["languages"] if l["code"] == "de")
    ids = os.path.join(out, "deepmt.ids")
    r = run([os.path.join(cfg["build"], "bench", "bench_beam"), cfg["model"], "-i", os.path.join(out, "src.ids"),
             "-o", ids, "--forced", de_id, "--beam", "4", "--batch-size", "32", "--threads", cfg["threads"][0],
             "--no-shortlist"])
    bb = last_json(r["out"])
    same, total = agreement(ids, os.path.join(out, "pytorch.ids"))
    hyps = open(ids).read().splitlines()
    lens = [len(h.split()) for h in hyps]
    md += (f"\n\n1-best **token sequences**, deepmt (`bench_beam`, same source ids) vs PyTorch, "
           f"batch 32: **{same}/{total} identical**. deepmt output length: mean {sum(lens) / len(lens):.1f}, "
           f"max {max(lens)} tokens, {len(set(hyps))} distinct 1-best outputs"
           f"{' (few: a weak agreement check)' if len(set(hyps)) < len(hyps) / 10 else ''}. "
           f"With equal outputs the sentences/s ratio equals the tokens/s ratio. "
           f"Ids-only engine (no tokenizer; one run, not a ratio): {bb['tokens_per_s']:.0f} target tok/s "
           f"({cfg['threads'][0]} thread).\n")
    return md, {"input": src, "rows": results, "token_agreement": [same, total], "bench_beam": bb,
                "kernel_level": level, "targets": targets}
