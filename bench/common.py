"""Shared helpers for bench/*.py: running timed commands, the machine description,
medians, markdown tables.

Every command goes through run(), which records it (for the report), waits for it
with os.wait4 and so gets that process's own peak RSS (ru_maxrss) and wall time.
"""
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
COMMANDS = []          # every command run, in order, for the report


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, env=None, stdout=None, cwd=REPO, check=True):
    """Runs cmd (a list); -> {wall_s, peak_rss_kb, rc, out (stdout text unless redirected), err}."""
    shown = " ".join(shlex.quote(str(c)) for c in cmd)
    if env:
        shown = " ".join(f"{k}={v}" for k, v in env.items()) + " " + shown
    if stdout:
        shown += f" > {stdout}"
    COMMANDS.append(shown)
    log(shown)
    full_env = dict(os.environ, **(env or {}))
    with tempfile.TemporaryFile("w+") as out_t, tempfile.TemporaryFile("w+") as err_t:
        out_f = open(stdout, "w") if stdout else out_t
        t0 = time.perf_counter()
        p = subprocess.Popen([str(c) for c in cmd], stdout=out_f, stderr=err_t, env=full_env, cwd=cwd, text=True)
        _, status, ru = os.wait4(p.pid, 0)            # this child's own rusage
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if stdout:
            out_f.close()
        out_t.seek(0)
        err_t.seek(0)
        out, err = out_t.read(), err_t.read()
    if check and p.returncode != 0:
        sys.exit(f"bench: command failed ({p.returncode}): {shown}\n{err[-2000:]}")
    return {"wall_s": wall, "peak_rss_kb": ru.ru_maxrss, "rc": p.returncode, "out": out, "err": err}


def last_json(text):
    """The last line of text that parses as a JSON object."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON line in: {text[-500:]}")


def machine():
    """CPU model, cores, memory, load, versions: the context every number needs."""
    info = {"cpu": platform.processor() or "?", "cores": os.cpu_count(), "kernel": platform.release()}
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in ("Model name", "CPU(s)", "Thread(s) per core", "L3 cache", "Flags"):
                info[k.strip()] = v.strip() if k.strip() != "Flags" else \
                    " ".join(f for f in v.split() if f in ("avx2", "avx512f", "fma", "f16c", "avx512_bf16"))
        info["cpu"] = info.get("Model name", info["cpu"])
    except OSError:
        pass
    with open("/proc/meminfo") as f:
        info["mem_gib"] = round(int(f.readline().split()[1]) / 2 ** 20, 1)
    info["loadavg_start"] = open("/proc/loadavg").read().split()[:3]
    try:
        info["openblas"] = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "libopenblas0-pthread"],
                                          capture_output=True, text=True).stdout
        info["torch"] = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"],
                                       capture_output=True, text=True).stdout.strip()
        info["gcc"] = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return info


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def table(header, rows):
    """Markdown table from a header list and rows of cells (floats formatted)."""
    def cell(x):
        if isinstance(x, float):
            return f"{x:.3g}" if abs(x) < 10 else f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.1f}"
        return str(x)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def mib(kb):
    return kb / 1024.0
