/* fuzz_documents.c — libFuzzer target for every document parser and writer of
 * /translate_file (text/documents.h) and the HTML segmenter and renderer
 * (text/html.h).
 *
 * Input: one byte choosing the kind (.txt, .html, .srt, .docx, .odt: byte % 5) and
 * the translations' shape (byte / 5: plain words, markup-like characters, empty),
 * then the file. Checked:
 *   1. dmt_doc_open either refuses with a message or gives texts of valid UTF-8;
 *   2. dmt_doc_write with a translation for each text either writes the file or
 *      refuses with a message; a written .srt/.docx/.odt opens again (the writer
 *      produces files its own reader takes); dmt_doc_write_aligned with a crossed
 *      and out-of-range word alignment writes or refuses with a message too;
 *   3. for HTML, dmt_html_prepare over the file's text and dmt_html_render of every
 *      segment's translation give valid UTF-8, and the rendered page parses again;
 *   4. nothing leaks (ASan's leak check at exit, libFuzzer's -detect_leaks).
 * A failed check aborts, which libFuzzer reports as a crash with the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/utf8.h"
#include "text/documents.h"
#include "text/html.h"

#define REQUIRE(cond, ...)                                                             \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz_documents: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
            abort();                                                                   \
        }                                                                              \
    } while (0)

static const char *const shapes[] = {"Ein Hund läuft", "<b>a & b</b> \"q\" 'x' ]]> --> \x01", ""};

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = b ? (size_t)n : 0;
    return b;
}

static void check_html(const char *text, size_t len, const char *shape) {
    char err[256] = "";
    const char *texts[1] = {text};
    size_t lens[1] = {len};
    dmt_html *h = dmt_html_prepare(texts, lens, 1, 10000, err, sizeof err);
    if (!h) {
        REQUIRE(err[0], "dmt_html_prepare refused without a message");
        return;
    }
    int n = dmt_html_segment_count(h);
    const char **tr = calloc((size_t)n + 1, sizeof *tr);
    size_t *tl = calloc((size_t)n + 1, sizeof *tl);
    REQUIRE(tr && tl, "out of memory");
    for (int i = 0; i < n; i++) {
        size_t sl;
        const char *seg = dmt_html_segment(h, i, &sl);
        REQUIRE(dmt_utf8_validate(seg, sl, NULL), "segment %d is not valid UTF-8", i);
        tr[i] = shape;
        tl[i] = strlen(shape);
    }
    size_t out_len;
    char *out = dmt_html_render(h, 0, tr, tl, &out_len);
    REQUIRE(out, "dmt_html_render failed");
    REQUIRE(dmt_utf8_validate(out, out_len, NULL), "the rendered HTML is not valid UTF-8");
    const char *again[1] = {out};
    dmt_html *h2 = dmt_html_prepare(again, &out_len, 1, 1000000, err, sizeof err);
    REQUIRE(h2, "the rendered HTML does not parse again: %s", err);
    dmt_html_free(h2);
    free(out);
    /* again with word alignments (text/html.h: inline tags placed by them), some out of
     * range, from the input's bytes: the result is still valid UTF-8 and parses */
    int pairs[32], np = len ? 16 : 0;
    for (int k = 0; k < 2 * np; k++) pairs[k] = (int)((unsigned char)text[(size_t)k % len] * 7u + (unsigned)k) % 13 - 2;
    const int **pp = calloc((size_t)n + 1, sizeof *pp);
    int *npp = calloc((size_t)n + 1, sizeof *npp);
    REQUIRE(pp && npp, "out of memory");
    for (int i = 0; i < n; i++) pp[i] = pairs, npp[i] = np;
    out = dmt_html_render_aligned(h, 0, tr, tl, pp, npp, &out_len);
    REQUIRE(out, "dmt_html_render_aligned failed");
    REQUIRE(dmt_utf8_validate(out, out_len, NULL), "the rendered HTML (aligned) is not valid UTF-8");
    again[0] = out;
    h2 = dmt_html_prepare(again, &out_len, 1, 1000000, err, sizeof err);
    REQUIRE(h2, "the rendered HTML (aligned) does not parse again: %s", err);
    dmt_html_free(h2);
    free(out);
    free(pp);
    free(npp);
    free(tr);
    free(tl);
    dmt_html_free(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    dmt_doc_kind kind = (dmt_doc_kind)(data[0] % 5);
    const char *shape = shapes[(data[0] / 5) % 3];
    const char *file = (const char *)data + 1;
    size_t len = size - 1;
    char err[512] = "";
    dmt_doc *d = dmt_doc_open(kind, file, len, err, sizeof err);
    if (!d) {
        REQUIRE(err[0] && dmt_utf8_validate(err, strlen(err), NULL), "refused without a valid message");
        return 0;
    }
    int n = dmt_doc_count(d);
    REQUIRE(n >= 0, "negative count");
    const char **tr = calloc((size_t)n + 1, sizeof *tr);
    size_t *tl = calloc((size_t)n + 1, sizeof *tl);
    REQUIRE(tr && tl, "out of memory");
    for (int i = 0; i < n; i++) {
        size_t l;
        const char *t = dmt_doc_text(d, i, &l);
        REQUIRE(t && dmt_utf8_validate(t, l, NULL), "text %d of a kind %d document is not valid UTF-8", i, kind);
        if (dmt_doc_is_html(d) && i == 0) check_html(t, l, shape);
        tr[i] = shape;
        tl[i] = strlen(shape);
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_documents.%d", (int)getpid());
    err[0] = 0;
    if (dmt_doc_write(d, tr, tl, path, err, sizeof err) == 0) {
        if (kind == DMT_DOC_SRT || kind == DMT_DOC_DOCX || kind == DMT_DOC_ODT) {
            size_t out_len;
            char *out = read_file(path, &out_len);
            REQUIRE(out, "the written file cannot be read back");
            char err2[512] = "";
            dmt_doc *again = dmt_doc_open(kind, out, out_len, err2, sizeof err2);
            /* a writer's file may only be refused by the size rules, never as malformed */
            REQUIRE(again || strstr(err2, "limit") || strstr(err2, "refused") || strstr(err2, "no text")
                        || strstr(err2, "timing"),
                    "a written kind %d file does not open again: %s", kind, err2);
            dmt_doc_free(again);
            free(out);
        }
    } else {
        REQUIRE(err[0], "dmt_doc_write failed without a message");
    }
    /* again with a word alignment that crosses itself and points past both ends
     * (runs and subtitle markup take their words by it) */
    static const int crossed[] = {0, 6, 1, 5, 2, 4, 3, 3, 4, 2, 5, 1, 6, 0, 99, 0, 0, 99, -1, 2};
    const int **pairs = calloc((size_t)n + 1, sizeof *pairs);
    int *n_pairs = calloc((size_t)n + 1, sizeof *n_pairs);
    REQUIRE(pairs && n_pairs, "out of memory");
    for (int i = 0; i < n; i++) pairs[i] = crossed, n_pairs[i] = (int)(sizeof crossed / sizeof *crossed / 2);
    err[0] = 0;
    if (dmt_doc_write_aligned(d, tr, tl, pairs, n_pairs, path, err, sizeof err) != 0)
        REQUIRE(err[0], "dmt_doc_write_aligned failed without a message");
    free(pairs);
    free(n_pairs);
    unlink(path);
    free(tr);
    free(tl);
    dmt_doc_free(d);
    return 0;
}
