/* test_documents.c — text/documents.c: a .docx paragraph split over runs gets the
 * translation's words by the word alignment, the runs in their order.
 *
 * Each case builds a one-paragraph .docx (plain run, bold run, plain run), gives
 * dmt_doc_write_aligned a translation and a word alignment, and reads the runs'
 * texts back from the written archive:
 *   - a translation in the source's order puts exactly the bold word's translation
 *     in the bold run;
 *   - one that moves the bold word past its neighbour ("a red hat" -> "un chapeau
 *     rouge") ties on agreements between the bold run taking the word with its
 *     neighbour and the bold run left empty: the bold run must take it;
 *   - without an alignment all of the text goes into the first run;
 *   - every run stays (same number of w:r and w:t), the text is whole.
 * A subtitle's markup (<i>, </font>, {\an8}) is cut out of the text the model sees
 * and put back around the words aligned to the text it framed, the same way:
 * srt_roundtrip opens a one-subtitle .srt, checks the text to translate and writes
 * the translation with an alignment (or none). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include "check.h"
#include "text/documents.h"

#define NS "http://schemas.openxmlformats.org/wordprocessingml/2006/main"

/* a .docx in memory: [Content_Types].xml and word/document.xml with one paragraph of three runs */
static char *make_docx(const char *pre, const char *bold, const char *post, size_t *len) {
    char xml[2048];
    snprintf(xml, sizeof xml,
             "<?xml version=\"1.0\" encoding=\"UTF-8\"?><w:document xmlns:w=\"" NS "\"><w:body><w:p>"
             "<w:r><w:t xml:space=\"preserve\">%s</w:t></w:r>"
             "<w:r><w:rPr><w:b/></w:rPr><w:t>%s</w:t></w:r>"
             "<w:r><w:t xml:space=\"preserve\">%s</w:t></w:r>"
             "</w:p></w:body></w:document>",
             pre, bold, post);
    char path[] = "/tmp/deepmt-test-docx-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    close(fd);
    int err = 0;
    zip_t *z = zip_open(path, ZIP_TRUNCATE, &err);
    zip_source_t *a = z ? zip_source_buffer(z, "<Types/>", 8, 0) : NULL;
    if (a && zip_file_add(z, "[Content_Types].xml", a, 0) < 0) zip_source_free(a);
    zip_source_t *b = z ? zip_source_buffer(z, xml, strlen(xml), 0) : NULL;
    if (b && zip_file_add(z, "word/document.xml", b, 0) < 0) zip_source_free(b);
    char *data = NULL;
    if (z && zip_close(z) == 0) {
        FILE *f = fopen(path, "rb");
        if (f && fseek(f, 0, SEEK_END) == 0) {
            long n = ftell(f);
            rewind(f);
            data = malloc((size_t)n);
            if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
                free(data);
                data = NULL;
            }
            *len = (size_t)n;
        }
        if (f) fclose(f);
    }
    unlink(path);
    return data;
}

/* The texts of the w:t elements of the written file's word/document.xml, in order
 * (at most 8, each at most 127 bytes). The number found, or -1. */
static int read_runs(const char *path, char runs[8][128], int *n_runs) {
    int err = 0, n = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY, &err);
    if (!z) return -1;
    zip_file_t *f = zip_fopen(z, "word/document.xml", 0);
    static char xml[8192];
    zip_int64_t got = f ? zip_fread(f, xml, sizeof xml - 1) : -1;
    if (f) zip_fclose(f);
    zip_close(z);
    if (got < 0) return -1;
    xml[got] = 0;
    *n_runs = 0;
    for (const char *p = xml; (p = strstr(p, "<w:r>")); p++) (*n_runs)++; /* the writer adds no attributes */
    for (const char *p = xml; (p = strstr(p, "<w:t")) && n < 8; p++) {
        if (p[4] != '>' && p[4] != ' ' && p[4] != '/') continue;
        const char *end = strchr(p, '>');
        if (!end) break;
        runs[n][0] = 0;
        if (end[-1] != '/') { /* <w:t/> is an empty run */
            const char *close = strstr(end, "</w:t>");
            if (!close) break;
            size_t len = (size_t)(close - end - 1);
            if (len > 127) len = 127;
            memcpy(runs[n], end + 1, len);
            runs[n][len] = 0;
        }
        n++;
    }
    return n;
}

/* Writes d's only text translated as tr (with the alignment pairs, or none) to a new
 * temporary file named from the template out. 0, or -1 with a message in err. */
static int write_translation(dmt_doc *d, const char *tr, const int *pairs, int n_pairs, char *out, char *err,
                             size_t errlen) {
    int fd = mkstemp(out);
    if (fd < 0) return -1;
    close(fd);
    const char *trs[1] = {tr};
    size_t tls[1] = {strlen(tr)};
    const int *ps[1] = {pairs};
    int nps[1] = {n_pairs};
    return dmt_doc_write_aligned(d, trs, tls, pairs ? ps : NULL, pairs ? nps : NULL, out, err, errlen);
}

/* Translates the three-run paragraph pre|bold|post into tr with the alignment
 * pairs (source word, target word), and reads the runs back. */
static int translate_runs(const char *pre, const char *bold, const char *post, const char *tr, const int *pairs,
                          int n_pairs, char runs[8][128], int *n_runs) {
    size_t len = 0;
    char *data = make_docx(pre, bold, post, &len);
    char err[256] = "";
    dmt_doc *d = data ? dmt_doc_open(DMT_DOC_DOCX, data, len, err, sizeof err) : NULL;
    if (!d || dmt_doc_count(d) != 1) {
        printf("# open: %s\n", err);
        dmt_doc_free(d);
        free(data);
        return -1;
    }
    char out[] = "/tmp/deepmt-test-docx-out-XXXXXX";
    int rc = write_translation(d, tr, pairs, n_pairs, out, err, sizeof err);
    int n = rc == 0 ? read_runs(out, runs, n_runs) : -1;
    if (rc) printf("# write: %s\n", err);
    unlink(out);
    dmt_doc_free(d);
    free(data);
    return n;
}

/* Opens a one-subtitle .srt of `text`, puts the text to translate in seen, writes tr
 * (with the alignment pairs, or none) and puts the written subtitle's text line in
 * got. 0, or -1 when the file is refused or not written. */
static int srt_roundtrip(const char *text, const char *tr, const int *pairs, int n_pairs, char *seen, char *got,
                         size_t cap) {
    char data[1024], err[256] = "";
    snprintf(data, sizeof data, "1\r\n00:00:01,000 --> 00:00:02,000\r\n%s\r\n\r\n", text);
    dmt_doc *d = dmt_doc_open(DMT_DOC_SRT, data, strlen(data), err, sizeof err);
    seen[0] = got[0] = 0;
    if (!d || dmt_doc_count(d) != 1) {
        printf("# open: %s\n", err);
        dmt_doc_free(d);
        return -1;
    }
    size_t l;
    const char *t = dmt_doc_text(d, 0, &l);
    snprintf(seen, cap, "%.*s", (int)l, t);
    char out[] = "/tmp/deepmt-test-srt-out-XXXXXX";
    int rc = write_translation(d, tr, pairs, n_pairs, out, err, sizeof err);
    FILE *f = rc == 0 ? fopen(out, "rb") : NULL;
    char file[2048] = "";
    size_t n = f ? fread(file, 1, sizeof file - 1, f) : 0;
    file[n] = 0;
    if (f) fclose(f);
    /* the text line: after the timing line, up to its CRLF */
    const char *at = strstr(file, "000\r\n");
    at = at ? at + 5 : NULL;
    const char *end = at ? strstr(at, "\r\n") : NULL;
    if (at && end) snprintf(got, cap, "%.*s", (int)(end - at), at);
    if (rc) printf("# write: %s\n", err);
    unlink(out);
    dmt_doc_free(d);
    return rc || !at || !end ? -1 : 0;
}

static void srt_cases(void) {
    char seen[512], got[512];
    {   /* Where(0) is(1) the(2) train(3) station?(4) -> Wo(0) ist(1) der(2) Bahnhof?(3) */
        static const int pairs[] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 3};
        int rc = srt_roundtrip("Where is the <b>train station</b>?", "Wo ist der Bahnhof?", pairs, 5, seen, got,
                               sizeof seen);
        CHECK(rc == 0 && !strcmp(seen, "Where is the train station?"), "srt: the model sees the words without the tags",
              "%d [%s]", rc, seen);
        CHECK(!strcmp(got, "Wo ist der <b>Bahnhof</b>?"),
              "srt: the bold tags around the aligned word, the question mark after them as in the source", "[%s]", got);
    }
    {   /* the French space before '?' goes after the closing tag with the mark */
        static const int pairs[] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 3, 4, 4};
        srt_roundtrip("Where is the <b>train station</b>?", "Où est la gare ?", pairs, 6, seen, got, sizeof seen);
        CHECK(!strcmp(got, "Où est la <b>gare</b> ?"), "srt: \"la <b>gare</b> ?\", not \"la <b>gare ?</b>\"", "[%s]",
              got);
    }
    {
        srt_roundtrip("<i>I am looking for my keys.</i>", "Ich suche meine Schlüssel.", NULL, 0, seen, got,
                      sizeof seen);
        CHECK(!strcmp(seen, "I am looking for my keys.") && !strcmp(got, "<i>Ich suche meine Schlüssel.</i>"),
              "srt: an italic subtitle stays italic, without an alignment too", "[%s] [%s]", seen, got);
    }
    {   /* two lines, each its own markup; {\an8} (top of the screen) stays first */
        static const int pairs[] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6};
        srt_roundtrip("{\\an8}<font color=\"#ffff00\">A man is riding</font>\r\n<i>a red bike.</i>",
                      "Ein Mann fährt ein rotes Fahrrad.", pairs, 7, seen, got, sizeof seen);
        CHECK(!strcmp(seen, "A man is riding a red bike."), "srt: tags and override blocks cut from both lines", "[%s]",
              seen);
        CHECK(!strcmp(got, "{\\an8}<font color=\"#ffff00\">Ein Mann fährt ein</font> <i>rotes Fahrrad.</i>"),
              "srt: each line's markup back around its words, the space outside the closing tag", "[%s]", got);
    }
    {   /* not markup: a lone '<', a '>' , a '{' without a backslash, a tag never closed */
        srt_roundtrip("If x < 3 and y > 2 {ok} <i stop", "Wenn x < 3 und y > 2 {ok} <i halt", NULL, 0, seen, got,
                      sizeof seen);
        CHECK(!strcmp(seen, "If x < 3 and y > 2 {ok} <i stop") && !strcmp(got, "Wenn x < 3 und y > 2 {ok} <i halt"),
              "srt: comparison signs, braces and an unclosed tag are text", "[%s] [%s]", seen, got);
    }
    {   /* nothing but markup: kept, nothing to translate */
        int rc = srt_roundtrip("<i></i>", "", NULL, 0, seen, got, sizeof seen);
        CHECK(rc == 0 && !seen[0] && !strcmp(got, "<i></i>"), "srt: a subtitle of markup only is written back as it was",
              "%d [%s] [%s]", rc, seen, got);
    }
    {   /* an alignment that points outside the sentence is ignored, the text stays whole */
        static const int pairs[] = {0, 0, 99, 1, 1, 99, -1, 0};
        srt_roundtrip("A <b>red</b> hat.", "Ein roter Hut.", pairs, 4, seen, got, sizeof seen);
        char plain[512];
        size_t o = 0;
        for (const char *c = got; *c && o + 1 < sizeof plain; c++) /* the tags taken out again */
            if (*c == '<') c = strchr(c, '>') ? strchr(c, '>') : c + strlen(c) - 1;
            else plain[o++] = *c;
        plain[o] = 0;
        CHECK(!strcmp(plain, "Ein roter Hut.") && strstr(got, "<b>") && strstr(got, "</b>"),
              "srt: a bad alignment loses no word and no tag", "[%s]", got);
    }
}

int main(void) {
    srt_cases();
    char runs[8][128];
    int n_runs = 0, n;

    /* source words: A(0) red(1) hat(2) on(3) the(4) table.(5) */
    {
        static const int pairs[] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5};
        n = translate_runs("A ", "red", " hat on the table.", "Ein roter Hut auf dem Tisch.", pairs, 6, runs, &n_runs);
        CHECK(n == 3 && n_runs == 3, "in order: three runs stay three runs", "%d texts, %d runs", n, n_runs);
        CHECK(n == 3 && !strcmp(runs[0], "Ein ") && !strcmp(runs[1], "roter ") &&
                  !strcmp(runs[2], "Hut auf dem Tisch."),
              "in order: the bold run holds exactly the bold word's translation", "[%s|%s|%s]", runs[0], runs[1],
              runs[2]);
    }
    {   /* Un(0) chapeau(1) rouge(2) sur(3) la(4) table.(5): red -> rouge moved past hat -> chapeau */
        static const int pairs[] = {0, 0, 2, 1, 1, 2, 3, 3, 4, 4, 5, 5};
        n = translate_runs("A ", "red", " hat on the table.", "Un chapeau rouge sur la table.", pairs, 6, runs, &n_runs);
        CHECK(n == 3 && n_runs == 3, "reordered: three runs stay three runs", "%d texts, %d runs", n, n_runs);
        CHECK(n == 3 && strstr(runs[1], "rouge") != NULL, "reordered: the bold run takes the moved word, not nothing",
              "[%s|%s|%s]", runs[0], runs[1], runs[2]);
        char whole[400];
        snprintf(whole, sizeof whole, "%s%s%s", runs[0], runs[1], runs[2]);
        CHECK(n == 3 && !strcmp(whole, "Un chapeau rouge sur la table."), "reordered: the runs hold the whole text, in order",
              "%s", whole);
    }
    {   /* no alignment: all in the first run, the others emptied */
        n = translate_runs("A ", "red", " hat on the table.", "Un chapeau rouge sur la table.", NULL, 0, runs, &n_runs);
        CHECK(n == 3 && !strcmp(runs[0], "Un chapeau rouge sur la table.") && !runs[1][0] && !runs[2][0],
              "no alignment: the translation in the first run", "%d [%s|%s|%s]", n, runs[0], runs[1], runs[2]);
    }
    return check_done();
}
