#!/usr/bin/python3
"""The source layout shows the architecture and has no dependency circles (TAP).

A part is a folder (base/, model/, model/kernels/, tokenizer/, text/, server/transport/,
server/api/, server/sched/, cli/); server/'s own files (server.c, config.c, log.c,
metrics.c) are parts of their own: the server's top (server.c) and what every
server part may use. Part A depends on part B when an object file of A uses a
symbol an object file of B defines (`nm` on the built objects: the real
dependencies, whichever header declares them). The check: no circle between parts,
base/ depends on no other part, text/ never on server/ or cli/, model/ and
tokenizer/ on neither text/ nor server/; and every part has a header comment saying what it is.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import tap  # noqa: E402

BUILD = os.path.join(REPO, os.environ.get("DEEPMT_BUILD", "build"))


def part_of(src):
    d = os.path.dirname(src)
    return src[:-len(os.path.splitext(src)[1])] if d == "server" else d


def objects():
    """{source path: object path} for the library's and the CLI's objects."""
    out = {}
    for top in ("base", "model", "tokenizer", "text", "server", "cli"):
        for root, _, files in os.walk(os.path.join(BUILD, top)):
            for f in files:
                if f.endswith(".o"):
                    rel = os.path.relpath(os.path.join(root, f), BUILD)[:-2]
                    src = next((rel + e for e in (".c", ".cc") if os.path.exists(os.path.join(REPO, rel + e))), None)
                    if src:
                        out[src] = os.path.join(root, f)
    return out


def symbols(obj):
    r = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True, text=True)
    defined = {line.split()[-1] for line in r.stdout.splitlines() if line.strip()}
    r = subprocess.run(["nm", "-u", obj], capture_output=True, text=True)
    used = {line.split()[-1] for line in r.stdout.splitlines() if line.strip()}
    return defined, used


def graph(objs):
    defs, uses = {}, {}
    for src, obj in objs.items():
        d, u = symbols(obj)
        for s in d:
            defs[s] = src
        uses[src] = u
    edges = {}
    for src, used in uses.items():
        for s in used:
            if s in defs and part_of(defs[s]) != part_of(src):
                edges.setdefault(part_of(src), {}).setdefault(part_of(defs[s]), set()).add(f"{src} uses {s} ({defs[s]})")
    return edges


def find_cycle(edges):
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in edges.get(n, {}):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if not state.get(m):
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None
    for n in list(edges):
        if not state.get(n):
            c = visit(n)
            if c:
                return c
    return None


def main():
    objs = objects()
    if not any(s.startswith("server/") for s in objs):
        tap.skip(f"no objects under {BUILD} (build first)")
        return tap.done()
    edges = graph(objs)
    cycle = find_cycle(edges)
    why = ""
    if cycle:
        why = "\n".join(sorted(edges[a][b])[0] for a, b in zip(cycle, cycle[1:]))
    tap.ok(cycle is None, f"no dependency circle between the {len(set(map(part_of, objs)))} parts",
           f"circle {' -> '.join(cycle or [])}:\n{why}")
    for low, not_on in (("base", ("model", "tokenizer", "text", "server", "cli")), ("text", ("server", "cli")), ("model", ("text", "server", "cli")),
                        ("tokenizer", ("text", "server", "cli"))):
        bad = [f"{a} -> {b}: {sorted(why)[0]}" for a, outs in edges.items() if a == low or a.startswith(low + "/")
               for b, why in outs.items() if any(b == x or b.startswith(x + "/") for x in not_on)]
        tap.ok(not bad, f"{low}/ depends on none of {', '.join(x + '/' for x in not_on)}", "\n".join(bad[:5]))
    # the same rules for #include lines (a header may be included for its types only)
    inc = {}
    for top in ("base", "model", "tokenizer", "text", "server", "cli"):
        for root, _, files in os.walk(os.path.join(REPO, top)):
            for f in files:
                if f.endswith((".c", ".cc", ".h")):
                    path = os.path.relpath(os.path.join(root, f), REPO)
                    with open(os.path.join(REPO, path), encoding="utf-8") as fh:
                        for line in fh:
                            if line.startswith('#include "'):
                                inc.setdefault(path, []).append(line.split('"')[1])
    for low, not_on in (("base", ("model", "tokenizer", "text", "server", "cli")), ("text", ("server", "cli")),
                        ("model", ("text", "server", "cli")), ("tokenizer", ("text", "server", "cli"))):
        bad = [f"{src} includes {h}" for src, hs in inc.items() if src.startswith(low + "/") for h in hs
               if any(h.startswith(x + "/") for x in not_on)]
        tap.ok(not bad, f"no file under {low}/ includes a header of {', '.join(x + '/' for x in not_on)}",
               "\n".join(bad[:5]))
    tap.ok(any(e for e in edges.get("cli", {}) if e == "text"), "the CLI uses the text module",
           f"cli depends on {sorted(edges.get('cli', {}))}")
    for overview in ("server/server.h", "text/text.h"):
        with open(os.path.join(REPO, overview)) as f:
            head = f.read(3000)
        tap.ok(head.startswith("/*") and "parts" in head.split("*/")[0],
               f"{overview} opens with a comment on the module's parts")
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
