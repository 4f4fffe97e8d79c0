#!/usr/bin/python3
"""POST /translate_file and GET /download_file (TAP): .txt, .html, .srt, .docx
and .odt round trips keep their structure (same archive entries in the same
order, same XML elements, same paragraphs, same subtitle numbers and timings)
with the text translated, a paragraph split over formatting runs translated
whole; malformed files, zip bombs, unsupported types and limits are refused
with a clear error; results expire from a private temporary folder that is
removed at shutdown (or, after a kill, by the next server to start). Tiny random model: translations are noise, structure is
what is checked.
"""

import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import tempfile
import urllib.parse
import uuid
import zipfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tap  # noqa: E402
import test_server as ts  # noqa: E402

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"


def multipart(fields, filename, data):
    b = uuid.uuid4().hex
    out = io.BytesIO()
    for k, v in fields.items():
        out.write(f"--{b}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n".encode())
    if filename is not None:
        out.write(f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
                  "Content-Type: application/octet-stream\r\n\r\n".encode())
        out.write(data)
        out.write(b"\r\n")
    out.write(f"--{b}--\r\n".encode())
    return out.getvalue(), {"Content-Type": f"multipart/form-data; boundary={b}"}


def upload(p, filename, data, **fields):
    fields = {"source": "en", "target": "de", **fields}
    body, headers = multipart(fields, filename, data)
    st, h, raw = ts.request(p, "POST", "/translate_file", body, headers)
    try:
        j = json.loads(raw)
    except ValueError:
        j = None
    return st, j


def roundtrip(p, filename, data, **fields):
    """-> (status, answer, translated bytes or None)."""
    st, j = upload(p, filename, data, **fields)
    if st != 200 or not isinstance(j, dict) or "translatedFileUrl" not in j:
        return st, j, None
    u = urllib.parse.urlparse(j["translatedFileUrl"])
    st2, h, got = ts.request(p, "GET", u.path)
    return st2, j, got if st2 == 200 else None


def docx_bytes(doc_xml, extra=None):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/'
                   'package/2006/content-types"/>')
        z.writestr("word/document.xml", doc_xml)
        z.writestr("word/styles.xml", "<styles/>")
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return out.getvalue()


DOCX_XML = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{W}"><w:body>'
            '<w:p><w:pPr><w:pStyle w:val="Title"/></w:pPr><w:r><w:t>Two dogs play</w:t></w:r></w:p>'
            '<w:p><w:r><w:t xml:space="preserve">A man is </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>riding</w:t>'
            '</w:r><w:r><w:t xml:space="preserve"> a red bike.</w:t></w:r></w:p>'
            '<w:p><w:r><w:t>12 345</w:t></w:r></w:p>'
            '<w:tbl><w:tr><w:tc><w:p><w:r><w:t>A cat &amp; a dog.</w:t></w:r></w:p></w:tc></w:tr></w:tbl>'
            '<w:p/><w:sectPr/></w:body></w:document>')


def odt_bytes(content, mimetype="application/vnd.oasis.opendocument.text"):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), mimetype, compress_type=zipfile.ZIP_STORED)
        z.writestr("content.xml", content)
        z.writestr("styles.xml", "<office:document-styles xmlns:office=\"urn:oasis:names:tc:opendocument:xmlns:"
                   "office:1.0\"/>")
        z.writestr("META-INF/manifest.xml", "<manifest/>")
    return out.getvalue()


ODT_XML = ('<?xml version="1.0" encoding="UTF-8"?><office:document-content xmlns:office="urn:oasis:names:tc:'
           f'opendocument:xmlns:office:1.0" xmlns:text="{TEXT}"><office:body><office:text>'
           '<text:h text:outline-level="1">Children play outside</text:h>'
           '<text:p>A woman <text:span text:style-name="T1">reads</text:span> a<text:s/>book.</text:p>'
           '<text:p>The sun is shining<text:note><text:note-body><text:p>A small note.</text:p></text:note-body>'
           '</text:note> today.</text:p><text:p/></office:text></office:body></office:document-content>')


def tags(xml_bytes):
    return [el.tag for el in ET.fromstring(xml_bytes).iter()]


def paragraphs(xml_bytes, ns, names):
    root = ET.fromstring(xml_bytes)
    return [el for el in root.iter() if el.tag in {f"{{{ns}}}{n}" for n in names}]


HEADER_XML = (f'<?xml version="1.0"?><w:hdr xmlns:w="{W}"><w:p><w:r><w:t>Annual report</w:t></w:r></w:p></w:hdr>')
NOTES_XML = (f'<?xml version="1.0"?><w:footnotes xmlns:w="{W}"><w:footnote w:id="1"><w:p><w:r><w:t>A small note.'
             '</w:t></w:r></w:p></w:footnote></w:footnotes>')


def test_docx(p):
    src = docx_bytes(DOCX_XML, {"word/header1.xml": HEADER_XML, "word/footnotes.xml": NOTES_XML,
                                "word/settings.xml": "<w:settings>Do not touch</w:settings>"})
    st, j, got = roundtrip(p, "report.docx", src)
    tap.ok(st == 200 and got and j["translatedFileUrl"].endswith("/report.docx"),
           ".docx: translatedFileUrl, then GET returns the file", f"{st} {j}")
    if not got:
        return
    zin, zout = zipfile.ZipFile(io.BytesIO(src)), zipfile.ZipFile(io.BytesIO(got))
    tap.ok(zout.testzip() is None and zin.namelist() == zout.namelist(), ".docx: a valid zip, same entries in order",
           f"{zout.namelist()}")
    tap.ok(zin.read("word/styles.xml") == zout.read("word/styles.xml")
           and zin.read("word/settings.xml") == zout.read("word/settings.xml"), ".docx: other parts untouched", "")
    for part, text in (("word/header1.xml", "Annual report"), ("word/footnotes.xml", "A small note.")):
        a, b = zin.read(part), zout.read(part)
        got = [t.text for t in ET.fromstring(b).iter(f"{{{W}}}t")]
        tap.ok(tags(a) == tags(b) and len(got) == 1 and got[0] and got[0] != text,
               f".docx: {part} translated too, same elements", f"{got}")
    a, b = zin.read("word/document.xml"), zout.read("word/document.xml")
    tap.ok(tags(a) == tags(b), ".docx: the same XML elements in the same order (runs, tables, properties)",
           f"{b[:600]!r}")
    pa, pb = paragraphs(a, W, ["p"]), paragraphs(b, W, ["p"])
    runs = [[t.text or "" for t in q.iter(f"{{{W}}}t")] for q in pb]
    tap.ok(len(pa) == len(pb) == 5, ".docx: same number of paragraphs", f"{len(pa)} {len(pb)}")
    whole = "".join(runs[1])
    tap.ok(runs[1][0] and whole.strip() and "riding" not in whole and len(runs[1]) == 3,
           ".docx: a paragraph split over three runs is translated whole, its words spread over the runs in order "
           "by the alignment (tests/py/test_markup_fixture.py measures where bold lands)", f"{runs[1]}")
    tap.ok(runs[0][0] != "Two dogs play" and runs[3][0] != "A cat & a dog." and runs[2] == ["12 345"],
           ".docx: text paragraphs translated, one without letters kept", f"{runs}")


def test_odt(p):
    src = odt_bytes(ODT_XML)
    st, j, got = roundtrip(p, "notes.odt", src)
    tap.ok(st == 200 and got is not None, ".odt: translated and downloadable", f"{st} {j}")
    if not got:
        return
    zin, zout = zipfile.ZipFile(io.BytesIO(src)), zipfile.ZipFile(io.BytesIO(got))
    first = zout.infolist()[0]
    tap.ok(zin.namelist() == zout.namelist() and first.filename == "mimetype"
           and first.compress_type == zipfile.ZIP_STORED, ".odt: same entries, mimetype first and stored",
           f"{zout.namelist()} {first.compress_type}")
    a, b = zin.read("content.xml"), zout.read("content.xml")
    tap.ok(tags(a) == tags(b), ".odt: the same XML elements in the same order (spans, spaces, notes)",
           f"{b[:600]!r}")
    pa, pb = paragraphs(a, TEXT, ["p", "h"]), paragraphs(b, TEXT, ["p", "h"])
    ta = ["".join(q.itertext()) for q in pa]
    tb = ["".join(q.itertext()) for q in pb]
    tap.ok(len(pa) == len(pb) == 5 and all(x != y for x, y in zip(ta[:4], tb[:4]) if x),
           ".odt: same paragraphs and headings, each translated (the note's paragraph on its own)", f"{ta}\n{tb}")


def test_text_formats(p):
    txt = "A man rides a bike.\nTwo dogs play in the snow.\n\nThe end.\n"
    st, j, got = roundtrip(p, "a.txt", txt.encode())
    tap.ok(st == 200 and got and got.decode().count("\n") == txt.count("\n") and got.decode() != txt,
           ".txt: translated, same lines", f"{st} {j} {got!r}")
    srt = ("1\r\n00:00:01,000 --> 00:00:02,500\r\nA man is riding\r\na red bike.\r\n\r\n"
           "2\r\n00:00:03,000 --> 00:00:04,000\r\nTwo dogs.\r\n\r\n3\r\n00:00:05,000 --> 00:00:06,000\r\n\r\n")
    st, j, got = roundtrip(p, "movie.srt", srt.encode())
    out = got.decode() if got else ""
    times = re.findall(r"\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d", out)
    blocks = [b for b in out.replace("\r\n", "\n").split("\n\n") if b.strip()]
    tap.ok(st == 200 and times == re.findall(r"\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d", srt)
           and [b.split("\n")[0] for b in blocks] == ["1", "2", "3"] and "riding" not in out and "\r\n" in out,
           ".srt: numbers and timings kept, text translated, CRLF kept", f"{st} {j} {out!r}")
    # subtitle markup: cut out of what the model sees, back around the words, in order
    srt = ("1\n00:00:01,000 --> 00:00:02,500\n<i>A man is riding</i>\n<i>a red bike.</i>\n\n"
           "2\n00:00:03,000 --> 00:00:04,000\n{\\an8}Two <b>dogs</b> play in the <font color=\"red\">snow</font>.\n\n")
    st, j, got = roundtrip(p, "styled.srt", srt.encode())
    out = got.decode() if got else ""
    lines = [b.split("\n")[2] for b in out.split("\n\n") if b.strip()]
    marks = re.compile(r"<[^<>]*>|\{\\[^{}]*\}")
    want = [marks.findall("<i>A man is riding</i> <i>a red bike.</i>"),
            marks.findall("{\\an8}Two <b>dogs</b> play in the <font color=\"red\">snow</font>.")]
    tap.ok(st == 200 and len(lines) == 2 and [marks.findall(x) for x in lines] == want
           and lines[0].startswith("<i>") and lines[0].endswith("</i>") and lines[1].startswith("{\\an8}")
           and all(w not in out for w in ("riding", "bike", "dogs", "snow")),
           ".srt: <i>, <b>, <font> and {\\an8} kept, in order, around translated text", f"{st} {j} {out!r}")
    html = "<html><body><h1>Two dogs</h1><p>A <b>red</b> car.</p><pre>keep</pre></body></html>"
    st, j, got = roundtrip(p, "page.html", html.encode())
    out = got.decode() if got else ""
    tap.ok(st == 200 and re.sub(r">[^<]*<", "><", out) == re.sub(r">[^<]*<", "><", html) and "<pre>keep</pre>" in out
           and "Two dogs" not in out, ".html: markup kept, text translated", f"{st} {j} {out!r}")


def zip_with(name, data, level=zipfile.ZIP_DEFLATED):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", level) as z:
        z.writestr(name, data)
    return out.getvalue()


def test_refusals(p):
    bomb = zip_with("word/document.xml", b"<" + b" " * (6 << 20))  # 6 MB of spaces, ~6 KB packed
    big = zip_with("word/document.xml", b"<" + b" " * (60 << 20))
    cases = [
        ("a zip bomb (1,000:1)", "bomb.docx", bomb, 413, "zip bomb"),
        ("an XML part over 8 MiB", "big.docx", big, 413, "limit"),
        ("not a zip", "fake.docx", b"hello, I am not a zip", 400, "not a valid zip"),
        ("a truncated zip", "cut.docx", docx_bytes(DOCX_XML)[:300], 400, "zip"),
        ("a docx without word/document.xml", "empty.docx", zip_with("x.txt", b"x"), 400, "word/document.xml"),
        ("XML that does not parse", "bad.docx", docx_bytes("<w:document><w:body>"), 400, "well-formed"),
        ("XML nested 1,000 deep", "deep.docx", docx_bytes(f'<w:document xmlns:w="{W}">' + "<w:p>" * 1000 + "x"
                                                           + "</w:p>" * 1000 + "</w:document>"), 400, "XML"),
        ("an .odt with another mimetype", "s.odt", odt_bytes(ODT_XML, "application/vnd.oasis.opendocument.spreadsheet"),
         400, "mimetype"),
        ("binary as .txt", "bin.txt", bytes(range(256)), 400, "UTF-8"),
        ("an .srt without timings", "x.srt", b"hello\nworld\n", 400, "timing"),
        ("an unsupported type", "a.pdf", b"%PDF-1.4", 400, "not supported"),
        ("an empty file", "e.txt", b"", 400, "empty"),
        ("too many characters", "long.txt", b"word " * 5000, 400, "limit"),
    ]
    for what, name, data, want, needle in cases:
        st, j = upload(p, name, data)
        tap.ok(st == want and needle in ts.error_of(j), f"refused: {what} -> {want}", f"{st} {j}")
    st, j = upload(p, None, b"")
    tap.ok(st == 400 and "missing file" in ts.error_of(j), "no file field -> 400", f"{st} {j}")
    st, j = upload(p, "a.txt", b"Hello.", target="xx")
    tap.ok(st == 400 and "target language" in ts.error_of(j), "an unknown target -> 400 as /translate", f"{st} {j}")
    st, h, raw = ts.request(p, "POST", "/translate_file", "q=x", {"Content-Type": "application/x-www-form-urlencoded"})
    tap.ok(st == 400 and b"multipart" in raw, "not multipart -> 400", f"{st} {raw!r}")
    st, h, j = ts.jreq(p, "GET", "/download_file/0123456789abcdef0123456789abcdef/a.txt")
    tap.ok(st == 404 and "no such file" in ts.error_of(j), "an unknown result -> 404", f"{st} {j}")
    st, h, j = ts.jreq(p, "GET", "/download_file/../../etc/passwd")
    tap.ok(st == 404, "a path in the URL -> 404", f"{st} {j}")
    st, h, j = ts.jreq(p, "GET", "/health")
    tap.ok(st == 200, "the server is still up", f"{st}")


def leaky_docx():
    """A small .docx whose main part is read (one ~1 MB text run) and whose header part
    is then refused: the path that once leaked the main part's text (1 MiB a request)."""
    doc = (f'<?xml version="1.0"?><w:document xmlns:w="{W}"><w:body><w:p><w:r><w:t>'
           + "a" * 1000000 + "</w:t></w:r></w:p></w:body></w:document>")
    return docx_bytes(doc, {"word/header1.xml": "<w:hdr/>" + " " * (2 << 20)})


def expanding_docx(parts=8):
    """~14 KB that expand to ~8 MB of XML elements: 8 parts of just under 1 MiB each
    (under the per-part ratio rule, which starts at 1 MiB)."""
    body = "<w:a/>" * ((1 << 20) // 6 - 40)
    xml = f'<w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>'
    extra = {f"word/header{i}.xml": f'<w:hdr xmlns:w="{W}">{body}</w:hdr>' for i in range(1, parts)}
    return docx_bytes(xml, extra)


def test_security_headers(p):
    st, h, raw = ts.request(p, "GET", "/health")
    tap.ok(h.get("x-content-type-options") == "nosniff", "every answer carries X-Content-Type-Options: nosniff", str(h))
    st, h, raw = ts.request(p, "GET", "/", headers={"Accept": "text/html"})
    csp = h.get("content-security-policy", "")
    tap.ok(st == 200 and "frame-ancestors 'none'" in csp and h.get("x-frame-options") == "DENY",
           "the page may not be framed by another site (CSP frame-ancestors, X-Frame-Options)", f"{st} {h}")
    page = b"<html><body><p>Hello there.</p><script>alert(document.cookie)</script></body></html>"
    st, j = upload(p, "page.html", page)
    st2, h, got = ts.request(p, "GET", urllib.parse.urlparse(j["translatedFileUrl"]).path) if st == 200 else (st, {}, b"")
    csp = h.get("content-security-policy", "")
    tap.ok(st2 == 200 and csp.startswith("sandbox") and h.get("x-content-type-options") == "nosniff",
           "a translated page is downloaded sandboxed (CSP sandbox: no scripts, no access to this origin) and nosniff",
           f"{st} {st2} {h}")


def test_document_budget(p):
    data = expanding_docx()
    st, j = upload(p, "expand.docx", data)
    tap.ok(st == 413 and "the document's XML unpacks to more than" in ts.error_of(j),
           f"a {len(data) // 1024} KB .docx of 8 parts expanding to ~8 MB of XML is refused as a whole -> 413",
           f"{st} {j}")
    data = leaky_docx()
    st, j = upload(p, "leak.docx", data)
    tap.ok(st == 413 and "refused" in ts.error_of(j), "a main part followed by a refused header part -> 413",
           f"{st} {j}")
    st, j, got = roundtrip(p, "ok.docx", docx_bytes(DOCX_XML, {"word/header1.xml": HEADER_XML}))
    tap.ok(st == 200 and got, "an ordinary .docx with a header still translates", f"{st} {j}")


def test_refused_documents_free_their_memory():
    """Refused documents leave nothing behind: 150 uploads of leaky_docx (each once
    leaked 1 MiB) grow the server by less than 40 MB (under ASan, LSan checks the
    same at exit)."""
    srv = ts.Server()
    p = srv.port
    data = leaky_docx()
    for _ in range(10):  # allocator warm-up
        upload(p, "leak.docx", data)
    before = srv.rss_kb()
    statuses = set()
    for _ in range(150):
        statuses.add(upload(p, "leak.docx", data)[0])
    grown = (srv.rss_kb() - before) / 1024
    if "asan" in ts.BIN or "tsan" in ts.BIN:  # the sanitizers keep freed memory (quarantine): RSS says nothing;
        tap.ok(statuses == {413}, "150 refused documents: 413 (leaks: LSan at exit, below)", f"{statuses}")
    else:
        tap.ok(statuses == {413} and grown < 40, "150 refused documents: RSS grows < 40 MB",
               f"statuses {statuses}, grew {grown:.0f} MB")
    tap.ok(srv.stop() == 0, "... and the server exits 0 (under ASan: no leak)", srv.stderr()[-1500:])


def test_key_before_parsing():
    """With keys on, an upload without a valid key is refused before its document is
    read: a broken or costly document gets the same 400 (no key) or 403 (a wrong
    key) as a good one."""
    srv = ts.Server(env={"DEEPMT_API_KEYS": "k1"})
    p = srv.port
    for what, name, data in (("not a zip", "fake.docx", b"hello, I am not a zip"),
                             ("an expanding document", "expand.docx", expanding_docx()),
                             ("a good document", "a.docx", docx_bytes(DOCX_XML))):
        st, j = upload(p, name, data)
        tap.ok(st == 400 and "get an API key" in ts.error_of(j), f"no key, {what} -> 400 before parsing", f"{st} {j}")
        st, j = upload(p, name, data, api_key="wrong")
        tap.ok(st == 403, f"a wrong key, {what} -> 403", f"{st} {j}")
    st, j = upload(p, "fake.docx", b"hello, I am not a zip", api_key="k1")
    tap.ok(st == 400 and "not a valid zip" in ts.error_of(j), "with the key, the document is read (400 for junk)",
           f"{st} {j}")
    tap.ok(srv.stop() == 0, "the server exits 0", srv.stderr()[-1500:])


def test_results_not_evicted():
    """A flood of uploads cannot push another client's result out before its lifetime:
    a client may hold 100 results (one quota per API key when keys are on), and a
    full store refuses new uploads with 429 instead of dropping the oldest."""
    srv = ts.Server(env={"DEEPMT_API_KEYS": "victim,flooder"})
    p = srv.port
    st, j, got = roundtrip(p, "mine.txt", b"Hello there.", source="en", target="en", api_key="victim")
    url = urllib.parse.urlparse(j["translatedFileUrl"]).path if st == 200 else ""
    statuses = [upload(p, f"f{i}.txt", b"x", source="en", target="en", api_key="flooder")[0] for i in range(105)]
    tap.ok(statuses[:100] == [200] * 100 and set(statuses[100:]) == {429},
           "one key may hold 100 results; the 101st upload gets 429", f"{statuses.count(200)} x 200, then {statuses[100:]}")
    st2, h, got2 = ts.request(p, "GET", url)
    tap.ok(st == 200 and st2 == 200 and got2 == got, "the other key's result is still there", f"{st} {st2}")
    st3, j3 = upload(p, "again.txt", b"x", source="en", target="en", api_key="victim")
    tap.ok(st3 == 200, "and that key may still upload", f"{st3} {j3}")
    srv.stop()
    srv = ts.Server()
    statuses = [upload(srv.port, f"f{i}.txt", b"x", source="en", target="en")[0] for i in range(102)]
    tap.ok(statuses[:100] == [200] * 100 and statuses[100:] == [429, 429],
           "without keys, one address may hold 100 results", f"{statuses.count(200)} x 200, then {statuses[100:]}")
    srv.stop()


def test_in_flight_bound():
    """--max-file-memory bounds the bytes of documents being parsed, queued or
    translated: two 60 KB uploads at once against 100k: one is translated, the other
    gets 429 with a message; once the first is done, another upload is taken."""
    srv = ts.Server("--max-file-memory", "100k", "--workers", "1", "--max-chars", "100000", "--max-sentences", "2000")
    p = srv.port
    text = "".join(f"A man number {i} rides a red bike down a long and busy street in the old city.\n"
                   for i in range(760)).encode()
    results = [None, None]

    def send(k):
        try:
            results[k] = upload(p, f"big{k}.txt", text)
        except OSError as e:  # a timeout (a sanitizer build is slow): a failed check, not a crash
            results[k] = (0, {"error": f"{type(e).__name__}: {e}"})
    threads = [threading.Thread(target=send, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    statuses = sorted(r[0] if r else 0 for r in results)
    refused = [r[1] for r in results if r and r[0] == 429]
    tap.ok(len(text) > 50000 and statuses == [200, 429] and refused and "max-file-memory" in refused[0].get("error", ""),
           "two 60 KB uploads at once, --max-file-memory 100k: one translated, one 429 that names the limit",
           f"{len(text)} bytes, {results}")
    for _ in range(50):  # the bytes are released when the answer has gone out, just after the client reads it
        st, j = upload(p, "after.txt", text)
        if st != 429:
            break
        time.sleep(0.1)
    tap.ok(st == 200, "once it is done, the memory is free again: the next upload is taken", f"{st} {j}")
    srv.stop()
    r = subprocess.run([ts.BIN, "serve", "--model", ts.MODEL, "--port", "0", "--max-file-memory", "12"],
                       capture_output=True, timeout=30)
    tap.ok(r.returncode == 2 and b"--max-file-memory" in r.stderr, "--max-file-memory below 1k is refused",
           f"{r.returncode} {r.stderr[-300:]!r}")


def test_storage_and_keys():
    tmp = tempfile.mkdtemp(prefix="deepmt-files-test-")
    try:
        srv = ts.Server("--max-body-bytes", "64k", env={"TMPDIR": tmp, "DEEPMT_API_KEYS": "k1"})
        p = srv.port
        st, j = upload(p, "a.txt", b"Hello there.")
        tap.ok(st == 400 and "get an API key" in ts.error_of(j), "/translate_file checks the API key", f"{st} {j}")
        st, j, got = roundtrip(p, "a.txt", b"Hello there.", apiKey="k1")
        tap.ok(st == 200 and got, "the key may be spelled apiKey", f"{st} {j}")
        st, j, got = roundtrip(p, "a.txt", b"Hello there.", api_key="k1")
        tap.ok(st == 200 and got, "with the key: translated", f"{st} {j}")
        st, j = upload(p, "big.txt", b"x" * (100 << 10), api_key="k1")
        tap.ok(st == 413 and "too large" in ts.error_of(j), "a file over --max-body-bytes -> 413", f"{st} {j}")
        held = [d for d in os.listdir(tmp) if d.startswith("deepmt-files-")]
        inside = [f for f in os.listdir(os.path.join(tmp, held[0])) if f != ".owner.lock"] if held else []
        tap.ok(len(held) == 1 and len(inside) == 2, "results live in one private folder under $TMPDIR (two here)",
               f"{held} {inside}")
        rc = srv.stop()
        tap.ok(rc == 0 and os.listdir(tmp) == [], "shutdown removes the folder and every result",
               f"rc {rc}: {os.listdir(tmp)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_killed_servers_folder():
    """A server killed outright (SIGKILL, the OOM killer) cannot remove its private
    folder; the next server to start with the same $TMPDIR removes it, results and
    all, and leaves alone the folders of live servers and folders it cannot tell
    are dead (no lock file)."""
    tmp = tempfile.mkdtemp(prefix="deepmt-files-killed-")
    servers = []
    try:
        def folders():
            return sorted(d for d in os.listdir(tmp) if d.startswith("deepmt-files-"))

        a = ts.Server(env={"TMPDIR": tmp})
        servers.append(a)
        st, j, got = roundtrip(a.port, "a.txt", b"Hello there.")
        a.proc.kill()
        a.proc.wait()
        dead = folders()
        tap.ok(st == 200 and len(dead) == 1 and len(os.listdir(os.path.join(tmp, dead[0]))) == 2,
               "a killed server leaves its folder behind, with its result and its lock file", f"{st} {dead}")
        unknown = os.path.join(tmp, "deepmt-files-Zz9Zz9")  # no lock file: not known to be dead
        os.mkdir(unknown)
        b = ts.Server(env={"TMPDIR": tmp})
        servers.append(b)
        now = folders()
        tap.ok(dead[0] not in now and "deepmt-files-Zz9Zz9" in now and len(now) == 2,
               "the next server removes it, keeps a folder without a lock file and has its own", f"{dead} -> {now}")
        tap.ok("removed 1 folder of translated files left by servers that were killed" in b.stderr(),
               "... and says so in its log", b.stderr()[-400:])
        c = ts.Server(env={"TMPDIR": tmp})
        servers.append(c)
        st, j, got = roundtrip(b.port, "b.txt", b"Hello again.")
        tap.ok(st == 200 and got and len(folders()) == 3 and "left by servers" not in c.stderr(),
               "a third server leaves the live one's folder alone (its download still works)", f"{st} {folders()}")
        rc_b, rc_c = b.stop(), c.stop()
        tap.ok(rc_b == 0 and rc_c == 0 and folders() == ["deepmt-files-Zz9Zz9"],
               "both stop and remove their own folders", f"{rc_b} {rc_c} {folders()}")
    finally:
        for srv in servers:
            srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_shared_folder():
    """--files-dir: replicas sharing a folder answer each other's downloads (a
    balancer may send the download anywhere); results outlive the replica that made
    them; expired ones are 404 and swept by any replica."""
    tmp = tempfile.mkdtemp(prefix="deepmt-files-shared-")
    shared = os.path.join(tmp, "results")
    a = b = c = None
    try:
        a = ts.Server("--files-dir", shared)
        b = ts.Server(env={"DEEPMT_FILES_DIR": shared})
        tap.ok("shared with other replicas" in a.stderr() and os.path.isdir(shared),
               "--files-dir creates the folder and says it is shared", a.stderr()[-400:])
        got = {}
        for name, data in (("a.txt", b"Hello there. How are you?"), ("b.docx", docx_bytes(DOCX_XML))):
            st, j = upload(a.port, name, data)
            path = urllib.parse.urlparse(j["translatedFileUrl"]).path if st == 200 else "/none"
            st_a, _, from_a = ts.request(a.port, "GET", path)
            st_b, hb, from_b = ts.request(b.port, "GET", path)
            tap.ok(st == st_a == st_b == 200 and from_a == from_b and from_b,
                   f"{name}: made by one replica, downloaded from the other: same bytes",
                   f"{st} {st_a} {st_b} {path}")
            tap.ok(name in hb.get("content-disposition", ""), f"{name}: the other replica names the file",
                   f"{hb}")
            got[name] = (path, from_a)
        bare = got["b.docx"][0].rsplit("/", 1)[0]
        st_id, _, by_id = ts.request(b.port, "GET", bare)
        st_wrong, _, _ = ts.request(b.port, "GET", bare + "/other.docx")
        tap.ok(st_id == 200 and by_id == got["b.docx"][1] and st_wrong == 404,
               "the other replica: by the id alone 200 (the folder is searched), under another name 404",
               f"{st_id} {st_wrong}")
        files = sorted(os.listdir(shared))
        tap.ok(len(files) == 2 and all(re.fullmatch(r"[0-9a-f]{32}\.(a\.txt|b\.docx)", f) for f in files),
               "the folder holds ID.NAME, one file a result", f"{files}")
        unknown = "/download_file/" + "0" * 32 + "/a.txt"
        st, _, _ = ts.request(b.port, "GET", unknown)
        st2, _, _ = ts.request(b.port, "GET", got["a.txt"][0][:-len("a.txt")] + "../../etc/passwd")
        tap.ok(st == 404 and st2 in (200, 404), "an unknown id is 404 on every replica", f"{st} {st2}")
        rc = a.stop()
        a = None
        st, _, again = ts.request(b.port, "GET", got["b.docx"][0])
        tap.ok(rc == 0 and st == 200 and again == got["b.docx"][1] and len(os.listdir(shared)) == 2,
               "the replica that made them stops: its results stay and the other replica serves them",
               f"rc {rc} {st} {os.listdir(shared)}")
        old = os.path.join(shared, [f for f in os.listdir(shared) if f.endswith("a.txt")][0])
        os.utime(old, (os.path.getmtime(old) - 1801, os.path.getmtime(old) - 1801))
        st, _, _ = ts.request(b.port, "GET", got["a.txt"][0])
        tap.ok(st == 404, "a result older than 30 minutes is 404 from a replica that did not make it", f"{st}")
        c = ts.Server("--files-dir", shared)
        ts.request(c.port, "GET", unknown)  # a new replica sweeps on its first look
        tap.ok(not os.path.exists(old) and len(os.listdir(shared)) == 1,
               "any replica sweeps expired results from the shared folder", f"{os.listdir(shared)}")
        rcb, rcc = b.stop(), c.stop()
        b = c = None
        tap.ok(rcb == rcc == 0 and os.path.isdir(shared), "shutdown leaves a shared folder in place", f"{rcb} {rcc}")
    finally:
        for s in (a, b, c):
            if s:
                s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_no_tmpdir():
    srv = ts.Server(env={"TMPDIR": "/nonexistent/deepmt-no-such-dir"})
    st, h, j = ts.jreq(srv.port, "GET", "/frontend/settings")
    st2, j2 = upload(srv.port, "a.txt", b"Hello.")
    st3, h, j3 = ts.translate(srv.port, "Hello.")
    tap.ok(st == 200 and j.get("filesTranslation") is False and j.get("supportedFilesFormat") == [] and st2 == 403
           and "Files translation are disabled" in ts.error_of(j2) and st3 == 200,
           "no writable TMPDIR: the server runs, file translation is off and says so", f"{j} {st2} {j2} {st3}")
    tap.ok("file translation is off" in srv.stderr(), "... and the log says why", srv.stderr()[-400:])
    srv.stop()


def main():
    return ts.run_suite([test_docx, test_odt, test_text_formats, test_refusals, test_document_budget, test_security_headers],
                        after=[test_storage_and_keys, test_killed_servers_folder, test_shared_folder, test_no_tmpdir, test_refused_documents_free_their_memory,
                               test_key_before_parsing, test_results_not_evicted, test_in_flight_bound])


if __name__ == "__main__":
    sys.exit(main())
