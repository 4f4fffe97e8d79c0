/* marks.c — a sentence's final run of marks kept whole (marks.h). */
#include "model/marks.h"

#include <stdlib.h>
#include <string.h>

static int is_mark(char c) { return c == '.' || c == '!' || c == '?'; }

static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* The length of the closing quote or bracket that ends s[0..n), or 0: ASCII " ' ) ]
 * and » ” ’ “ (German closes with “). */
static size_t closer_before(const char *s, size_t n) {
    if (n >= 1 && strchr("\"')]", s[n - 1]) && s[n - 1]) return 1;
    static const char *const wide[] = {"\xC2\xBB", "\xE2\x80\x9D", "\xE2\x80\x99", "\xE2\x80\x9C"};
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) {
        size_t k = strlen(wide[i]);
        if (n >= k && !memcmp(s + n - k, wide[i], k)) return k;
    }
    return 0;
}

/* Where the tail of s[0..n) starts: its closing quotes, brackets and white space. */
static size_t tail_start(const char *s, size_t n) {
    for (;;) {
        size_t k = 0;
        if (n > 0 && is_space(s[n - 1])) k = 1;
        else k = closer_before(s, n);
        if (!k) return n;
        n -= k;
    }
}

int dmt_marks_find(const char *text, size_t len, dmt_marks *m) {
    memset(m, 0, sizeof *m);
    size_t end = tail_start(text, len), start = end;
    while (start > 0 && is_mark(text[start - 1])) start--;
    size_t n = end - start;
    if (n < 2 || n > DMT_MARKS_MAX || start == 0) return 0;
    /* one space between the word and its run ("Super !!!", "10/10 !!!") is the
     * writer's spacing: the model gets the mark on its word, the run comes back
     * with the space */
    size_t word_end = start;
    if (start >= 2 && text[start - 1] == ' ' && !is_space(text[start - 2])) word_end--;
    unsigned char before = (unsigned char)text[word_end - 1];
    /* after a word: a letter or digit, or the last byte of a wider character */
    int word = (before >= '0' && before <= '9') || ((before | 32) >= 'a' && (before | 32) <= 'z') || before >= 0x80;
    if (!word) return 0;
    m->start = word_end;
    m->len = end - word_end;
    m->spaced = word_end < start;
    memcpy(m->run, text + start, n);
    m->run[n] = 0;
    m->marks = n;
    m->single = memchr(m->run, '?', n) ? '?' : memchr(m->run, '!', n) ? '!' : '.';
    return 1;
}

/* a + b + c into one malloc'd string */
static char *join3(const char *a, size_t na, const char *b, size_t nb, const char *c, size_t nc, size_t *out_len) {
    char *out = malloc(na + nb + nc + 1);
    if (!out) return NULL;
    memcpy(out, a, na);
    memcpy(out + na, b, nb);
    memcpy(out + na + nb, c, nc);
    out[na + nb + nc] = 0;
    *out_len = na + nb + nc;
    return out;
}

char *dmt_marks_strip(const char *text, size_t len, const dmt_marks *m, size_t *out_len) {
    return join3(text, m->start, &m->single, 1, text + m->start + m->len, len - m->start - m->len, out_len);
}

char *dmt_marks_restore(const char *tr, size_t len, const dmt_marks *m, size_t *out_len) {
    size_t end = tail_start(tr, len), start = end;
    while (start > 0 && is_mark(tr[start - 1])) start--;
    /* the source's space before its run, unless the translation has one there */
    char run[DMT_MARKS_MAX + 2];
    size_t n = 0;
    if (m->spaced && start > 0 && !is_space(tr[start - 1])) run[n++] = ' ';
    memcpy(run + n, m->run, m->marks);
    n += m->marks;
    return join3(tr, start, run, n, tr + end, len - end, out_len);
}
