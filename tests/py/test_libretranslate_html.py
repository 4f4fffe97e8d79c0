#!/usr/bin/python3
"""format "html" on POST /translate (TAP): the markup comes back as it was sent
(the same tags and attributes: block tags in the same order, inline tags such as
<b> and <a> moved with the words they enclose, well nested; entities and
untranslatable parts byte for byte), the text is translated, and malformed input
gets a valid answer or a clear error, never a crash. Also through the npm
`libretranslate` client (installed into build/node; skipped when npm is
unreachable). Tiny random model: translations are noise, structure is what is
checked.
"""

import html.parser
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tap  # noqa: E402
import test_server as ts  # noqa: E402
from nodetools import node_modules  # noqa: E402
from testutil import repo_path  # noqa: E402


class Shape(html.parser.HTMLParser):
    """Tags with attributes, in order, and the text under each path."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.texts, self.path = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(("start", tag, tuple(attrs)))
        if tag not in ("br", "img", "hr", "meta", "link", "input"):
            self.path.append(tag)

    def handle_endtag(self, tag):
        self.tags.append(("end", tag))
        if tag in self.path:
            while self.path.pop() != tag:
                pass

    def handle_data(self, data):
        if data.strip():
            self.texts.append(("/".join(self.path), data))


def shape(s):
    p = Shape()
    p.feed(s)
    p.close()
    return p


INLINE = {"a", "abbr", "b", "bdi", "bdo", "big", "cite", "del", "dfn", "em", "font", "i", "ins", "label", "mark", "q",
          "s", "small", "span", "strike", "strong", "sub", "sup", "time", "tt", "u"}


def blocks(tags):
    return [t for t in tags if t[1] not in INLINE]


def well_nested(tags):
    """Every end tag closes the innermost open element (void elements aside)."""
    stack = []
    for t in tags:
        if t[1] in ("br", "img", "hr", "meta", "link", "input"):
            continue
        if t[0] == "start":
            stack.append(t[1])
        elif not stack or stack.pop() != t[1]:
            return False
    return not stack


def tr(p, q, **extra):
    return ts.translate(p, q, source="en", target="de", format="html", **extra)


DOC = ('<div class="intro"><h1 id="t">Two dogs play</h1>\n<p>A man is <b>riding</b> a bike &amp; '
       '<a href="/x?a=1&amp;b=2" title="keep">a woman</a> walks.</p>\n'
       '<pre>  code   stays </pre><code>x = 1</code><p translate="no">Do not translate me</p>'
       '<script>var s = "A man";</script><style>p { color: red }</style>'
       '<p class="big notranslate">Brand Name</p><!-- a comment --><ul><li>One cat</li><li>Two cats</li></ul></div>')


def test_structure(p):
    st, h, j = tr(p, DOC)
    out = j.get("translatedText", "") if isinstance(j, dict) else ""
    tap.ok(st == 200 and isinstance(out, str), "format html: 200 with a string", f"{st} {j}")
    a, b = shape(DOC), shape(out)
    tap.ok(blocks(a.tags) == blocks(b.tags), "same block tags and attributes in the same order",
           f"{a.tags}\n{b.tags}")
    tap.ok(sorted(map(str, a.tags)) == sorted(map(str, b.tags)) and well_nested(b.tags),
           "the same inline tags, with their attributes, well nested", f"{a.tags}\n{b.tags}")
    for keep in ("<pre>  code   stays </pre>", "<code>x = 1</code>", '<p translate="no">Do not translate me</p>',
                 '<script>var s = "A man";</script>', "<style>p { color: red }</style>",
                 '<p class="big notranslate">Brand Name</p>', "<!-- a comment -->", 'href="/x?a=1&amp;b=2"'):
        tap.ok(keep in out, f"kept byte for byte: {keep[:40]}", out)
    translated = [t for path, t in a.texts if not any(x in path for x in ("pre", "code", "script", "style"))
                  and t not in ("Do not translate me", "Brand Name")]
    changed = [t for t in translated if t.strip() not in out]
    tap.ok(len(changed) == len(translated), "every other text run is translated", f"{translated} -> {out}")
    tap.ok(out.count("<li>") == 2 and out.count("</p>") == DOC.count("</p>"), "same number of paragraphs and items",
           out)
    st, h, j = ts.translate(p, "<p>Hallo</p>", source="de", target="de", format="html")
    tap.ok(st == 200 and j.get("translatedText") == "<p>Hallo</p>", "source == target: the HTML comes back as sent",
           f"{j}")
    st, h, j = ts.translate(p, ["<p>Zwei Hunde spielen im Schnee.</p>", "plain text, no tags"], source="auto",
                            target="en", format="html")
    d = j.get("detectedLanguage") if isinstance(j, dict) else None
    tap.ok(st == 200 and len(j.get("translatedText", [])) == 2 and isinstance(d, list) and d[0]["language"] == "de",
           "array q with auto: one document and one detectedLanguage each (from the text, not the tags)", f"{j}")
    page = ('<p>Download the <code>deepmt &lt;x&gt;</code> binary and press <kbd>Enter</kbd>, then '
            '<a href="/d"><var>n</var> dogs</a> run.</p>')
    st, h, j = tr(p, page)
    out = j.get("translatedText", "") if isinstance(j, dict) else ""
    tap.ok(st == 200 and all(out.count(x) == 1 for x in ("<code>deepmt &lt;x&gt;</code>", "<kbd>Enter</kbd>",
                                                           "<var>n</var>"))
           and "Download" not in out and "dogs" not in out and well_nested(shape(out).tags)
           and sorted(map(str, shape(out).tags)) == sorted(map(str, shape(page).tags)),
           "code, kbd and var in a sentence: kept byte for byte, once, the sentence around them translated", out)
    st, h, j = tr(p, "<p>A &lt;tag&gt; and &quot;quotes&quot;</p>")
    out = j.get("translatedText", "")
    tap.ok(st == 200 and shape(out).tags == shape("<p>x</p>").tags, "translations are escaped: no tag appears", out)


def test_garbage(p):
    rnd = random.Random(7)
    cases = {
        "unclosed tags": "<p>A man <b>rides <i>a bike",
        "stray end tags": "</div></p>Two dogs</span>",
        "a lone <": "<",
        "attributes without end": '<a href="x',
        "nested 5000 deep": "<div>" * 5000 + "A dog" + "</div>" * 5000,
        "random markup": "".join(rnd.choice(["<p>", "</p>", "<b>", "dog ", "&amp;", "&bogus;", "<!--", "-->", "<",
                                             ">", "\"", "cat. "]) for _ in range(3000)),
        "random code points": "".join(chr(rnd.randrange(1, 0xD7FF)) for _ in range(2000)),
        "empty": "",
    }
    for name, q in cases.items():
        st, h, j = tr(p, q)
        good = st == 200 and isinstance(j.get("translatedText"), str) if isinstance(j, dict) else False
        clear = st in (400, 413) and isinstance(j, dict) and j.get("error")
        tap.ok(good or clear, f"malformed HTML ({name}): a valid answer or a clear 4xx", f"{st} {str(j)[:300]}")
    st, h, j = tr(p, "<p>a</p> " * 2000)
    tap.ok(st == 400 and "too many" in ts.error_of(j), "more text runs than --max-sentences: 400", f"{st} {j}")
    q = "<p>" + "<b>a</b> " * 2000 + "</p>"  # inline: runs of at most 256 elements each
    st, h, j = tr(p, q)
    out = j.get("translatedText", "") if isinstance(j, dict) else ""
    tap.ok(st == 200 and out.count("<b>") == 2000 and out.count("</b>") == 2000 and well_nested(shape(out).tags),
           "2,000 inline elements in one paragraph: all 2,000 back, well nested", f"{st} {str(j)[:300]}")
    st, h, j = tr(p, "<p>x</p>", alternatives=2)
    tap.ok(st == 200 and j.get("alternatives") == [] and "translatedText" in j,
           "alternatives with html: \"alternatives\": [] (as LibreTranslate; its page always asks for 3)", f"{st} {j}")
    st, h, j = tr(p, ["<p>x</p>", "<p>y</p>"], alternatives=2)
    tap.ok(st == 200 and j.get("alternatives") == [[], []], "... an empty list per text for an array q", f"{st} {j}")
    st, h, j = ts.translate(p, "<p>x</p>", format="xml")
    tap.ok(st == 400 and "format" in ts.error_of(j), "an unknown format: 400", f"{st} {j}")
    st, h, j = ts.jreq(p, "GET", "/health")
    tap.ok(st == 200, "the server is still up after the garbage", f"{st}")


def test_npm_client(p):
    mods, why = node_modules()
    if not mods:
        tap.skip(f"npm libretranslate client: {why}")
        return
    env = {**os.environ, "NODE_PATH": mods}
    r = subprocess.run(["node", repo_path("tests/js/lt_client.js"), f"http://127.0.0.1:{p}", "en", "de", "html",
                        "<p>A <i>small</i> dog.</p>"], capture_output=True, timeout=120, env=env)
    try:
        out = json.loads(r.stdout).get("result")
    except ValueError:
        out = None
    tap.ok(r.returncode == 0 and isinstance(out, str) and shape(out).tags == shape("<p>A <i>x</i></p>").tags,
           "npm libretranslate client, format html: markup kept", (r.stdout + r.stderr).decode(errors="replace"))


def test_npm_client_with_keys():
    """The npm client sends its key as apiKey: against a key-requiring server it
    translates with the key and gets no translation without one."""
    mods, why = node_modules()
    if not mods:
        tap.skip(f"npm libretranslate client: {why}")
        return
    srv = ts.Server(env={"DEEPMT_API_KEYS": "npm-key"})
    env = {**os.environ, "NODE_PATH": mods}
    outs = []
    for key in ("npm-key", ""):
        r = subprocess.run(["node", repo_path("tests/js/lt_client.js"), f"http://127.0.0.1:{srv.port}", "en", "de", "text",
                            "A small dog.", key], capture_output=True, timeout=120, env=env)
        try:
            outs.append(json.loads(r.stdout).get("result"))
        except ValueError:
            outs.append(r.stdout)
    srv.stop()
    tap.ok(isinstance(outs[0], str) and outs[0] and outs[1] is None,
           "npm libretranslate client against a key-requiring server: translates with its apiKey, not without",
           str(outs))


def main():
    return ts.run_suite([test_structure, test_garbage, test_npm_client], after=[test_npm_client_with_keys])


if __name__ == "__main__":
    sys.exit(main())
