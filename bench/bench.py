#!/usr/bin/python3
"""`make bench`: deepmt's speed and memory, against the PyTorch reference.

    bench/bench.py --build build --model models/default --shared ../shared
    bench/bench.py --sections depth --rounds 1          # one section, quickly
    bench/bench.py --sections engine,profile --standin --out build/bench-standin
    bench/bench.py --size                               # also the 3.2B model (minutes, ~13 GB)

Sections: engine (deepmt vs PyTorch on Multi30k test_2016_flickr en->de), server
(throughput and latency under load), sched (continuous vs whole batching: a heavy
request beside light ones, 64 and 8 mixed clients, 300 disconnected clients, batch
invariance; bench/sched.py), models (two models served together vs each alone:
throughput, p99, RSS; bench/models.py), hardening (/health under a flood of costly documents;
bench/hardening.py), depth (12 / 100 / 1,000 layers), profile (perf, when
installed), size (the 3.2B shape; opt-in, run first). Writes
OUT/report.md and OUT/report.json. Every figure that compares is a ratio of runs
interleaved in the same invocation, because absolute times on a shared machine are
noisy. When --model has no weights yet (or with --standin), a random stand-in of the
default model's shape is made (bench/make_standin.py): its varied outputs make the
agreement check stronger than an undertrained model's.
"""
import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import depth  # noqa: E402
import engine  # noqa: E402
import hardening  # noqa: E402
import models  # noqa: E402
import sched  # noqa: E402
import server  # noqa: E402


def pick_model(a, out):
    """(model dir, description): the trained model if it is there, else a stand-in."""
    if os.path.exists(os.path.join(a.model, "model.safetensors")) and not a.standin:
        return a.model, f"`{a.model}`"
    standin = os.path.join(out, "standin")
    spm = next((p for p in (os.path.join(a.model, "sentencepiece.model"), "runs/spm/spm.model")
                if os.path.exists(p)), None)
    if not spm:
        sys.exit(f"bench: {a.model} has no weights and no SentencePiece model is around for a stand-in "
                 "(run `make train`, or give --model)")
    if not os.path.exists(os.path.join(standin, "model.safetensors")):
        common.run([common.PYTHON, "bench/make_standin.py", "--out", standin, "--spm", spm])
    return standin, (f"random-init stand-in `{standin}` (6+3 layers, d_model 256, FFN 1024, 4 heads, F16, "
                     f"untied output, tokenizer `{spm}`)"
                     + ("" if a.standin else f": {a.model} had no weights yet")
                     + ". Random models write nonsense until the length limit (1.2 x source + 10 tokens), "
                       "so every sentence costs its maximum number of decoder steps")


def blas_kernels(cfg):
    """The OpenBLAS kernel family deepmt runs in this environment (`deepmt --version`)."""
    r = common.run([os.path.join(cfg["build"], "deepmt"), "--version"], check=False)
    out = r["out"].strip()
    return out[out.find("(OpenBLAS ") + 10:out.rfind(" kernels)")] if "(OpenBLAS " in out else "unknown"


def linear_kernels(cfg):
    """What deepmt multiplies its linear layers with here (`deepmt --version`, second line)."""
    r = common.run([os.path.join(cfg["build"], "deepmt"), "--version"], check=False)
    lines = r["out"].strip().splitlines()
    return lines[1] if len(lines) > 1 else "unknown"


def profile(cfg, out):
    """perf profiles of bench_beam: the engine model at batch 32 and 1, the 1,000-layer model."""
    if not shutil.which("perf"):
        return "perf is not installed (Debian: linux-perf): no profile.\n"
    os.makedirs(os.path.join(out, "profile"), exist_ok=True)
    runs = []
    src = os.path.join(out, "engine", "src.ids")
    if cfg.get("model") and os.path.exists(src):
        with open(os.path.join(cfg["model"], "config.json")) as f:
            de = next(l["id"] for l in json.load(f)["languages"] if l["code"] == "de")
        lines = open(src).read().splitlines()
        for n, batch in ((256, 32), (32, 1)):
            part = os.path.join(out, "profile", f"src{n}.ids")
            open(part, "w").write("\n".join(lines[:n]) + "\n")
            runs.append((f"engine model, {n} Multi30k sentences, batch {batch}", cfg["model"], part, batch, de))
    deep = os.path.join(out, "depth", "deepnorm-500x500")
    if os.path.exists(deep):
        runs.append(("1,000-layer model (500+500, d_model 64), 8 sentences, one batch", deep,
                     os.path.join(out, "depth", "src.ids"), 8, -1))
    text = []
    for title, model, src, batch, forced in runs:
        r = common.run([common.PYTHON, "bench/profile.py", model, src, "--build", cfg["build"], "--batch-size", batch,
                        "--forced", forced], check=False)
        body = r["out"].split("\n\n", 1)[-1] if r["rc"] == 0 else f"failed: {r['err'][-500:]}"
        text += [f"**{title}**", "", body]
    return "\n".join(text) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", default="models/default")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--out", help="default: BUILD/bench")
    ap.add_argument("--threads", default="1,2", help="thread counts to compare at (engine section)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved repetitions of each comparison")
    ap.add_argument("--b1-lines", type=int, default=200, help="lines for the batch-1 runs (the first N)")
    ap.add_argument("--lines", type=int, default=0, help="lines for the batch-32 runs (0: all 1,000)")
    ap.add_argument("--no-pytorch", action="store_true",
                    help="engine section: deepmt's variants only (kernel levels, precisions), no PyTorch "
                         "(and no deepmt-1worker, which mirrors how PyTorch uses threads)")
    ap.add_argument("--sections", default="engine,server,sched,models,hardening,depth,profile")
    ap.add_argument("--size", action="store_true", help="also the 3.2B-parameter model (minutes, ~13 GB)")
    ap.add_argument("--concurrency", default="1,8,64")
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--server-threads", type=int, default=0, help="0: the server's default")
    ap.add_argument("--depth-sentences", type=int, default=8)
    ap.add_argument("--standin", action="store_true",
                    help="use the random stand-in even when --model has weights (varied outputs for the "
                         "agreement check)")
    a = ap.parse_args()
    os.chdir(common.REPO)
    out = a.out or os.path.join(a.build, "bench")
    os.makedirs(out, exist_ok=True)
    sections = [s for s in a.sections.split(",") if s] + (["size"] if a.size else [])
    t0 = time.time()
    info = common.machine()
    cfg = {"build": a.build, "shared": a.shared, "out": out, "threads": [int(x) for x in a.threads.split(",")],
           "rounds": a.rounds, "b1_lines": a.b1_lines, "lines": a.lines, "no_pytorch": a.no_pytorch, "concurrency": a.concurrency, "requests": a.requests,
           "server_threads": a.server_threads, "depth_sentences": a.depth_sentences}
    model_desc = None
    if {"engine", "server", "sched", "hardening", "profile"} & set(sections):
        cfg["model"], model_desc = pick_model(a, out)
    md, js = [], {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t0)), "machine": info,
                  "config": cfg, "model": model_desc}
    if "size" in sections:                              # first: it wants the quietest machine
        size_text, js["size"] = depth.bench_size(cfg)
    if "engine" in sections:
        text, js["engine"] = engine.bench(cfg)
        md += ["## 1. Engine: deepmt vs PyTorch",
               f"Model: {model_desc}. Multi30k test_2016_flickr en->de ({js['engine']['input']}), beam 4, "
               f"batch 32 ({a.lines or 1000:,} lines) and batch 1 (first {a.b1_lines} lines), {a.rounds} interleaved rounds; "
               "medians. Throughput is each tool's own timer (model loading excluded); "
               "`tok/s vs PyTorch` is the median over rounds of deepmt/PyTorch target tokens per second.", text]
    if "server" in sections:
        os.makedirs(os.path.join(out, "engine"), exist_ok=True)
        cfg["sentences"] = engine.prepare_input(a.shared, os.path.join(out, "engine"), a.b1_lines)[1]
        text, js["server"] = server.bench(cfg)
        md += ["## 2. Server: `deepmt serve` under load",
               f"Model: {model_desc}. scripts/loadtest.py: one sentence a request, targets de/en/fr/cs round-robin, "
               f"keep-alive clients on loopback; server threads: "
               f"{a.server_threads or 'its default (min(cores, 4) workers, cores / workers BLAS threads each)'}; {a.rounds} rounds, medians.",
               text]
    if "sched" in sections:
        sa = argparse.Namespace(build=a.build, model=cfg["model"], shared=a.shared, rounds=a.rounds,
                                workloads="heavy,mixed64,clients8,gone,invariance", per_client=8, invariance=1000,
                                heavy_sentences=64)
        med, js["sched"] = sched.bench(sa)
        md += ["## 2b. Scheduling: continuous vs whole batching (`deepmt serve --batching`)",
               f"Model: {model_desc}. bench/sched.py; 2 workers x 1 thread. " + sched.__doc__.split("Workloads")[1]
               .split("Prints")[0].strip().replace("\n", " "), sched.markdown(med, sa)]
    if "models" in sections:
        ma = argparse.Namespace(build=a.build, models="models/default,models/captions", shared=a.shared,
                                rounds=a.rounds, clients=8, seconds=15)
        js["models"] = models.bench(ma)
        md += ["## 2d. Several models: two served together vs each alone (bench/models.py)",
               models.__doc__.split("Workloads")[1].split("Prints")[0].strip().replace("\n", " "),
               models.markdown(js["models"])]
    if "hardening" in sections:
        ha = argparse.Namespace(build=a.build, model=cfg["model"], seconds=20, clients=16)
        js["hardening"] = hardening.bench(ha)
        md += ["## 2c. Probes under hostile load (bench/hardening.py)",
               f"Model: {model_desc}. " + hardening.__doc__.split("Workloads")[1].split("Prints")[0].strip()
               .replace("\n", " "), hardening.markdown(js["hardening"], ha)]
    if "depth" in sections:
        text, js["depth"] = depth.bench_depth(cfg)
        md += ["## 3. Depth: random-init DeepNorm models, ids only", text]
    if "size" in sections:
        md += ["## 4. Size: the DeepNet paper's 3.2B shape, random-init, ids only (run first)", size_text]
    if "profile" in sections:
        md += ["## 5. Profile: where deepmt's time goes (perf, bench/profile.py, 1 thread)", profile(cfg, out)]
    js["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    info["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    head = ["# deepmt benchmark report", "",
            f"{js['started']} to {js['finished']}. Machine: {info['cpu']}, {info['cores']} cores "
            f"({info.get('Flags', '')}), {info['mem_gib']} GiB; load average {' '.join(info['loadavg_start'])} at "
            f"the start, {' '.join(info['loadavg_end'])} at the end (the machine is shared: compare ratios, "
            f"not absolute times). gcc {info.get('gcc')}, OpenBLAS {info.get('openblas')} (pthread; PyTorch "
            f"uses the same library), PyTorch {info.get('torch')}. BLAS kernels: {blas_kernels(cfg)} for every "
            f"process (OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset: OpenBLAS detects the CPU)')}; "
            f"both engines inherit it). deepmt's {linear_kernels(cfg)} (its own kernels over weights packed "
            f"at load, model/kernels/; attention scores still go through OpenBLAS); PyTorch's linear layers "
            f"are OpenBLAS sgemm.", "",
            "Threads: `deepmt translate --threads N` and `bench_beam --threads N` run N workers with one "
            "BLAS thread each (deepmt's default); `deepmt-1worker` is `--threads N --workers 1` (N BLAS "
            "threads in one search). PyTorch (tools/bench_torch.py) gets torch.set_num_threads(N), "
            "OMP/OPENBLAS/MKL_NUM_THREADS=N and OMP_WAIT_POLICY=PASSIVE: with OpenMP's default (spinning) "
            "its threads fight OpenBLAS's on a busy machine, and PyTorch at 2 threads ran 6x slower here.", ""]
    cmds = ["## Commands", "```", *common.COMMANDS, "```"]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(head + [x + "\n" for x in md] + cmds) + "\n")
    js["commands"] = common.COMMANDS
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(js, f, indent=1)
    common.log(f"wrote {out}/report.md and report.json ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
