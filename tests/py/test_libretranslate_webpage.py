#!/usr/bin/python3
"""The web page at GET / in a real headless browser (TAP): Debian's chromium and
chromium-driver through python3-selenium (scripts/deps.sh test installs them;
skipped with a message where they are missing). Types text and gets a
translation as you type, auto-detect shows the language, swap, the character
count against the limit, an error shown (a server with API keys and a wrong
key), a file translated and downloaded; the page loads nothing from elsewhere.
Also without a browser: browsers get the page, API clients the JSON banner.
Each defect once found in the page has a check: swap from Auto Detect (only
with a detection for the current text, never an empty target), an error clears
the result, the key asked for when missing, re-translating as the key is typed
and remembering it only when asked, the shareable address (/?source=&target=&q=),
the translated file's name, file errors beside the file control, alternatives
that keep their line breaks and the first translation, "copied" that goes.
DEEPMT_SCREENSHOT=path saves a PNG of the page.
"""

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tap  # noqa: E402
import test_server as ts  # noqa: E402

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")


def test_http(p):
    st, h, data = ts.request(p, "GET", "/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    tap.ok(st == 200 and h.get("content-type", "").startswith("text/html") and data.startswith(b"<!DOCTYPE html>"),
           "GET / with a browser's Accept: the page", f"{st} {h} {data[:80]!r}")
    tap.ok(len(data) < 32 * 1024 and b"http://" not in data and b"https://" not in data and b"src=" not in data,
           "the page is small and self-contained (no outside URLs, no external scripts)", f"{len(data)} bytes")
    tap.ok("default-src 'self'" in h.get("content-security-policy", "") and "Accept" in h.get("vary", ""),
           "the page forbids loading from elsewhere (CSP); answers vary by Accept", f"{h}")
    for accept in (None, "application/json", "*/*", "text/html;q=0, application/json"):
        st, h, j = ts.jreq(p, "GET", "/", headers={"Accept": accept} if accept else None)
        tap.ok(st == 200 and isinstance(j, dict) and j.get("name") == "deepmt",
               f"GET / with Accept {accept!r}: the JSON banner", f"{st} {j}")


def browser(tmp):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
              "--window-size=1200,820", f"--user-data-dir={os.path.join(tmp, 'profile')}"):
        o.add_argument(a)
    o.add_experimental_option("prefs", {"download.default_directory": os.path.join(tmp, "downloads")})
    return webdriver.Chrome(service=Service(DRIVER), options=o)


def query_of(d):
    """The page's address's query: {name: value}."""
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(d.current_url).query).items()}


def retype(box, text):
    """Replaces a text box's content the way a person does (input events, unlike clear())."""
    from selenium.webdriver.common.keys import Keys
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    if text:
        box.send_keys(text)


def wait(what, fn, timeout=30 * ts.SLOW):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 (element not there yet)
            last = e
        time.sleep(0.1)
    return None


def test_browser(p, tmp):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select
    d = browser(tmp)
    try:
        d.get(f"http://127.0.0.1:{p}/")
        el = lambda i: d.find_element(By.ID, i)  # noqa: E731
        ok = wait("languages", lambda: len(Select(el("source")).options) == 5)
        tap.ok(ok and Select(el("source")).first_selected_option.get_attribute("value") == "auto",
               "browser: languages loaded from /languages, source starts on Auto Detect",
               [o.text for o in Select(el("source")).options])
        tap.ok(d.switch_to.active_element == el("q"), "browser: the text box has the focus", "")
        labels = {l.get_attribute("for") for l in d.find_elements(By.TAG_NAME, "label")}
        tap.ok({"source", "target", "q", "file"} <= labels, "browser: every control has a label", f"{labels}")
        Select(el("target")).select_by_value("en")
        el("q").send_keys("Zwei Hunde spielen im Schnee.")
        out = wait("translation", lambda: el("out").text.strip())
        tap.ok(bool(out) and out != "Zwei Hunde spielen im Schnee.", "browser: typing translates (debounced)",
               f"{out!r}")
        det = wait("detected", lambda: "German" in el("detected").text and el("detected").text)
        tap.ok(bool(det), "browser: auto-detect shows the detected language", el("detected").text)
        tap.ok(el("count").text == f"{len('Zwei Hunde spielen im Schnee.')} / 20000",
               "browser: character count against the limit", el("count").text)
        want = {"source": "auto", "target": "en", "q": "Zwei Hunde spielen im Schnee."}
        tap.ok(wait("address", lambda: query_of(d) == want), "browser: the address follows the page (a shareable link)",
               d.current_url)
        el("swap").click()
        ok = wait("swap", lambda: Select(el("source")).first_selected_option.get_attribute("value") == "en"
                  and Select(el("target")).first_selected_option.get_attribute("value") == "de")
        tap.ok(ok and el("q").get_attribute("value") == out, "browser: swap exchanges languages and texts",
               f"{Select(el('source')).first_selected_option.text} {Select(el('target')).first_selected_option.text}")
        retype(el("q"), "A man rides a bike.\nTwo dogs play in the snow.")
        el("q").send_keys(Keys.CONTROL, Keys.ENTER)
        wait("two lines", lambda: "\n" in el("out").text and el("busy").text == "")
        tap.ok(el("altbox").is_displayed(), "browser: alternatives are listed", "")
        first = el("out").text
        alts = lambda: [b.text for b in d.find_elements(By.CSS_SELECTOR, "#alts button")]  # noqa: E731
        tap.ok(first.count("\n") == 1 and alts() and all(a.count("\n") == 1 for a in alts()),
               "browser: alternatives keep their line breaks, as the translation does", f"{first!r} {alts()!r}")
        chosen = alts()[0] if alts() else None
        d.find_element(By.CSS_SELECTOR, "#alts button").click()
        tap.ok(el("out").text == chosen and first in alts(),
               "browser: an alternative chosen; the first translation stays among the choices", f"{alts()!r}")
        for b in d.find_elements(By.CSS_SELECTOR, "#alts button"):
            if b.text == first:
                b.click()
                break
        tap.ok(el("out").text == first and chosen in alts(), "browser: and the first translation can be chosen again",
               f"{el('out').text!r}")
        el("copy").click()
        copied = wait("copied", lambda: el("busy").text == "copied")
        time.sleep(2)
        tap.ok(copied and el("busy").text == "", "browser: \"copied\" shows, then goes (1.5 s)", f"{el('busy').text!r}")
        if os.environ.get("DEEPMT_SCREENSHOT"):
            el("q").clear()
            el("q").send_keys("Two dogs are playing in the snow.")
            Select(el("source")).select_by_value("auto")
            wait("shot", lambda: "English" in el("detected").text)
            time.sleep(0.5)
            d.save_screenshot(os.environ["DEEPMT_SCREENSHOT"])
        # a file
        path = os.path.join(tmp, "note.txt")
        with open(path, "w") as f:
            f.write("A man rides a bike.\n")
        tap.ok(el("filebox").is_displayed(), "browser: file translation offered (filesTranslation)", "")
        el("file").send_keys(path)
        el("sendfile").click()
        link = wait("file link", lambda: el("filelink").get_attribute("href"))
        body = b""
        if link:
            with urllib.request.urlopen(link, timeout=30) as r:
                body = r.read()
        tap.ok(bool(link) and body and body != b"A man rides a bike.\n", "browser: a file translated, link downloads it",
               f"{link} {body!r}")
        el("filelink").click()
        downloads = os.path.join(tmp, "downloads")
        saved = wait("download", lambda: [n for n in os.listdir(downloads) if not n.endswith(".crdownload")]
                     if os.path.isdir(downloads) else None, timeout=10)
        tap.ok(el("filelink").get_attribute("download") == "note.de.txt" and saved == ["note.de.txt"],
               "browser: the translated file downloads as note.de.txt (name.TARGET.ext)",
               f"download={el('filelink').get_attribute('download')!r} saved={saved}")
        shared_link(d, p)
        logs = d.get_log("browser") if hasattr(d, "get_log") else []
        tap.ok(not [l for l in logs if l.get("level") == "SEVERE"], "browser: no errors in the console", f"{logs}")
    finally:
        d.quit()


def shared_link(d, p):
    """An address /?source=&target=&q= opens the page so, and translates."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    el = lambda i: d.find_element(By.ID, i)  # noqa: E731
    text = "Un homme fait du vélo & rit."
    d.get(f"http://127.0.0.1:{p}/?" + urllib.parse.urlencode({"source": "fr", "target": "cs", "q": text}))
    out = wait("translation", lambda: el("out").text.strip())
    got = (Select(el("source")).first_selected_option.get_attribute("value"),
           Select(el("target")).first_selected_option.get_attribute("value"), el("q").get_attribute("value"))
    tap.ok(got == ("fr", "cs", text) and bool(out), "browser: a shared link sets the languages and text, and translates",
           f"{got} {out!r}")


def test_swap_auto(p, tmp):
    """Swap from Auto Detect: from the language detected for the text there now, else not at all."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select
    d = browser(tmp)
    try:
        d.get(f"http://127.0.0.1:{p}/")
        el = lambda i: d.find_element(By.ID, i)  # noqa: E731
        value = lambda i: Select(el(i)).first_selected_option.get_attribute("value") if Select(el(i)).all_selected_options else ""  # noqa: E731,E501
        wait("languages", lambda: len(Select(el("source")).options) == 5)
        tap.ok(value("source") == "auto" and el("swap").get_attribute("disabled") is not None,
               "browser: swap is disabled on Auto Detect before any detection", "")
        # the detected language is the target: the swapped target must not be empty
        tap.ok(value("target") == "de", "browser: the target starts as /frontend/settings says (German)", value("target"))
        el("q").send_keys("Zwei Hunde spielen im Schnee.")
        wait("detected", lambda: "German" in el("detected").text)
        el("swap").click()
        wait("translation", lambda: el("busy").text == "" and el("out").text.strip() and query_of(d).get("source") == "de")
        time.sleep(0.3)
        tap.ok(value("source") == "de" and value("target") not in ("", "de") and el("error").text == "",
               "browser: swap from Auto Detect when the detected language is the target: a valid target, no error",
               f"{value('source')!r} {value('target')!r} {el('error').text!r}")
        # a detection for text no longer there is not used
        Select(el("source")).select_by_value("auto")
        retype(el("q"), "Zwei Hunde spielen im Schnee.")
        wait("detected", lambda: "German" in el("detected").text)
        retype(el("q"), "")
        wait("cleared", lambda: el("detected").text == "")
        disabled = el("swap").get_attribute("disabled") is not None
        el("swap").click()
        el("q").send_keys(Keys.ALT, "s")
        time.sleep(0.3)
        tap.ok(disabled and value("source") == "auto" and value("target") != "",
               "browser: text cleared: swap is disabled, the old detection unused (click and Alt+S)",
               f"disabled={disabled} {value('source')!r} {value('target')!r}")
    finally:
        d.quit()


def test_browser_errors(tmp):
    srv = ts.Server("--max-chars", "40", env={"DEEPMT_API_KEYS": "k1"})
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    d = browser(tmp)
    try:
        d.get(f"http://127.0.0.1:{srv.port}/")
        el = lambda i: d.find_element(By.ID, i)  # noqa: E731
        shown = wait("key box", lambda: el("keybox").is_displayed())
        tap.ok(bool(shown), "browser: the API-key field shows when the server needs a key", "")
        remember = d.find_elements(By.ID, "remember")
        tap.ok(remember and remember[0].is_displayed() and not remember[0].is_selected(),
               "browser: a \"remember\" box beside the key, off by default", "")
        el("q").send_keys("A dog.")
        err = wait("error", lambda: el("error").text)
        tap.ok(err and "needs an API key" in err and el("keybox").is_displayed(),
               "browser: no key: the page asks for one (not \"Invalid API key\")", f"{err!r}")
        el("apikey").send_keys("k1")
        out = wait("translation", lambda: not el("error").text and el("out").text.strip())
        tap.ok(bool(out), "browser: typing the key translates; the error goes", f"{el('error').text!r}")
        wait("detected", lambda: el("detected").text)
        retype(el("apikey"), "wrong")
        el("q").send_keys(Keys.CONTROL, Keys.ENTER)
        err = wait("error", lambda: el("error").text.startswith("Invalid API key") and el("error").text)
        tap.ok(bool(err), "browser: a server error is shown (wrong API key)", f"{el('error').text!r}")
        tap.ok(el("out").text == "" and el("detected").text == "" and not el("altbox").is_displayed()
               and not el("copy").is_enabled(),
               "browser: an error clears the translation, alternatives and detected language",
               f"{el('out').text!r} {el('detected').text!r}")
        # remembered only when asked
        d.refresh()
        wait("key box", lambda: el("keybox").is_displayed())
        tap.ok(el("apikey").get_attribute("value") == "", "browser: the key is not kept by default", "")
        el("apikey").send_keys("k1")
        if remember:
            el("remember").click()
        d.refresh()
        out = wait("translation", lambda: el("out").text.strip())
        tap.ok(el("apikey").get_attribute("value") == "k1" and el("remember").is_selected() and bool(out),
               "browser: \"remember\" keeps the key over a reload (and the link's text translates with it)",
               f"{el('apikey').get_attribute('value')!r} {out!r}")
        el("remember").click()
        d.refresh()
        wait("key box", lambda: el("keybox").is_displayed())
        time.sleep(0.3)
        tap.ok(el("apikey").get_attribute("value") == "" and not el("remember").is_selected(),
               "browser: unticking \"remember\" forgets the key", "")
        el("apikey").send_keys("k1")
        # a file error beside the file control, not at the top of the page
        path = os.path.join(tmp, "empty.txt")
        open(path, "w").close()
        el("file").send_keys(path)
        el("sendfile").click()
        ferr = d.find_elements(By.CSS_SELECTOR, "#filebox #fileerror")
        got = wait("file error", lambda: ferr and ferr[0].text)
        tap.ok(bool(got) and got.startswith("empty.txt: ") and "empty.txt" not in el("error").text,
               "browser: a file's error shows beside the file control", f"{got!r} top: {el('error').text!r}")
        retype(el("q"), "A dog.")
        wait("translation", lambda: el("out").text.strip())
        el("q").send_keys(" This is far too long for the limit.")
        err = wait("limit", lambda: "limit" in el("error").text and el("error").text)
        tap.ok(bool(err) and "over" in el("count").get_attribute("class") and el("out").text == "",
               "browser: over the character limit, the count turns red, says why, the old translation goes", f"{err!r}")
    finally:
        d.quit()
        srv.stop()


def guarded(fn, *args):
    """Runs a browser test; an exception (an element that never appeared) is a failure, not a crash."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001
        tap.ok(False, f"{fn.__name__} ran to the end", f"{type(e).__name__}: {str(e)[:600]}")


def main():
    if not os.access(ts.BIN, os.X_OK):
        tap.skip(f"{ts.BIN} not built")
        return tap.done()
    tmp = tempfile.mkdtemp(prefix="deepmt-browser-")
    try:
        srv = ts.Server()
        try:
            test_http(srv.port)
            try:
                import selenium  # noqa: F401
                have = bool(CHROMIUM and DRIVER)
            except ImportError:
                have = False
            if not have:
                tap.skip("chromium, chromium-driver or python3-selenium missing (scripts/deps.sh test installs them)")
            else:
                guarded(test_browser, srv.port, tmp)
                guarded(test_swap_auto, srv.port, tmp)
        finally:
            srv.stop()
        if have:
            guarded(test_browser_errors, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(ts.TMP, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
