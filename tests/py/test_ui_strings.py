#!/usr/bin/python3
"""tools/ui_strings.py: the user-interface string corpus read from gettext catalogues.

A catalogue written here byte by byte (both byte orders) is read back; the cleaning
keeps UI text and drops what is no sentence pair; a package built with dpkg-deb goes
through the whole build: the data/general layout, no test string trained on, the same
files from the same packages. No network: the download step is not run. TAP output.
"""

import gzip
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools"))

import tap  # noqa: E402
import ui_strings as U  # noqa: E402


def write_mo(path, entries, order="<"):
    """A compiled gettext catalogue of [(msgid bytes, msgstr bytes)], as msgfmt lays it out."""
    entries = sorted(entries)
    n = len(entries)
    ids_at = 28
    strs_at = ids_at + 8 * n
    data_at = strs_at + 8 * n
    blob, id_table, str_table = b"", b"", b""
    for key, _ in entries:
        id_table += struct.pack(order + "2I", len(key), data_at + len(blob))
        blob += key + b"\0"
    for _, value in entries:
        str_table += struct.pack(order + "2I", len(value), data_at + len(blob))
        blob += value + b"\0"
    header = struct.pack(order + "7I", 0x950412DE, 0, n, ids_at, strs_at, 0, 0)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(header + id_table + str_table + blob)


def test_read_mo(tmp):
    entries = [(b"", b"Content-Type: text/plain; charset=UTF-8\n"), (b"_Open", "Ö_ffnen".encode()),
               (b"menu\x04Quit", b"Beenden"), (b"%d file\x00%d files", b"%d Datei\x00%d Dateien"),
               (b"Bad", b"\xff\xfe")]
    for order in ("<", ">"):
        path = os.path.join(tmp, f"cat{order == '<'}.mo")
        write_mo(path, entries, order)
        got = U.read_mo(path)
        tap.ok(sorted(got) == [("Quit", "Beenden"), ("_Open", "Ö_ffnen")],
               f"read_mo ({'little' if order == '<' else 'big'}-endian): singular entries, context dropped; header, "
               "plural forms and undecodable text left out", detail=str(got))
    bad = os.path.join(tmp, "short.mo")
    with open(bad, "wb") as f:
        f.write(b"\xde\x12\x04\x95" + b"\0" * 4 + struct.pack("<3I", 1000, 28, 36) + b"\0" * 8)
    tap.ok(U.read_mo(bad) == [], "read_mo: a truncated catalogue yields nothing, no exception")
    with open(bad, "wb") as f:
        f.write(b"not a catalogue at all, just text....")
    tap.ok(U.read_mo(bad) == [], "read_mo: a file with another magic number yields nothing")


def test_clean_pair():
    cases = [
        (("Find Ne_xt", "_Nächsten suchen"), ("Find Next", "Nächsten suchen")),
        (("~Save As...", "Speichern ~unter..."), ("Save As...", "Speichern unter...")),
        (("Cancel", "Abbrechen"), ("Cancel", "Abbrechen")),
        (("  Black   & White ", "Schwarz-weiß"), ("Black & White", "Schwarz-weiß")),
        (("Open %s", "%s öffnen"), None),
        (("Page {0} of {1}", "Seite {0} von {1}"), None),
        (("Copy %1$d files", "%1$d Dateien kopieren"), None),
        (("<b>Bold</b>", "<b>Fett</b>"), None),
        (("Status", "Status"), None),
        (("RANK.AVG", "RANG.MITTELW"), None),
        (("first_name_field", "vorname_feld"), None),
        (("Line one\nLine two", "Zeile eins\nZeile zwei"), None),
        (("1234", "1.234"), None),
        (("Open", ""), None),
        (("Select the printer to use for this document", "Ja"), None),
        (("Close the window", "Close the window and everything else that might be open at this time"), None),
    ]
    got = [(src, U.clean_pair(*src)) for src, _ in cases]
    wrong = [(src, g, want) for (src, g), (_, want) in zip(got, cases) if g != want]
    tap.ok(not wrong, "clean_pair: mnemonics removed, spaces squeezed; directives, markup, untranslated strings, "
                      "function names, identifiers, several lines, no letters, empty and mismatched lengths left out",
           detail="\n".join(f"{s!r}: got {g!r}, want {w!r}" for s, g, w in wrong))
    tap.ok(U.held_out("Save As") == U.held_out("save as") == U.held_out("SAVE AS"),
           "held_out: a string and its case variants fall on the same side")
    share = sum(U.held_out(f"String number {i}") for i in range(20000)) / 20000
    tap.ok(abs(share - 1 / U.TEST_ONE_IN) < 0.006, f"held_out: about 1 in {U.TEST_ONE_IN} strings", detail=str(share))


def make_deb(tmp, name, files):
    root = os.path.join(tmp, "pkg-" + name)
    os.makedirs(os.path.join(root, "DEBIAN"))
    with open(os.path.join(root, "DEBIAN", "control"), "w") as f:
        f.write(f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\n"
                "Description: test catalogues\n")
    for rel, entries in files.items():
        write_mo(os.path.join(root, rel), entries)
    deb = os.path.join(tmp, f"{name}_1.0_all.deb")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-b", root, deb], check=True, capture_output=True)
    return deb


def read_gz(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def test_build(tmp):
    if not shutil.which("dpkg-deb"):
        tap.skip("no dpkg-deb: the build from packages not checked")
        return
    words = [f"Action {i}" for i in range(300)]
    de = [(w.encode(), f"Aktion {i}".encode()) for i, w in enumerate(words)] + [(b"_Cancel", b"_Abbrechen")] + \
        [(b"Delete %d files?", "%d Dateien löschen?".encode()), (b"Open {name}", "{name} öffnen".encode()),
         (b"%s", b"%s"), (b"%d%%", b"%d %%")]
    fr = [(w.encode(), f"Action n{i}".encode()) for i, w in enumerate(words)]
    debs = {"app-data": make_deb(tmp, "app-data", {
        "usr/share/locale/de/LC_MESSAGES/app.mo": de,
        "usr/share/locale/fr/LC_MESSAGES/app.mo": fr,
        "usr/share/locale/de_CH/LC_MESSAGES/app.mo": [(b"Street", "Strasse".encode())],
        "usr/share/locale/pt/LC_MESSAGES/app.mo": [(b"Cancel", b"Cancelar")]}),
        "office-l10n-de": make_deb(tmp, "office-l10n-de", {
            "usr/lib/office/program/resource/de/LC_MESSAGES/sw.mo": [(b"Cancel", b"Verwerfen"), (b"Table", b"Tabelle")]})}
    out = os.path.join(tmp, "ui")
    summary = U.build(debs, out)
    en = read_gz(os.path.join(out, "train", "en-de.en.gz"))
    de_lines = read_gz(os.path.join(out, "train", "en-de.de.gz"))
    pairs = set(zip(en, de_lines))
    test_en = open(os.path.join(out, "test", "ui.en-de.en"), encoding="utf-8").read().splitlines()
    test_de = open(os.path.join(out, "test", "ui.en-de.de"), encoding="utf-8").read().splitlines()
    all_de = set(pairs) | set(zip(test_en, test_de))
    tap.ok(len(en) == len(de_lines) and ("Table", "Tabelle") in all_de and ("Street", "Strasse") not in all_de
           and ("Cancel", "Cancelar") not in all_de and not any("_" in s for s in en + de_lines),
           "build: de catalogues of both layouts (gettext, office resource) read; de_CH and pt left out; "
           "mnemonics gone", detail=f"{sorted(all_de)[:5]} ...")
    cancel = {t for s, t in pairs if s == "Cancel"}   # (held_out("Cancel") is False)
    tap.ok(cancel == {"Abbrechen", "Verwerfen"}, "build: a string with two translations keeps both for training",
           detail=str(cancel))
    tap.ok(test_en and not set(test_en) & set(en) and len(set(test_en)) == len(test_en),
           "build: the test strings are never trained on, each once", detail=f"{len(test_en)} test, {len(en)} train")
    tap.ok(summary["de"][0] == len(en) and summary["de"][2] == len(test_en) and summary["cs"] == (0, 0, 0)
           and os.path.exists(os.path.join(out, "train", "en-fr.fr.gz")),
           "build: the summary counts what was written, a language without catalogues gets empty files",
           detail=str(summary))
    fmt_en = open(os.path.join(out, "test", "format.en-de.en"), encoding="utf-8").read().splitlines()
    fmt_de = open(os.path.join(out, "test", "format.en-de.de"), encoding="utf-8").read().splitlines()
    tap.ok(sorted(zip(fmt_en, fmt_de)) == [("Delete %d files?", "%d Dateien löschen?"), ("Open {name}", "{name} öffnen")]
           and not {"Delete %d files?", "Open {name}"} & set(en),
           "build: strings with placeholders go to the format test set (not those without a letter), "
           "never to training", detail=str(list(zip(fmt_en, fmt_de))))
    readme = open(os.path.join(out, "README.md"), encoding="utf-8").read()
    tap.ok("| app-data |" in readme and "| en-de |" in readme, "build: README.md lists packages and counts")
    first = {n: open(os.path.join(out, "train", n), "rb").read() for n in os.listdir(os.path.join(out, "train"))}
    U.build(debs, out)
    again = {n: open(os.path.join(out, "train", n), "rb").read() for n in os.listdir(os.path.join(out, "train"))}
    tap.ok(first == again, "build: the same packages give byte-identical files")


def main():
    tmp = tempfile.mkdtemp(prefix="deepmt-ui-")
    try:
        test_read_mo(tmp)
        test_clean_pair()
        test_build(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
