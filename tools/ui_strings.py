#!/usr/bin/python3
"""Build a corpus of user-interface strings (English -> German, French, Czech) from the
gettext catalogues of Debian 12 packages, for training: menu items, buttons, dialog
text and tooltips ("Cancel" -> "Abbrechen", "Find Ne_xt" -> "Nächsten suchen").

The general data has almost none of them (111 of its 213,223 English en-de lines are one word),
so the model had learned to copy short capitalised inputs ("Settings" -> "tting",
"Cancel" -> "Knosl"), and a LibreTranslate server is often asked for exactly these
(translation suggestions in localisation tools).

    tools/ui_strings.py --out runs/data/ui                 # downloads ~70 MB of .deb files
    tools/ui_strings.py --out runs/data/ui --debs DIR      # .deb files already there

Writes, in the layout of data/general (so `train.py train --ui DIR` reads it like the
general data):
    DIR/train/en-de.en.gz, en-de.de.gz, en-fr..., en-cs...    line-aligned pairs
    DIR/test/ui.en-de.en, ui.en-de.de, ...                     held out: 1 English string in 50
    DIR/test/format.en-de.en, format.en-de.de, ...             strings with format placeholders
                                                               ("Delete %d files?"), never trained on
    DIR/README.md                                              counts, packages, licences

Reproducible: the same packages (Debian 12's archive) give the same files. A string is
held out by a hash of its lower-cased English text, so every translation of it (and
every case variant) is on the same side: no test string is trained on.

What is kept (clean_pair): a translated, single-line string with a letter, at most
MAX_WORDS words, whose mnemonic marker (`_` GTK and LibreOffice, `~` older LibreOffice)
is removed; left out: format directives (`%s`, `%1$d`, `{0}`, `$name`), markup
(`<b>`), strings the translator left as they were, spreadsheet function names
(`RANK.AVG`), plural forms, and strings whose two sides differ wildly in length.
"""
import argparse
import collections
import glob
import gzip
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile

LANGS = ("de", "fr", "cs")
MAX_WORDS = 40
TEST_ONE_IN = 50
FORMAT_TEST = 500

# Debian 12 packages with German, French and Czech catalogues of everyday UI text, and
# their licences (each package's debian/copyright). Office, desktop, file manager,
# media player, image editors: the strings people ask a translation server for.
PACKAGES = {
    "libreoffice-l10n-de": "MPL-2.0", "libreoffice-l10n-fr": "MPL-2.0", "libreoffice-l10n-cs": "MPL-2.0",
    "libgtk-3-common": "LGPL-2.1+", "libgtk-4-common": "LGPL-2.1+", "libglib2.0-data": "LGPL-2.1+",
    "nautilus-data": "GPL-3+", "evince-common": "GPL-2+", "gnome-control-center-data": "GPL-2+",
    "gedit-common": "GPL-2+", "gnome-text-editor": "GPL-3+", "eog": "GPL-2+", "totem-common": "GPL-2+",
    "rhythmbox-data": "GPL-2+", "gnome-calculator": "GPL-3+", "file-roller": "GPL-2+",
    "gnome-software-common": "GPL-2+", "thunar-data": "GPL-2+",
    "vlc-l10n": "GPL-2+", "gimp-data": "GPL-3+", "inkscape": "GPL-3+",
}

# A catalogue's path inside a package: .../<lang>/LC_MESSAGES/<domain>.mo (gettext's
# and LibreOffice's program/resource/ layout alike).
MO_PATH = re.compile(r"/(de|fr|cs)/LC_MESSAGES/[^/]+\.mo$")
DIRECTIVE = re.compile(r"%[-+ #0-9.*$]*[a-zA-Z%]|%\d|\{[\w.]*\}|\$[A-Za-z_(]|\$\{|&[a-z]+;|\\[nt]")
FUNCTION_NAME = re.compile(r"^[A-Z0-9_.]+$")
MNEMONIC = re.compile(r"[_~](?=\w)")


def read_mo(path):
    """A compiled gettext catalogue -> [(msgid, msgstr)], singular entries only (plural
    forms carry counts, which a sentence pair cannot). A context (`ctx\\x04id`) is
    dropped; the header (empty msgid) is skipped."""
    data = open(path, "rb").read()
    if len(data) < 28:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic == 0x950412DE else ">" if magic == 0xDE120495 else None
    if order is None:
        return []
    _, n, ids_at, strs_at = struct.unpack(order + "4I", data[4:20])
    out = []
    for i in range(n):
        try:
            id_len, id_off = struct.unpack_from(order + "2I", data, ids_at + 8 * i)
            str_len, str_off = struct.unpack_from(order + "2I", data, strs_at + 8 * i)
        except struct.error:
            break
        key, value = data[id_off:id_off + id_len], data[str_off:str_off + str_len]
        key = key.split(b"\x04", 1)[-1]
        if not key or b"\x00" in key or b"\x00" in value:
            continue
        try:
            out.append((key.decode("utf-8"), value.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return out


def drop_mnemonic(text):
    """'Find Ne_xt' -> 'Find Next', 'Ö_ffnen' -> 'Öffnen'; None when the string has more
    than one marker (an identifier, a file name pattern: not UI text)."""
    marks = MNEMONIC.findall(text)
    if len(marks) > 1:
        return None
    return MNEMONIC.sub("", text, count=1)


def clean_pair(src, tgt):
    """One catalogue entry -> (English, translation), or None when it is no sentence
    pair worth learning (see the module's docstring)."""
    src, tgt = src.strip(), tgt.strip()
    if not src or not tgt or "\n" in src or "\n" in tgt or "\t" in src or "\t" in tgt:
        return None
    if "<" in src or DIRECTIVE.search(src) or DIRECTIVE.search(tgt):
        return None
    if FUNCTION_NAME.match(src) and not src.isalpha():
        return None
    src, tgt = drop_mnemonic(src), drop_mnemonic(tgt)
    if src is None or tgt is None:
        return None
    src, tgt = " ".join(src.split()), " ".join(tgt.split())
    if src == tgt or not any(c.isalpha() for c in src) or len(src.split()) > MAX_WORDS:
        return None
    ratio = len(tgt) / len(src)
    if len(src) > 12 and not 0.4 <= ratio <= 3.0:
        return None
    return src, tgt


def format_pair(src, tgt):
    """A catalogue entry whose English has format placeholders ("Could not open %s"):
    (English, translation) for the format test set, or None. The same limits as
    clean_pair otherwise; such strings are never trained on (clean_pair drops them)."""
    src, tgt = " ".join(src.split()), " ".join(tgt.split())
    if not src or not tgt or src == tgt or "<" in src or not DIRECTIVE.search(src) or len(src.split()) > MAX_WORDS:
        return None
    if not any(c.isalpha() for c in DIRECTIVE.sub("", src)):
        return None
    src, tgt = drop_mnemonic(src), drop_mnemonic(tgt)
    return (src, tgt) if src and tgt else None


def held_out(src):
    """Whether an English string belongs to the test split: by a hash of its lower-cased
    text, so that its translations and case variants all fall on one side."""
    digest = hashlib.sha256(src.lower().encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") % TEST_ONE_IN == 0


def download(packages, into):
    os.makedirs(into, exist_ok=True)
    missing = [p for p in packages if not glob.glob(os.path.join(into, f"{p}_*.deb"))]
    if missing:
        print(f"ui_strings: downloading {len(missing)} packages into {into}", file=sys.stderr)
        # as root apt drops to the _apt user, which cannot write an arbitrary folder
        subprocess.run(["apt-get", "-q", "-o", "APT::Sandbox::User=root", "download"] + missing,
                       cwd=into, check=True, stdout=subprocess.DEVNULL)
    return {p: sorted(glob.glob(os.path.join(into, f"{p}_*.deb")))[-1] for p in packages}


def catalogues(deb, scratch):
    """The de/fr/cs catalogues of one package -> {lang: [(msgid, msgstr)]}."""
    subprocess.run(["dpkg-deb", "-x", deb, scratch], check=True)
    out = collections.defaultdict(list)
    for root, _, files in os.walk(scratch):
        for name in files:
            path = os.path.join(root, name)
            m = MO_PATH.search(path)
            if m:
                out[m.group(1)].extend(read_mo(path))
    return out


def build(debs, out_dir):
    pairs = {lang: [] for lang in LANGS}
    formats = {lang: {} for lang in LANGS}
    per_package = {}
    for package, deb in sorted(debs.items()):
        with tempfile.TemporaryDirectory() as scratch:
            found = catalogues(deb, scratch)
        counts = {}
        for lang in LANGS:
            kept = [p for p in (clean_pair(s, t) for s, t in found.get(lang, [])) if p]
            pairs[lang].extend(kept)
            for s, t in found.get(lang, []):
                if "\n" not in s and "\n" not in t and (f := format_pair(s, t)):
                    formats[lang].setdefault(f[0], f[1])
            counts[lang] = len(kept)
        per_package[package] = counts
    summary = {}
    for lang in LANGS:
        seen, train, test, test_src = set(), [], [], set()
        for src, tgt in pairs[lang]:
            if (src, tgt) in seen:
                continue
            seen.add((src, tgt))
            if not held_out(src):
                train.append((src, tgt))
            elif src not in test_src:        # one reference per test string
                test_src.add(src)
                test.append((src, tgt))
        write_pairs(os.path.join(out_dir, "train", f"en-{lang}"), "en", lang, train, gz=True)
        write_pairs(os.path.join(out_dir, "test", f"ui.en-{lang}"), "en", lang, test, gz=False)
        # at most FORMAT_TEST a language, in an order fixed by the strings' hashes
        order = sorted(formats[lang].items(), key=lambda kv: hashlib.sha256(kv[0].encode("utf-8")).digest())
        write_pairs(os.path.join(out_dir, "test", f"format.en-{lang}"), "en", lang, order[:FORMAT_TEST], gz=False)
        short = sum(1 for s, _ in train if len(s.split()) <= 3)
        summary[lang] = (len(train), short, len(test))
    write_readme(out_dir, per_package, summary)
    return summary


def write_pairs(base, a, b, pairs, gz):
    os.makedirs(os.path.dirname(base), exist_ok=True)
    for lang, side in ((a, 0), (b, 1)):
        path = f"{base}.{lang}" + (".gz" if gz else "")
        tmp = path + ".tmp"
        # mtime 0: the same pairs give byte-identical files
        f = gzip.GzipFile(tmp, "wb", mtime=0) if gz else open(tmp, "wb")
        with f:
            f.write("".join(p[side] + "\n" for p in pairs).encode("utf-8"))
        os.replace(tmp, path)


def write_readme(out_dir, per_package, summary):
    lines = ["# User-interface strings from Debian 12 packages' translations", "",
             "Written by tools/ui_strings.py; read by `tools/train.py train --ui DIR`.", "",
             "| pair | train pairs | of them <= 3 English words | test strings |", "|---|---|---|---|"]
    for lang in LANGS:
        n, short, t = summary[lang]
        lines.append(f"| en-{lang} | {n:,} | {short:,} | {t:,} |")
    lines += ["", "| package | licence | de | fr | cs |", "|---|---|---|---|---|"]
    for package, counts in sorted(per_package.items()):
        lines.append(f"| {package} | {PACKAGES.get(package, '?')} | "
                     + " | ".join(f"{counts[lang]:,}" for lang in LANGS) + " |")
    lines += ["", "The translations are the packages' translators' work, under each package's licence."]
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="DIR", help="where train/, test/ and README.md go")
    p.add_argument("--debs", metavar="DIR", help="the .deb files (downloaded there when missing) [OUT/debs]")
    p.add_argument("--packages", help="comma-separated package names [the built-in list]")
    args = p.parse_args(argv)
    packages = args.packages.split(",") if args.packages else list(PACKAGES)
    debs = download(packages, args.debs or os.path.join(args.out, "debs"))
    summary = build(debs, args.out)
    for lang in LANGS:
        n, short, t = summary[lang]
        print(f"en-{lang}: {n} train pairs ({short} of at most 3 words), {t} test strings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
