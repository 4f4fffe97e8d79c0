/* casing.c — all-caps detection and case mapping over UTF-8 (casing.h). */
#include "model/casing.h"

#include <locale.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

#include "base/utf8.h"

/* The C.UTF-8 locale for towlower_l/towupper_l, made once; (locale_t)0 when the
 * system lacks it, then only ASCII letters change case. Read-only after the once. */
static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;
static void utf8_locale_init(void) {
    utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (!utf8_locale) utf8_locale = newlocale(LC_CTYPE_MASK, "C.utf8", (locale_t)0);
}
static locale_t loc(void) {
    pthread_once(&utf8_once, utf8_locale_init);
    return utf8_locale;
}

/* Decodes the code point at s (valid UTF-8 assumed); its byte length in *n. */
static uint32_t decode(const unsigned char *s, int *n) {
    if (s[0] < 0x80) { *n = 1; return s[0]; }
    if (s[0] < 0xE0) { *n = 2; return (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F); }
    if (s[0] < 0xF0) { *n = 3; return (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F); }
    *n = 4;
    return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
}

static int encode(uint32_t c, char *o) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | c >> 6); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12); o[1] = (char)(0x80 | (c >> 6 & 0x3F)); o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | c >> 18); o[1] = (char)(0x80 | (c >> 12 & 0x3F));
    o[2] = (char)(0x80 | (c >> 6 & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

static int is_upper(uint32_t c) {
    locale_t l = loc();
    return l ? !!iswupper_l((wint_t)c, l) : (c >= 'A' && c <= 'Z');
}
static int is_lower(uint32_t c) {
    locale_t l = loc();
    return l ? !!iswlower_l((wint_t)c, l) : (c >= 'a' && c <= 'z');
}
static uint32_t to_lower(uint32_t c) {
    locale_t l = loc();
    return l ? (uint32_t)towlower_l((wint_t)c, l) : (c >= 'A' && c <= 'Z' ? c + 32 : c);
}
static uint32_t to_upper(uint32_t c) {
    locale_t l = loc();
    return l ? (uint32_t)towupper_l((wint_t)c, l) : (c >= 'a' && c <= 'z' ? c - 32 : c);
}

int dmt_casing_is_all_caps(const char *s, size_t len) {
    if (!dmt_utf8_validate(s, len, NULL)) return 0;
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    int upper = 0, n;
    while (p < end) {
        uint32_t c = decode(p, &n);
        p += n;
        if (is_lower(c)) return 0;
        upper += is_upper(c);
    }
    return upper >= DMT_CASING_MIN_UPPER;
}

/* mode 0: upper; 1: sentence case. A simple case mapping changes a code point's
 * UTF-8 length by at most one byte per two (2 <-> 3 bytes), so 2*len + 1 suffices. */
static char *map(const char *s, size_t len, size_t *out_len, int mode) {
    if (!dmt_utf8_validate(s, len, NULL)) return NULL;
    char *out = malloc(2 * len + 1);
    if (!out) return NULL;
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    size_t o = 0;
    int start = 1, after_stop = 0, n;
    while (p < end) {
        uint32_t c = decode(p, &n);
        p += n;
        uint32_t m = c;
        if (mode == 0) m = to_upper(c);
        else if (mode == 2) m = to_lower(c);
        else if (is_upper(c) || is_lower(c)) {
            m = start ? to_upper(c) : to_lower(c);
            start = 0;
        }
        if (mode == 1) {
            if (c == '.' || c == '!' || c == '?') after_stop = 1;
            else if ((c == ' ' || c == '\t' || c == '\n') && after_stop) start = 1;
            else if (!(c == '"' || c == '\'' || c == ')')) after_stop = 0;
        }
        if (m > 0x10FFFF || (m >= 0xD800 && m <= 0xDFFF)) m = c;
        o += (size_t)encode(m, out + o);
    }
    out[o] = '\0';
    if (out_len) *out_len = o;
    return out;
}

char *dmt_casing_sentence_case(const char *s, size_t len, size_t *out_len) { return map(s, len, out_len, 1); }

static int is_space_byte(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

char *dmt_casing_true_case(const char *s, size_t len, size_t *out_len, dmt_casing_known_fn known, void *arg) {
    size_t n = 0;
    char *sc = map(s, len, &n, 1);
    if (!sc || !known) {
        if (sc && out_len) *out_len = n;
        return sc;
    }
    /* one first letter a word may grow by a byte (2 <-> 3 bytes): n more at most */
    char *out = malloc(2 * n + 1);
    if (!out) {
        free(sc);
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (is_space_byte((unsigned char)sc[i])) { out[o++] = sc[i++]; continue; }
        size_t end = i;
        while (end < n && !is_space_byte((unsigned char)sc[end])) end++;
        /* the letters: after leading non-letters, up to the first non-letter */
        size_t a = i, b;
        int k;
        while (a < end) {
            uint32_t c = decode((const unsigned char *)sc + a, &k);
            if (is_upper(c) || is_lower(c)) break;
            a += (size_t)k;
        }
        for (b = a; b < end; b += (size_t)k) {
            uint32_t c = decode((const unsigned char *)sc + b, &k);
            if (!is_upper(c) && !is_lower(c)) break;
        }
        memcpy(out + o, sc + i, a - i);
        o += a - i;
        if (b > a) {
            uint32_t first = decode((const unsigned char *)sc + a, &k), cap = to_upper(first);
            char capital[256];
            int m = encode(cap, capital);
            size_t rest = b - a - (size_t)k;
            if (is_lower(first) && cap != first && cap <= 0x10FFFF && !(cap >= 0xD800 && cap <= 0xDFFF) &&
                (size_t)m + rest < sizeof capital) {
                memcpy(capital + m, sc + a + k, rest);
                if (known(arg, capital, (size_t)m + rest) && !known(arg, sc + a, b - a)) {
                    memcpy(out + o, capital, (size_t)m);
                    o += (size_t)m;
                    a += (size_t)k;
                }
            }
        }
        memcpy(out + o, sc + a, end - a);
        o += end - a;
        i = end;
    }
    out[o] = 0;
    free(sc);
    if (out_len) *out_len = o;
    return out;
}
char *dmt_casing_upper(const char *s, size_t len, size_t *out_len) { return map(s, len, out_len, 0); }

char *dmt_casing_lower(const char *s, size_t len, size_t *out_len) { return map(s, len, out_len, 2); }
