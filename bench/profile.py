#!/usr/bin/python3
"""Where deepmt's time goes: perf samples of bench_beam, grouped by engine phase.

    bench/profile.py MODEL_DIR SRC.ids [--batch-size 32] [--forced ID] [--precision f32|bf16|int8]
                     [--no-shortlist]
                     [--build build]

Runs `perf record --call-graph dwarf` on build/bench/bench_beam (one thread) and
files every sample under the innermost phase its call chain passes through:
loading, encoder (matrix products / attention / rest), cross-attention K/V,
the decoder step (self-attention projections, self-attention over the cache,
cross-attention projections and scores, FFN, output projection, log-softmax,
residual + LayerNorm), beam bookkeeping. Needs perf (Debian: linux-perf) and
permission to use it (root, or kernel.perf_event_paranoid <= 1).
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

# (phase, frames that must all be on the chain); first match wins, most specific first
PHASES = [
    ("load (read, widen F16)", ["dmt_model_load"]),
    ("encoder: matrix products", ["dmt_encode", "dmt_matmul"]),
    ("encoder: attention", ["dmt_encode", "dmt_attention"]),
    ("encoder: rest (norm, embed)", ["dmt_encode"]),
    ("cross-attention K/V, once per batch", ["dmt_decode_begin"]),
    ("step: self-attn projections", ["decoder_self_attention", "dmt_matmul"]),
    ("step: self-attn over the KV cache", ["decoder_self_attention"]),
    ("step: cross-attn projections", ["decoder_cross_attention", "dmt_matmul"]),
    ("step: cross-attn scores", ["decoder_cross_attention"]),
    ("step: FFN (fc1, fc2, act)", ["ffn_block"]),
    ("step: residual + LayerNorm", ["dmt_residual_norm"]),
    ("step: log-softmax", ["dmt_log_softmax"]),
    ("step: output projection", ["dmt_decode_step", "dmt_matmul"]),
    ("step: rest (embed, scale)", ["dmt_decode_step"]),
    ("shortlist: gathering columns", ["dmt_vocab_sync"]),
    ("shortlist: rows masked, log-softmax", ["dmt_vocab_row"]),
    ("beam: candidates, reorder, bookkeeping", ["dmt_beam_search"]),
]


def samples(perf_script):
    """Yields the list of (symbol, dso) frames of each sample, innermost first."""
    stack = []
    for line in perf_script.splitlines():
        if not line.strip():
            if stack:
                yield stack
            stack = []
        elif line[0] in " \t":
            parts = line.split()
            if len(parts) >= 3:
                stack.append((parts[1].split("+")[0], parts[-1]))
    if stack:
        yield stack


# Frames that stand for a PHASES name: the matrix-product entry points (dmt_matmul
# tail-calls dmt_matmul_strided, so either may be on the chain; attention's q, k, v
# go through dmt_matmul_shared) and the few-row kernel.
ALIASES = {"dmt_matmul_strided": "dmt_matmul", "dmt_matmul_shared": "dmt_matmul", "matmul_few_rows": "dmt_matmul"}
MATRIX_KERNELS = ("matmul_few_rows", "panel_f32", "panel_bf16", "panel_i8", "gemm_i8_vnni", "gemm_i8_avxvnni",
                  "gemm_i8_generic", "dmt_gemm_i8_avx2", "dmt_gemm_pack_rows_i8")  # deepmt's own product kernels (ops.c, gemm.c, int8)


def frame_name(f):
    f = f.split(".")[0]  # target clones: attend_row.avx2
    return ALIASES.get(f, f)


def classify(stack):
    names = {frame_name(f) for f, _ in stack}
    for phase, need in PHASES:
        if all(n in names for n in need):
            return phase
    return "other (process start/exit, kernel)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("src")
    ap.add_argument("--build", default="build")
    ap.add_argument("--batch-size", default="32")
    ap.add_argument("--forced", default="-1")
    ap.add_argument("--freq", default="499")
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16", "int8"])
    ap.add_argument("--no-shortlist", action="store_true", help="ignore MODEL_DIR/shortlist.bin")
    a = ap.parse_args()
    binary = os.path.join(a.build, "bench", "bench_beam")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        cmd = ["perf", "record", "-q", "-F", a.freq, "--call-graph", "dwarf,65528", "-o", data, binary, a.model,
               "-i", a.src, "-o", os.devnull, "--batch-size", a.batch_size, "--forced", a.forced, "--threads", "1",
               "--precision", a.precision] + (["--no-shortlist"] if a.no_shortlist else [])
        print("$", " ".join(cmd), file=sys.stderr)
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode:
            sys.exit(f"profile: perf failed: {run.stderr[-800:]}")
        script = subprocess.run(["perf", "script", "-i", data], capture_output=True, text=True).stdout
    counts, blas = collections.Counter(), collections.Counter()
    for st in samples(script):
        phase = classify(st)
        counts[phase] += 1
        # innermost frames: OpenBLAS, or our kernel (perf lists its inlined intrinsics first)
        blas[phase] += "blas" in st[0][1] or any(f.split(".")[0] in MATRIX_KERNELS for f, _ in st[:4])
    total = sum(counts.values())
    print(run.stdout.strip())
    print(f"\n{total} samples at {a.freq} Hz; share of all samples (in matrix-product kernels)\n")
    print("| phase | share | of which in OpenBLAS or the few-row kernel |\n|---|---|---|")
    for phase, n in counts.most_common():
        print(f"| {phase} | {100 * n / total:.1f}% | {100 * blas[phase] / max(n, 1):.0f}% |")


if __name__ == "__main__":
    main()
