/* test_html.c — text/html.c's literals: an inline <code>, <kbd>, <samp> or <var>
 * inside a sentence is kept byte for byte, out of the text the model translates,
 * and put back between the translated words: after the target word aligned to the
 * source word before it, with the source's spacing, before the punctuation it was
 * glued to, and inside the elements that held it (an element holding nothing but a
 * literal keeps it; an <a> that starts or ends with one keeps it at that edge).
 *
 * Each case prepares one HTML text, checks the segment the model would see, and
 * renders a given translation with a given word alignment (pairs: segment word,
 * translation word), comparing the page byte for byte. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "text/html.h"

/* Prepares html, puts its only segment's text in seen (or "" / "(n segments)"),
 * renders tr with the alignment and returns the page (malloc'd) or NULL. */
static char *render(const char *html, const char *tr, const int *pairs, int n_pairs, char *seen, size_t cap) {
    const char *texts[1] = {html};
    size_t lens[1] = {strlen(html)};
    char err[256] = "";
    dmt_html *h = dmt_html_prepare(texts, lens, 1, 100, err, sizeof err);
    seen[0] = 0;
    if (!h) {
        printf("# prepare: %s\n", err);
        return NULL;
    }
    int n = dmt_html_segment_count(h);
    const char *trs[1] = {tr};
    size_t tls[1] = {strlen(tr)};
    const int *ps[1] = {pairs};
    int nps[1] = {n_pairs};
    char *page = NULL;
    size_t len;
    if (n == 1) {
        size_t l;
        const char *t = dmt_html_segment(h, 0, &l);
        snprintf(seen, cap, "%.*s", (int)l, t);
        page = dmt_html_render_aligned(h, 0, trs, tls, pairs ? ps : NULL, pairs ? nps : NULL, &len);
    } else {
        snprintf(seen, cap, "(%d segments)", n);
        if (n == 0) page = dmt_html_render(h, 0, trs, tls, &len);
    }
    dmt_html_free(h);
    return page;
}

/* Checks one case: the segment text and the rendered page. */
static void expect(const char *what, const char *html, const char *want_seen, const char *tr, const int *pairs,
                   int n_pairs, const char *want_page) {
    char seen[512], label[256];
    char *page = render(html, tr, pairs, n_pairs, seen, sizeof seen);
    snprintf(label, sizeof label, "%s: the model reads \"%s\"", what, want_seen);
    CHECK(!strcmp(seen, want_seen), label, "[%s]", seen);
    snprintf(label, sizeof label, "%s: %s", what, want_page);
    CHECK(page && !strcmp(page, want_page), label, "[%s]", page ? page : "(null)");
    free(page);
}

int main(void) {
    {   /* Download(0) the(1) binary.(2) -> Lade(0) die(1) Binärdatei(2) herunter.(3) */
        static const int pairs[] = {0, 0, 0, 3, 1, 1, 2, 2};
        expect("code in a sentence", "<p>Download the <code>deepmt</code> binary.</p>", "Download the binary.",
               "Lade die Binärdatei herunter.", pairs, 4,
               "<p>Lade die <code>deepmt</code> Binärdatei herunter.</p>");
    }
    {   /* Run.(0) -> Führe(0) aus.(1): glued to the full stop, it stays before it */
        static const int pairs[] = {0, 0, 0, 1};
        expect("code before a full stop", "<p>Run <code>make serve</code>.</p>", "Run.", "Führe aus.", pairs, 2,
               "<p>Führe aus <code>make serve</code>.</p>");
    }
    {
        static const int pairs[] = {0, 0, 1, 1, 2, 2, 2, 3};
        expect("code first", "<p><code>f()</code> returns a list.</p>", "returns a list.", "gibt eine Liste zurück.",
               pairs, 4, "<p><code>f()</code> gibt eine Liste zurück.</p>");
    }
    {   /* an element holding only a literal keeps it, and the space after them */
        static const int pairs[] = {0, 0, 1, 1, 2, 2};
        expect("code in bold", "<p>Use the <b><code>--threads</code></b> option.</p>", "Use the option.",
               "Nutze die Option.", pairs, 3, "<p>Nutze die <b><code>--threads</code></b> Option.</p>");
    }
    {   /* a link that starts with a literal: the literal stays inside, at its start */
        static const int pairs[] = {0, 0, 1, 1, 2, 2};
        expect("code opening a link", "<p>See the <a href=\"/api\"><code>/translate</code> endpoint</a>.</p>",
               "See the endpoint.", "Siehe den Endpunkt.", pairs, 3,
               "<p>Siehe den <a href=\"/api\"><code>/translate</code> Endpunkt</a>.</p>");
    }
    {   /* ... and one that ends with it: inside, at its end */
        static const int pairs[] = {0, 0, 1, 1, 2, 2};
        expect("code closing a link", "<p>Call the <a href=\"/f\">function <code>f</code></a> now.</p>",
               "Call the function now.", "Ruf die Funktion jetzt auf.", pairs, 3,
               "<p>Ruf die <a href=\"/f\">Funktion <code>f</code></a> jetzt auf.</p>");
    }
    {   /* kbd, samp and var are literals too (they used to split the sentence) */
        static const int pairs[] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4};
        expect("kbd", "<p>Press <kbd>Ctrl</kbd>+<kbd>C</kbd> to copy.</p>", "Press + to copy.",
               "Drücke + zum Kopieren.", pairs, 5, "<p>Drücke <kbd>Ctrl</kbd>+<kbd>C</kbd> zum Kopieren.</p>");
        static const int pairs2[] = {0, 0, 1, 1, 2, 2, 3, 3};
        expect("var and samp", "<p>Set <var>n</var> until <samp>OK</samp> appears.</p>", "Set until appears.",
               "Setze bis erscheint.", pairs2, 3, "<p>Setze <var>n</var> bis <samp>OK</samp> erscheint.</p>");
    }
    {   /* without an alignment: where it sat in proportion (after 2 of 3 words: before word 2 of 4) */
        expect("no alignment", "<p>Download the <code>deepmt</code> binary.</p>", "Download the binary.",
               "Lade die Binärdatei herunter.", NULL, 0, "<p>Lade die <code>deepmt</code> Binärdatei herunter.</p>");
    }
    {   /* an alignment that points nowhere: the literal still comes back, once */
        static const int pairs[] = {99, 0, 1, 99, -3, -3};
        char seen[256];
        char *page = render("<p>Download the <code>deepmt</code> binary.</p>", "Lade die Binärdatei herunter.",
                            pairs, 3, seen, sizeof seen);
        const char *at = page ? strstr(page, "<code>deepmt</code>") : NULL;
        CHECK(at && !strstr(at + 1, "<code>") && strstr(page, "Lade") && strstr(page, "herunter."),
              "a bad alignment: the literal once, every word", "[%s]", page ? page : "(null)");
        free(page);
    }
    {   /* a literal alone, or with no letter around it, is not a sentence: left as it is */
        expect("code alone", "<p><code>x = 1</code></p>", "(0 segments)", "", NULL, 0, "<p><code>x = 1</code></p>");
        expect("code and a sign", "<p><kbd>Ctrl</kbd> + <kbd>C</kbd></p>", "(0 segments)", "", NULL, 0,
               "<p><kbd>Ctrl</kbd> + <kbd>C</kbd></p>");
    }
    {   /* <code> never closed: as before, an ordinary inline element (translated) */
        char seen[256];
        char *page = render("<p>Use the <code>tool", "Nutze das Werkzeug", NULL, 0, seen, sizeof seen);
        CHECK(!strcmp(seen, "Use the tool") && page && strstr(page, "Werkzeug"),
              "an unclosed <code>: translated with its sentence", "[%s] [%s]", seen, page ? page : "(null)");
        free(page);
    }
    return check_done();
}
