#!/usr/bin/python3
"""The web page at GET / in a real headless browser (TAP): Debian's chromium and
chromium-driver through python3-selenium (scripts/deps.sh test installs them;
skipped with a message where they are missing). Types text and gets a
translation as you type, auto-detect shows the language, swap, the character
count against the limit, an error shown (a server with API keys and a wrong
key), a file translated and downloaded; the page loads nothing from elsewhere.
Also without a browser: browsers get the page, API clients the JSON banner.
DEEPMT_SCREENSHOT=path saves a PNG of the page.
"""

import json
import os
import shutil
import sys
import tempfile
import time
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
        el("swap").click()
        ok = wait("swap", lambda: Select(el("source")).first_selected_option.get_attribute("value") == "en"
                  and Select(el("target")).first_selected_option.get_attribute("value") == "de")
        tap.ok(ok and el("q").get_attribute("value") == out, "browser: swap exchanges languages and texts",
               f"{Select(el('source')).first_selected_option.text} {Select(el('target')).first_selected_option.text}")
        el("q").send_keys(Keys.CONTROL, Keys.ENTER)
        tap.ok(bool(wait("alts", lambda: el("altbox").is_displayed())), "browser: alternatives are listed", "")
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
        logs = d.get_log("browser") if hasattr(d, "get_log") else []
        tap.ok(not [l for l in logs if l.get("level") == "SEVERE"], "browser: no errors in the console", f"{logs}")
    finally:
        d.quit()


def test_browser_errors(tmp):
    srv = ts.Server("--max-chars", "40", env={"DEEPMT_API_KEYS": "k1"})
    from selenium.webdriver.common.by import By
    d = browser(tmp)
    try:
        d.get(f"http://127.0.0.1:{srv.port}/")
        el = lambda i: d.find_element(By.ID, i)  # noqa: E731
        shown = wait("key box", lambda: el("keybox").is_displayed())
        tap.ok(bool(shown), "browser: the API-key field shows when the server needs a key", "")
        el("apikey").send_keys("wrong")
        el("q").send_keys("A dog.")
        err = wait("error", lambda: el("error").text)
        tap.ok(err == "Invalid API key", "browser: a server error is shown (wrong API key)", f"{err!r}")
        el("apikey").clear()
        el("apikey").send_keys("k1")
        el("q").send_keys(" And a cat.")
        out = wait("translation", lambda: not el("error").text and el("out").text.strip())
        tap.ok(bool(out), "browser: with the right key it translates and the error goes", f"{el('error').text!r}")
        el("q").send_keys(" This is far too long for the limit.")
        err = wait("limit", lambda: "limit" in el("error").text and el("error").text)
        tap.ok(bool(err) and "over" in el("count").get_attribute("class"),
               "browser: over the character limit, the count turns red and says why", f"{err!r}")
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
