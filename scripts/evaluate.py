#!/usr/bin/python3
"""Evaluate a LibreTranslate-compatible server: translate, then score with BLEU and
chrF2 exactly as sacreBLEU 2.6 does (scripts/bleu.py). Standard library only.

    # one direction from two files
    scripts/evaluate.py --src test.en --ref test.de --direction en-de
    # Multi30k: DIR/{split}.{lang}.gz, line-aligned
    scripts/evaluate.py --multi30k ../shared/data/multi30k --split test_2016_flickr \\
        --directions all --json build/eval/report.json --hyp-dir build/eval

The server is asked `POST {url}/translate` with {"q": [...], "source", "target",
"format": "text"} and must answer {"translatedText": [...]}. Before the first request,
`GET {url}/languages` checks that the server answers and, when it lists its
languages, that it offers the directions asked for.

Exit status: 0 done; 1 the server failed (error response, bad answer, retries used
up); 2 bad usage or input (unknown direction or language, missing file, line counts
that differ); 3 the server cannot be reached; 130 interrupted.
"""

import argparse
import concurrent.futures
import email.utils
import gzip
import http.client
import itertools
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bleu  # noqa: E402

LANGS = ("en", "de", "fr", "cs")       # the Multi30k languages
EXIT_SERVER, EXIT_USAGE, EXIT_UNREACHABLE = 1, 2, 3
MAX_RETRY_WAIT = 60.0                  # cap on one Retry-After / backoff wait, seconds


class EvalError(Exception):
    """A failure reported as one message and an exit status, never a traceback."""
    def __init__(self, msg, code=EXIT_SERVER):
        super().__init__(msg)
        self.code = code


# --------------------------------------------------------------------------- input

def read_lines(path):
    if not os.path.isfile(path):
        raise EvalError(f"no such file: {path}", EXIT_USAGE)
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", newline="\n") as f:
            return [line.rstrip("\r\n") for line in f]
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise EvalError(f"cannot read {path}: {e}", EXIT_USAGE)


def parse_direction(text, known=None):
    """'en-de' -> ('en', 'de'); `known` restricts the language codes."""
    m = re.fullmatch(r"([a-z]{2,3})-([a-z]{2,3})", text.strip())
    if not m:
        raise EvalError(f"unknown direction {text!r}: expected SRC-TGT such as en-de", EXIT_USAGE)
    src, tgt = m.groups()
    if known is not None:
        for lang in (src, tgt):
            if lang not in known:
                raise EvalError(f"unknown language {lang!r} in direction {text!r} "
                                f"(known: {', '.join(known)})", EXIT_USAGE)
    if src == tgt:
        raise EvalError(f"direction {text!r} translates a language into itself", EXIT_USAGE)
    return src, tgt


class Job:
    """One direction to evaluate: aligned source and reference lines."""
    def __init__(self, src_lang, tgt_lang, src, ref, hyp_name, explicit=True, test_set=None):
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.test_set = test_set
        self.direction = f"{src_lang}-{tgt_lang}"
        self.src, self.ref, self.hyp_name = src, ref, hyp_name
        self.explicit = explicit  # named by the user (an error) rather than from "all" (a skip)


def check_aligned(src, ref, src_path, ref_path):
    if len(src) != len(ref):
        raise EvalError(f"line counts differ: {src_path} has {len(src)} lines, "
                        f"{ref_path} has {len(ref)}", EXIT_USAGE)


# The test sets `--suite DIR` knows, DIR being the shared data folder (with
# data/multi30k and data/general): name -> [(direction, src path, ref path)] relative
# to DIR/data. The general sets are described in data/general/README.md. With `ui`
# (tools/ui_strings.py's folder), "ui" too: user-interface strings, en<->de/fr/cs.
def suite_sets(root, ui=None):
    m30k, gen = os.path.join(root, "multi30k"), os.path.join(root, "general", "test")
    sets = {}
    for split, langs in (("test_2016_flickr", LANGS), ("test_2017_flickr", ("en", "de", "fr"))):
        sets[f"multi30k/{split}"] = [(f"{s}-{t}", os.path.join(m30k, f"{split}.{s}.gz"),
                                      os.path.join(m30k, f"{split}.{t}.gz"))
                                     for s, t in itertools.permutations(langs, 2)]
    sets["flores101"] = [(f"{s}-{t}", os.path.join(gen, f"flores101.devtest.{s}"),
                          os.path.join(gen, f"flores101.devtest.{t}")) for s, t in itertools.permutations(LANGS, 2)]
    sets["tatoeba"] = [(f"{a}-{b}", os.path.join(gen, f"tatoeba.{p}.{a}"), os.path.join(gen, f"tatoeba.{p}.{b}"))
                       for p in ("en-de", "en-fr", "en-cs") for a, b in (p.split("-"), p.split("-")[::-1])]
    sets["newstest2014"] = [(f"{a}-{b}", os.path.join(gen, f"newstest2014.en-fr.{a}"),
                             os.path.join(gen, f"newstest2014.en-fr.{b}")) for a, b in (("en", "fr"), ("fr", "en"))]
    sets["newstest2020"] = [(f"{a}-{b}", os.path.join(gen, f"newstest2020.{a}-{b}.{a}"),
                             os.path.join(gen, f"newstest2020.{a}-{b}.{b}")) for a, b in (("en", "de"), ("de", "en"))]
    if ui:
        sets["ui"] = [(f"{a}-{b}", os.path.join(ui, "test", f"ui.{p}.{a}"), os.path.join(ui, "test", f"ui.{p}.{b}"))
                      for p in ("en-de", "en-fr", "en-cs") for a, b in (p.split("-"), p.split("-")[::-1])]
    return sets


def plan_suite(args):
    """Jobs for --suite: every direction of every set asked for whose files exist."""
    root = os.path.join(args.suite, "data")
    if not os.path.isdir(root):
        raise EvalError(f"no data folder at {root} (--suite takes the folder holding data/)", EXIT_USAGE)
    if args.ui and not os.path.isdir(os.path.join(args.ui, "test")):
        raise EvalError(f"no test folder at {args.ui}/test (--ui takes tools/ui_strings.py's --out folder)", EXIT_USAGE)
    sets = suite_sets(root, args.ui)
    names = list(sets) if args.sets == "all" else [n.strip() for n in args.sets.split(",") if n.strip()]
    unknown = [n for n in names if n not in sets]
    if unknown:
        raise EvalError(f"unknown test set(s) {', '.join(unknown)} (known: {', '.join(sets)})", EXIT_USAGE)
    wanted = None if args.directions.strip() == "all" else \
        {"-".join(parse_direction(d)) for d in args.directions.split(",") if d.strip()}
    jobs, skipped, cache = [], [], {}
    for name in names:
        for direction, sp, rp in sets[name]:
            if wanted is not None and direction not in wanted:
                continue
            missing = [p for p in (sp, rp) if not os.path.isfile(p)]
            if missing:
                skipped.append((f"{name} {direction}", f"no {', '.join(missing)}"))
                continue
            for p in (sp, rp):
                if p not in cache:
                    cache[p] = read_lines(p)
            check_aligned(cache[sp], cache[rp], sp, rp)
            s, t = direction.split("-")
            jobs.append(Job(s, t, cache[sp][:args.limit], cache[rp][:args.limit],
                            f"{name.replace('/', '.')}.{direction}.hyp", False, test_set=name))
    if not jobs:
        raise EvalError(f"nothing to evaluate under {root}", EXIT_USAGE)
    return jobs, skipped


def plan_jobs(args):
    """The jobs to run and the (direction, reason) pairs skipped."""
    limit = args.limit
    if args.suite:
        return plan_suite(args)
    if args.src or args.ref or args.direction:
        if not (args.src and args.ref and args.direction):
            raise EvalError("--src, --ref and --direction go together", EXIT_USAGE)
        s, t = parse_direction(args.direction)
        src, ref = read_lines(args.src), read_lines(args.ref)
        check_aligned(src, ref, args.src, args.ref)
        return [Job(s, t, src[:limit], ref[:limit], f"{s}-{t}.hyp")], []

    root, split = args.multi30k, args.split
    if not os.path.isdir(root):
        raise EvalError(f"no such directory: {root}", EXIT_USAGE)
    spec = args.directions.strip()
    if spec == "all":
        pairs = [(s, t) for s, t in itertools.permutations(LANGS, 2)]
        explicit = False
    else:
        pairs = [parse_direction(d, LANGS) for d in spec.split(",") if d.strip()]
        if not pairs:
            raise EvalError("--directions lists no direction", EXIT_USAGE)
        explicit = True
    jobs, skipped, cache = [], [], {}
    for s, t in pairs:
        paths = {lang: os.path.join(root, f"{split}.{lang}.gz") for lang in (s, t)}
        missing = [p for p in paths.values() if not os.path.isfile(p)]
        if missing:
            skipped.append((f"{s}-{t}", f"no {', '.join(missing)}"))
            continue
        for lang, p in paths.items():
            if lang not in cache:
                cache[lang] = read_lines(p)
        check_aligned(cache[s], cache[t], paths[s], paths[t])
        jobs.append(Job(s, t, cache[s][:limit], cache[t][:limit],
                        f"{split}.{s}-{t}.hyp", explicit))
    if not jobs:
        why = "; ".join(f"{d}: {r}" for d, r in skipped)
        raise EvalError(f"nothing to evaluate for split {split!r} in {root} ({why})", EXIT_USAGE)
    return jobs, skipped


# --------------------------------------------------------------------------- client

def retry_after_seconds(value):
    """Retry-After as seconds (delta-seconds or an HTTP date); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def error_text(body):
    """The `error` field of a JSON error body, or the start of the body."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    try:
        obj = json.loads(text)
        if isinstance(obj, dict) and "error" in obj:
            return str(obj["error"])
    except ValueError:
        pass
    text = " ".join(text.split())
    return text[:300] if text else "(empty body)"


class Client:
    """POSTs batches to {url}/translate with bounded retries of transient failures."""

    def __init__(self, url, api_key=None, timeout=120.0, retries=5, backoff=0.5):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.stop = threading.Event()   # set when another batch failed for good
        self.retry_count = 0
        self._lock = threading.Lock()
        host = urllib.parse.urlsplit(self.url).hostname or ""
        handlers = []
        if host in ("localhost", "127.0.0.1", "::1"):
            handlers.append(urllib.request.ProxyHandler({}))  # never proxy loopback
        self._opener = urllib.request.build_opener(*handlers)

    def _open(self, req):
        with self._opener.open(req, timeout=self.timeout) as resp:
            return resp.status, resp.read()

    def languages(self):
        """GET /languages: the server's [{"code", "targets"}], or None when it has no
        such list. Raises EvalError(EXIT_UNREACHABLE) when nothing answers."""
        req = urllib.request.Request(self.url + "/languages", headers={"Accept": "application/json"})
        try:
            _, body = self._open(req)
        except urllib.error.HTTPError:
            return None                  # it answered: reachable, just no list
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", e)
            raise EvalError(f"cannot reach the server at {self.url}: {reason}", EXIT_UNREACHABLE)
        try:
            data = json.loads(body)
            return {d["code"]: set(d["targets"]) for d in data}
        except (ValueError, TypeError, KeyError):
            return None

    def _wait(self, seconds):
        """Sleep, but wake up early when the run is being stopped."""
        return not self.stop.wait(min(max(seconds, 0.0), MAX_RETRY_WAIT))

    def translate(self, texts, source, target):
        """Translations of `texts` (a list), in order. Raises EvalError."""
        body = {"q": texts, "source": source, "target": target, "format": "text"}
        if self.api_key:
            body["api_key"] = self.api_key
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        what = f"{source}-{target}"
        for attempt in range(self.retries + 1):
            if self.stop.is_set():
                raise EvalError("stopped")
            last = attempt == self.retries
            req = urllib.request.Request(
                self.url + "/translate", data=data, method="POST",
                headers={"Content-Type": "application/json", "Accept": "application/json"})
            try:
                _, raw = self._open(req)
                return self._parse(raw, len(texts), what)
            except urllib.error.HTTPError as e:
                try:
                    detail = error_text(e.read())
                except (OSError, http.client.HTTPException):
                    detail = "(no body)"
                transient = e.code in (429, 503) or 500 <= e.code < 600
                if not transient or last:
                    tries = f" after {attempt + 1} attempts" if transient else ""
                    raise EvalError(f"server error {e.code} for {what}{tries}: {detail}")
                wait = retry_after_seconds(e.headers.get("Retry-After")) if e.headers else None
                if wait is None:
                    wait = self.backoff * 2 ** attempt
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                reason = getattr(e, "reason", None) or e or type(e).__name__
                if last:
                    raise EvalError(f"request for {what} failed after {attempt + 1} attempts: "
                                    f"{reason}", EXIT_SERVER)
                wait = self.backoff * 2 ** attempt
            with self._lock:
                self.retry_count += 1
            if not self._wait(wait):
                raise EvalError("stopped")
        raise EvalError(f"request for {what} failed")  # not reached

    @staticmethod
    def _parse(raw, n, what):
        try:
            obj = json.loads(raw)
        except ValueError:
            raise EvalError(f"server answered {what} with something that is not JSON: "
                            f"{error_text(raw)}")
        if not isinstance(obj, dict) or "translatedText" not in obj:
            detail = obj.get("error") if isinstance(obj, dict) else None
            raise EvalError(f"server answer for {what} has no translatedText"
                            + (f": {detail}" if detail else f": {str(obj)[:200]}"))
        out = obj["translatedText"]
        if isinstance(out, str) and n == 1:
            out = [out]
        if not isinstance(out, list) or len(out) != n or not all(isinstance(x, str) for x in out):
            got = len(out) if isinstance(out, list) else type(out).__name__
            raise EvalError(f"server answered {what} with {got} translations for {n} sentences")
        return out


# --------------------------------------------------------------------------- progress

class Progress:
    """sentences done/total, sentences/s and ETA on stderr; redrawn in place on a
    terminal, a line every few seconds otherwise."""

    def __init__(self, label, total, enabled=True, stream=sys.stderr):
        self.label, self.total, self.done = label, total, 0
        self.stream, self.enabled = stream, enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.start = self.last = time.monotonic()
        self.lock = threading.Lock()
        self._draw(force=True)

    def add(self, n):
        with self.lock:
            self.done += n
            self._draw()

    def _draw(self, force=False, end=False):
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and not end and now - self.last < (0.1 if self.tty else 5.0):
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        rate = self.done / elapsed
        left = self.total - self.done
        eta = f"{left / rate:5.0f}s" if rate > 0 and left > 0 else ("   0s" if left <= 0 else "    ?")
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        line = (f"{self.label:>6} [{bar}] {self.done}/{self.total} sentences "
                f"{rate:7.1f} sent/s  ETA {eta}")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if end else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self):
        with self.lock:
            self._draw(end=True)


# --------------------------------------------------------------------------- run

def translate_all(client, job, batch_size, concurrency, show_progress):
    """Hypotheses for job.src in order (empty lines stay empty, never sent)."""
    hyps = [""] * len(job.src)
    todo = [i for i, s in enumerate(job.src) if s.strip()]
    batches = [todo[i:i + batch_size] for i in range(0, len(todo), batch_size)]
    bar = Progress(job.direction, len(job.src), show_progress)
    bar.add(len(job.src) - len(todo))

    def work(idx):
        out = client.translate([job.src[i] for i in idx], job.src_lang, job.tgt_lang)
        for i, text in zip(idx, out):
            hyps[i] = " ".join(text.splitlines())   # one hypothesis a line
        bar.add(len(idx))

    client.stop.clear()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, concurrency))
    try:
        futures = [pool.submit(work, b) for b in batches]
        for fut in concurrent.futures.as_completed(futures):
            fut.result()                     # raises the first failure
    except BaseException:
        client.stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        if bar.enabled:
            sys.stderr.write("\n")
        raise
    pool.shutdown(wait=True)
    bar.finish()
    return hyps


def check_offered(langs, jobs, skipped):
    """Drop (or refuse) directions the server says it does not translate."""
    if not langs:
        return jobs
    kept = []
    for job in jobs:
        if job.src_lang in langs and job.tgt_lang in langs[job.src_lang]:
            kept.append(job)
        elif job.explicit:
            offered = ", ".join(sorted(langs)) or "none"
            raise EvalError(f"unknown direction {job.direction}: the server does not offer it "
                            f"(its source languages: {offered})", EXIT_USAGE)
        else:
            skipped.append((job.direction, "the server does not offer it"))
    if not kept:
        raise EvalError("the server offers none of the directions asked for", EXIT_USAGE)
    return kept


def evaluate(args, jobs, skipped, client, report):
    for d, why in skipped:
        print(f"evaluate.py: skipping {d}: {why}", file=sys.stderr)
    if args.hyp_dir:
        os.makedirs(args.hyp_dir, exist_ok=True)
    for job in jobs:
        retries_before = client.retry_count
        t0 = time.monotonic()
        hyps = translate_all(client, job, args.batch_size, args.concurrency, not args.quiet)
        seconds = time.monotonic() - t0
        b = bleu.corpus_bleu(hyps, job.ref)
        c = bleu.corpus_chrf(hyps, job.ref)
        row = {
            "set": job.test_set or report.get("split") or "files",
            "direction": job.direction, "source": job.src_lang, "target": job.tgt_lang,
            "sentences": len(hyps), "bleu": b["score"], "chrf": c["score"],
            "bleu_counts": b["counts"], "bleu_totals": b["totals"], "bleu_bp": b["bp"],
            "sys_len": b["sys_len"], "ref_len": b["ref_len"],
            "seconds": seconds, "sentences_per_second": len(hyps) / seconds if seconds > 0 else 0.0,
            "retries": client.retry_count - retries_before,
        }
        if args.hyp_dir:
            path = os.path.join(args.hyp_dir, job.hyp_name)
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.writelines(h + "\n" for h in hyps)
            row["hyp_file"] = path
        report["directions"].append(row)


def print_table(report, out=sys.stdout):
    rows = report["directions"]
    if not rows:
        return
    sets = list(dict.fromkeys(r["set"] for r in rows))
    if len(sets) > 1:   # one table a test set, then the per-set means
        for name in sets:
            out.write(f"== {name}\n")
            print_table(dict(report, directions=[r for r in rows if r["set"] == name], skipped=[]), out)
        out.write(f"{'set':<28} {'BLEU':>6} {'chrF':>6} {'directions':>10}\n")
        for name in sets:
            rs = [r for r in rows if r["set"] == name]
            out.write(f"{name:<28} {sum(r['bleu'] for r in rs) / len(rs):6.2f} "
                      f"{sum(r['chrf'] for r in rs) / len(rs):6.2f} {len(rs):10d}\n")
        for d in report["skipped"]:
            out.write(f"{d['direction']:<10} skipped: {d['reason']}\n")
        return
    out.write(f"{'direction':<10} {'BLEU':>6} {'chrF':>6} {'sentences':>9} {'seconds':>8} {'sent/s':>8}\n")
    for r in rows:
        out.write(f"{r['direction']:<10} {r['bleu']:6.2f} {r['chrf']:6.2f} {r['sentences']:9d} "
                  f"{r['seconds']:8.1f} {r['sentences_per_second']:8.1f}\n")
    if len(rows) > 1:
        n = sum(r["sentences"] for r in rows)
        secs = sum(r["seconds"] for r in rows)
        out.write(f"{'mean':<10} {sum(r['bleu'] for r in rows) / len(rows):6.2f} "
                  f"{sum(r['chrf'] for r in rows) / len(rows):6.2f} {n:9d} {secs:8.1f} "
                  f"{n / secs if secs > 0 else 0.0:8.1f}\n")
    for d in report["skipped"]:
        out.write(f"{d['direction']:<10} skipped: {d['reason']}\n")
    out.write(f"BLEU|{report['bleu_signature']}\nchrF2|{report['chrf_signature']}\n")
    out.flush()


def write_report(path, report):
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def positive(text):
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Translate with a LibreTranslate-compatible server and score BLEU/chrF2 "
                    "(sacreBLEU-identical).")
    g = ap.add_argument_group("one direction from files")
    g.add_argument("--src", help="source file (.gz allowed), one sentence a line")
    g.add_argument("--ref", help="reference file, line-aligned with --src")
    g.add_argument("--direction", help="SRC-TGT language codes, e.g. en-de")
    g = ap.add_argument_group("Multi30k")
    g.add_argument("--multi30k", metavar="DIR", help="folder with {split}.{lang}.gz files")
    g.add_argument("--split", default="test_2016_flickr", help="default: %(default)s")
    g.add_argument("--directions", default="all",
                   help="comma-separated SRC-TGT list over en,de,fr,cs, or 'all' (default)")
    g = ap.add_argument_group("every test set (Multi30k and general-domain)")
    g.add_argument("--suite", metavar="DIR", help="the shared folder holding data/multi30k and data/general")
    g.add_argument("--sets", default="all",
                   help="comma-separated: multi30k/test_2016_flickr, multi30k/test_2017_flickr, flores101, "
                        "tatoeba, newstest2014, newstest2020, ui (with --ui), or 'all' (default); --directions filters")
    g.add_argument("--ui", metavar="DIR",
                   help="with --suite: also the user-interface strings' test set, DIR/test/ui.en-de.en ... "
                        "(tools/ui_strings.py --out DIR)")
    g = ap.add_argument_group("server and run")
    g.add_argument("--url", default="http://127.0.0.1:5000", help="default: %(default)s")
    g.add_argument("--api-key", help="sent as api_key in each request")
    g.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default 120)")
    g.add_argument("--retries", type=int, default=5,
                   help="retries of a transient failure per request (default 5)")
    g.add_argument("--concurrency", type=positive, default=4, help="requests in flight (default 4)")
    g.add_argument("--batch-size", type=positive, default=16, help="sentences a request (default 16)")
    g.add_argument("--limit", type=positive, help="only the first N lines")
    g.add_argument("--hyp-dir", help="write the hypotheses here, one file a direction")
    g.add_argument("--json", metavar="FILE", help="write a JSON report here")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if (bool(args.multi30k) + bool(args.suite) + bool(args.src or args.ref or args.direction)) != 1:
        ap.error("give one of --src/--ref/--direction, --multi30k or --suite")
    if args.ui and not args.suite:
        ap.error("--ui goes with --suite")
    if args.retries < 0:
        ap.error("--retries must be 0 or more")
    return args


def main(argv=None):
    args = parse_args(argv)
    report = {
        "tool": "deepmt scripts/evaluate.py", "url": args.url,
        "mode": "suite" if args.suite else "multi30k" if args.multi30k else "files",
        "split": args.split if args.multi30k else None,
        "ui": os.path.abspath(args.ui) if args.ui else None,
        "batch_size": args.batch_size, "concurrency": args.concurrency, "limit": args.limit,
        "bleu_signature": bleu.bleu_signature(1), "chrf_signature": bleu.chrf_signature(1),
        "directions": [], "skipped": [], "error": None,
    }
    code = 0
    try:
        if urllib.parse.urlsplit(args.url).scheme not in ("http", "https"):
            raise EvalError(f"--url must start with http:// or https://, got {args.url!r}", EXIT_USAGE)
        jobs, skipped = plan_jobs(args)
        client = Client(args.url, args.api_key, args.timeout, args.retries)
        jobs = check_offered(client.languages(), jobs, skipped)
        report["skipped"] = [{"direction": d, "reason": r} for d, r in skipped]
        evaluate(args, jobs, skipped, client, report)
        rows = report["directions"]
        if len(rows) > 1:
            report["mean"] = {"bleu": sum(r["bleu"] for r in rows) / len(rows),
                              "chrf": sum(r["chrf"] for r in rows) / len(rows)}
    except EvalError as e:
        print(f"evaluate.py: error: {e}", file=sys.stderr)
        report["error"], code = str(e), e.code
    except KeyboardInterrupt:
        print("evaluate.py: interrupted", file=sys.stderr)
        report["error"], code = "interrupted", 130
    print_table(report)
    if args.json and (report["directions"] or code == 0):
        try:
            write_report(args.json, report)
        except OSError as e:
            print(f"evaluate.py: error: cannot write {args.json}: {e}", file=sys.stderr)
            code = code or EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())
