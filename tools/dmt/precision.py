"""Where and in which precision a training run computes (tools/train.py): the
device, and bf16 autocast when it pays on this CPU (--amp auto measures it)."""
import contextlib
import time

import torch
import torch.nn.functional as F

from dmt.cpuinfo import cpu_has_bf16
from dmt.runlog import log


def amp_context(dev, amp):
    """bf16 autocast where asked (the GPU); plain fp32 otherwise."""
    if amp == "bf16":
        return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def bf16_speedup(d_model=256, ffn_dim=1024, rows=4096, reps=6):
    """fp32 time / bf16-autocast time of a feed-forward block's forward + backward on
    this CPU (a few seconds). Autocast pays off only where the CPU multiplies bf16
    natively (AVX512-BF16, AMX); elsewhere it converts and is slower."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, d_model, generator=g)
    w1 = (torch.randn(ffn_dim, d_model, generator=g) * 0.05).requires_grad_()
    w2 = (torch.randn(d_model, ffn_dim, generator=g) * 0.05).requires_grad_()
    cpu = torch.device("cpu")

    def once(amp):
        t0 = time.perf_counter()
        with amp_context(cpu, amp):
            y = F.linear(torch.relu(F.linear(x, w1)), w2)
        y.float().square().mean().backward()
        return time.perf_counter() - t0
    once("none"), once("bf16")  # warm-up (oneDNN builds its kernels on first use)
    best = {"none": float("inf"), "bf16": float("inf")}
    for _ in range(reps):  # interleaved, so that load that comes and goes hits both alike
        for amp in best:
            best[amp] = min(best[amp], once(amp))
    return best["none"] / best["bf16"]


def amp_choice(speedup, native_bf16):
    """The autocast --amp auto takes on a CPU, from bf16_speedup's measurement. Where the
    CPU multiplies bf16 natively (AVX512-BF16, AMX) bf16 is 2.4-3.5x fp32 on whole steps,
    so bf16 unless measured clearly slower (< 0.8x): one measurement on a busy machine is
    noise (a run once measured 0.99x while the process it replaced was still stopping,
    and trained at a third of its speed for an hour). Elsewhere autocast converts and is
    slower: bf16 only from 1.15x."""
    return "bf16" if speedup >= (0.8 if native_bf16 else 1.15) else "none"


def pick_amp(dev, amp, d_model=256, ffn_dim=1024):
    """--amp auto: bf16 autocast on a GPU; on a CPU as amp_choice decides from a
    measurement (bf16_speedup); `make train-bench` gives the whole-step figures."""
    if amp != "auto":
        return amp
    if dev.type == "cuda":
        return "bf16"
    speedup, native = bf16_speedup(d_model, ffn_dim), cpu_has_bf16()
    choice = amp_choice(speedup, native)
    log(f"--amp auto: bf16 autocast {speedup:.2f}x fp32 on this CPU's feed-forward block "
        f"({'native bf16: bf16 unless below 0.8x' if native else 'no native bf16: bf16 from 1.15x'}): {choice}")
    return choice


def pick_device(name):
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)
