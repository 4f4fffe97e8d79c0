/* numbers.c — grouped numbers given to the model as plain digits and put back as
 * written (numbers.h). */
#include "model/numbers.h"

#include "base/words.h"

#include <stdlib.h>
#include <string.h>

static int is_digit(char c) { return c >= '0' && c <= '9'; }


/* The length of a group separator at s[j] (',' '.' '\'' ' ' U+00A0 U+2009 U+202F), or 0. */
static size_t separator_at(const char *s, size_t len, size_t j) {
    const unsigned char *u = (const unsigned char *)s + j;
    if (j >= len) return 0;
    if (u[0] == ',' || u[0] == '.' || u[0] == '\'' || u[0] == ' ') return 1;
    if (j + 1 < len && u[0] == 0xC2 && u[1] == 0xA0) return 2;
    if (j + 2 < len && u[0] == 0xE2 && u[1] == 0x80 && (u[2] == 0xAF || u[2] == 0x89)) return 3;
    return 0;
}

/* Whether a number may start at s[i]: a digit not glued to a word, a number or a
 * separator before it. */
static int starts_number(const char *s, size_t i) {
    if (!is_digit(s[i])) return 0;
    if (i == 0) return 1;
    unsigned char b = (unsigned char)s[i - 1];
    return !is_digit((char)b) && !((b | 32) >= 'a' && (b | 32) <= 'z') && !strchr(",.'", b) && b != 0xA0 &&
           b != 0xAF && b != 0x89;
}

/* The end of the grouped number at s[i] (starts_number), its integer and decimal
 * digit counts in *digits and *decimals; 0 when none starts there. *reach gets the
 * start of the last group looked at: no number starts at a group before it either
 * (one that did would run on after the same separator, end where this one does and
 * fail the same way; "123 123 ... 12" had been read again from each group, n^2). The
 * last group may start one after another separator ("0 123'120.0"). */
static size_t grouped_at(const char *s, size_t len, size_t i, size_t *digits, size_t *decimals, size_t *reach) {
    size_t k = i;
    *reach = i;
    while (k < len && is_digit(s[k]) && k - i < 4) k++;
    if (k - i > 3) return 0;
    size_t sep = separator_at(s, len, k), end = k, groups = 0;
    if (!sep) return 0;
    for (;;) {
        size_t g = end + sep;
        if (separator_at(s, len, end) != sep || memcmp(s + end, s + k, sep) || g + 3 > len || !is_digit(s[g]) ||
            !is_digit(s[g + 1]) || !is_digit(s[g + 2]) || (g + 3 < len && is_digit(s[g + 3])))
            break;
        end = g + 3;
        groups++;
    }
    if (groups < 1) return 0;
    *reach = end - 3;
    size_t dec = 0;
    if (end + 1 < len && (s[end] == ',' || s[end] == '.') && !(sep == 1 && s[end] == s[k]) && is_digit(s[end + 1])) {
        size_t q = end + 1;
        while (q < len && is_digit(s[q])) q++;
        dec = q - end - 1;
        end = q;
    }
    /* one group is a number of several separators only with decimals after the other
     * of ',' '.' ("2,500.50", "2.500,50"; not after a plain space: "in 2 500,5" may be two) */
    if (groups < 2 && (!dec || s[k] == ' ')) return 0;
    /* "1.234.567.8", an address "10.000.000.1", "1 500 000 3", "1,234.5.6": not one; a
     * space before the next number of a list ("1,500,000 2,000,000") does not count */
    size_t after = separator_at(s, len, end);
    if (after && (s[end] != ' ' || (sep == 1 && s[k] == ' ')) && end + after < len && is_digit(s[end + after]))
        return 0;
    *digits = (k - i) + 3 * groups;
    *decimals = dec;
    return end;
}

/* Whether s[0..n) (a grouped number) is four parts of at most 255 after full stops,
 * as an IPv4 address is ("192.168.100.200"; "1.500.000.000" has a part over 255). */
static int ipv4_like(const char *s, size_t n) {
    int parts = 0, value = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && is_digit(s[i])) {
            value = value * 10 + (s[i] - '0');
            continue;
        }
        if (value > 255 || (i < n && s[i] != '.')) return 0;
        parts++;
        value = 0;
    }
    return parts == 4;
}

/* The digits of s[0..n) (separators left out) into out; their count. */
static size_t digits_of(const char *s, size_t n, char *out) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (is_digit(s[i])) out[m++] = s[i];
    return m;
}

const dmt_number_style *dmt_numbers_style(const char *lang) {
    /* CLDR's group and decimal symbols for the language (its default region) */
    static const dmt_number_style comma = {",", "."}, stop = {".", ","}, nbsp = {"\xC2\xA0", ","},
                                  narrow = {"\xE2\x80\xAF", ","}; /* U+00A0, U+202F */
    static const struct {
        const char *langs;
        const dmt_number_style *style;
    } styles[] = {{" en ja zh ko he th ", &comma},
                  {" de es it nl pt da tr id ro el hr sl vi ", &stop},
                  {" cs sk pl ru uk sv fi nb no hu bg lt lv et ", &nbsp},
                  {" fr ", &narrow}};
    char key[8];
    size_t n = lang ? strlen(lang) : 0;
    if (n == 0 || n > 3 || strchr(lang, ' ')) return NULL;
    key[0] = ' ';
    memcpy(key + 1, lang, n);
    key[n + 1] = ' ';
    key[n + 2] = 0;
    for (size_t i = 0; i < sizeof styles / sizeof styles[0]; i++)
        if (strstr(styles[i].langs, key)) return styles[i].style;
    return NULL;
}

/* Number x (its digits d, then its decimals) written in style: into out (room for
 * written_len), the length. */
static size_t write_styled(const dmt_grouped_number *x, const char *d, const dmt_number_style *style, char *out) {
    size_t o = 0, head = x->digits % 3 ? x->digits % 3 : 3, gl = strlen(style->group);
    for (size_t i = 0; i < x->digits; i++) {
        if (i >= head && (i - head) % 3 == 0) {
            memcpy(out + o, style->group, gl);
            o += gl;
        }
        out[o++] = d[i];
    }
    if (x->decimals) {
        size_t dl = strlen(style->decimal);
        memcpy(out + o, style->decimal, dl);
        o += dl;
        memcpy(out + o, d + x->digits, x->decimals);
        o += x->decimals;
    }
    return o;
}

/* The most bytes number x takes written in style (or as written). */
static size_t written_len(const dmt_grouped_number *x, const dmt_number_style *style) {
    size_t styled = style ? x->digits + x->decimals + (x->digits / 3 + 1) * strlen(style->group) + strlen(style->decimal)
                          : 0;
    return styled > x->len ? styled : x->len;
}

/* A number's digits, for sorting and looking up */
typedef struct {
    const char *digits;
    size_t n;
    int index;
} digits_key;

static int by_digits(const void *a, const void *b) {
    const digits_key *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return memcmp(x->digits, y->digits, x->n);
}

void dmt_numbers_clear(dmt_numbers *g) {
    if (!g) return;
    free(g->source);
    free(g->plain);
    free(g->items);
    memset(g, 0, sizeof *g);
}

int dmt_numbers_find(const char *text, size_t len, dmt_numbers *g) {
    memset(g, 0, sizeof *g);
    int most = 0;
    for (size_t i = 0; i < len; i++) most += separator_at(text, len, i) > 0; /* a number has two at least */
    if (most < 2) return 0;
    g->items = malloc((size_t)(most / 2) * sizeof *g->items);
    g->plain = malloc(len + 1);
    g->source = malloc(len + 1);
    if (!g->items || !g->plain || !g->source) {
        dmt_numbers_clear(g);
        return -1;
    }
    memcpy(g->source, text, len);
    g->source[len] = 0;
    size_t plain = 0, counted = 0; /* text[0..counted) counted: words of them started */
    int words = 0;
    for (size_t i = 0; i < len; i++) {
        size_t digits = 0, decimals = 0, reach = i;
        size_t end = starts_number(text, i) ? grouped_at(text, len, i, &digits, &decimals, &reach) : 0;
        if (!end) {
            if (reach > i) i = reach - 1;
            continue;
        }
        if (g->n < most / 2) {
            words += dmt_words_started(text, counted, i + 1);
            counted = i + 1;
            dmt_grouped_number *x = &g->items[g->n++];
            *x = (dmt_grouped_number){i, end - i, digits, decimals, plain, words > 0 ? words - 1 : 0, 0, 0};
            for (size_t j = i; j < end; j++) x->spaces += text[j] == ' ';
            x->as_written = x->spaces > 0 || ipv4_like(text + i, end - i);
            plain += digits_of(text + i, end - i, g->plain + plain);
        }
        i = end - 1;
    }
    /* a number whose digits are another's too, written otherwise ("1500000 or
     * 1,500,000", "1,500,000 and 1.500.000"): which one a run is, is unknown. The
     * numbers sorted by their digits, each run outside them looked up: n log n, not
     * n^2 (a line of 3,000 numbers had taken 30 s) */
    digits_key *keys = malloc((size_t)g->n * sizeof *keys);
    unsigned char *clash = calloc((size_t)g->n, 1);
    if (!keys || !clash) {
        free(keys);
        free(clash);
        dmt_numbers_clear(g);
        return -1;
    }
    for (int a = 0; a < g->n; a++)
        keys[a] = (digits_key){g->plain + g->items[a].plain_at, g->items[a].digits, a};
    qsort(keys, (size_t)g->n, sizeof *keys, by_digits);
    for (int a = 0, b; a < g->n; a = b) { /* a run of numbers with the same digits: written alike? */
        int differ = 0;
        const dmt_grouped_number *x = &g->items[keys[a].index];
        for (b = a + 1; b < g->n && !by_digits(&keys[a], &keys[b]); b++) {
            const dmt_grouped_number *y = &g->items[keys[b].index];
            differ |= y->len != x->len || memcmp(text + y->at, text + x->at, x->len);
        }
        for (int q = a; differ && q < b; q++) clash[keys[q].index] = 1;
    }
    int next = 0; /* the first number not wholly before i */
    for (size_t i = 0; i < len; i++) { /* each run of digits outside the numbers */
        while (next < g->n && g->items[next].at + g->items[next].len <= i) next++;
        if (next < g->n && i >= g->items[next].at) {
            i = g->items[next].at + g->items[next].len - 1;
            continue;
        }
        if (!is_digit(text[i]) || (i > 0 && is_digit(text[i - 1]))) continue;
        size_t r = i;
        while (r < len && is_digit(text[r])) r++;
        digits_key run = {text + i, r - i, -1};
        const digits_key *hit = bsearch(&run, keys, (size_t)g->n, sizeof *keys, by_digits);
        if (hit && !clash[hit->index]) { /* every number with those digits (marked together) */
            for (const digits_key *q = hit; q >= keys && !by_digits(q, &run); q--) clash[q->index] = 1;
            for (const digits_key *q = hit; q < keys + g->n && !by_digits(q, &run); q++) clash[q->index] = 1;
        }
        i = r - 1;
    }
    int kept = 0;
    for (int a = 0; a < g->n; a++)
        if (!clash[a]) g->items[kept++] = g->items[a];
    free(keys);
    free(clash);
    g->n = kept;
    for (int k = 0; k < kept; k++) g->spaced += g->items[k].spaces > 0;
    if (!kept) {
        dmt_numbers_clear(g);
        return 0;
    }
    return 1;
}

char *dmt_numbers_strip(const char *text, size_t len, const dmt_numbers *g, size_t *out_len) {
    char *out = malloc(len + 1);
    if (!out) return NULL;
    size_t o = 0, pos = 0;
    for (int k = 0; k < g->n; k++) {
        const dmt_grouped_number *x = &g->items[k];
        memcpy(out + o, text + pos, x->at - pos);
        o += x->at - pos;
        memcpy(out + o, g->plain + x->plain_at, x->digits);
        o += x->digits;
        if (x->decimals) { /* its decimal separator, then its decimals */
            out[o++] = text[x->at + x->len - x->decimals - 1];
            memcpy(out + o, g->plain + x->plain_at + x->digits, x->decimals);
            o += x->decimals;
        }
        pos = x->at + x->len;
    }
    memcpy(out + o, text + pos, len - pos);
    o += len - pos;
    out[o] = 0;
    *out_len = o;
    return out;
}

/* The length of number x's plain form at tr[i..len) (its digits, then '.' or ','
 * and its decimals; no more digits or decimals after it), or 0. */
static size_t plain_at(const dmt_numbers *g, const dmt_grouped_number *x, const char *tr, size_t len, size_t i) {
    const char *d = g->plain + x->plain_at;
    size_t n = x->digits;
    if (i + n > len || memcmp(tr + i, d, n) || (i + n < len && is_digit(tr[i + n]))) return 0;
    int decimal_after = i + n + 1 < len && (tr[i + n] == ',' || tr[i + n] == '.') && is_digit(tr[i + n + 1]);
    if (!x->decimals) return decimal_after ? 0 : n;
    size_t m = x->decimals;
    if (!decimal_after || i + n + 1 + m > len || memcmp(tr + i + n + 1, d + n, m) ||
        (i + n + 1 + m < len && is_digit(tr[i + n + 1 + m])))
        return 0;
    return n + 1 + m;
}

char *dmt_numbers_restore(const char *tr, size_t len, const dmt_numbers *g, size_t *out_len, int *placed,
                          const dmt_number_style *style) {
    size_t cap = len + 1;
    for (int k = 0; k < g->n; k++) cap += written_len(&g->items[k], style);
    char *out = malloc(cap), *used = calloc((size_t)g->n + 1, 1);
    if (!out || !used) {
        free(out);
        free(used);
        return NULL;
    }
    for (int k = 0; placed && k < g->n; k++) placed[k] = -1;
    size_t o = 0;
    int word = -1; /* tr's word at i */
    for (size_t i = 0; i < len;) {
        size_t n = 0;
        int k = 0;
        word += dmt_words_started(tr, i, i + 1);
        if (is_digit(tr[i]) && (i == 0 || !is_digit(tr[i - 1])))
            for (k = 0; k < g->n && !n; k++)
                if (!used[k]) n = plain_at(g, &g->items[k], tr, len, i);
        if (!n) {
            out[o++] = tr[i++];
            continue;
        }
        const dmt_grouped_number *x = &g->items[--k];
        used[k] = 1;
        if (placed) placed[k] = word;
        if (style && !x->as_written) {
            o += write_styled(x, g->plain + x->plain_at, style, out + o);
        } else {
            memcpy(out + o, g->source + x->at, x->len);
            o += x->len;
        }
        i += n;
    }
    out[o] = 0;
    *out_len = o;
    free(used);
    return out;
}

/* A word of the model's side as the word(s) of the sentence or translation: the
 * first in *first, the count returned (two numbers may share a word: "1 500-2 000 000").
 * at[k]: number k's word on the model's side, -1: none. */
static int widen(const dmt_numbers *g, const int *at, int w, int *first) {
    int shift = 0, count = 1;
    for (int k = 0; k < g->n; k++) {
        if (at[k] >= 0 && at[k] < w) shift += g->items[k].spaces;
        if (at[k] == w) count += g->items[k].spaces;
    }
    *first = w + shift;
    return count;
}

typedef struct {
    int s, t, order;
} number_pair;

static int by_target(const void *a, const void *b) {
    const number_pair *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The pairs for words s0.. (ns of them) and t0.. (nt): group by group where the
 * counts agree (the number as written on both sides), else each word with the
 * other side's first; into rows (if not NULL) from n; the new count. */
static size_t widened(number_pair *rows, size_t n, int s0, int ns, int t0, int nt) {
    if (ns == nt) {
        for (int a = 0; a < ns; a++, n++)
            if (rows) rows[n] = (number_pair){s0 + a, t0 + a, (int)n};
        return n;
    }
    for (int a = 0; a < ns; a++, n++)
        if (rows) rows[n] = (number_pair){s0 + a, t0, (int)n};
    for (int b = 1; b < nt; b++, n++)
        if (rows) rows[n] = (number_pair){s0, t0 + b, (int)n};
    return n;
}

int dmt_numbers_map_pairs(const dmt_numbers *g, const int *placed, const int *pairs, int n_pairs, int **out,
                          int *n_out) {
    *out = NULL;
    *n_out = 0;
    int *source_at = malloc(((size_t)g->n + 1) * sizeof *source_at);
    if (!source_at) return -1;
    int removed = 0; /* the plain spaces of the numbers before: words the model's side lacks */
    for (int k = 0; k < g->n; k++) {
        source_at[k] = g->items[k].word - removed;
        removed += g->items[k].spaces;
    }
    number_pair *rows = NULL;
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) { /* count, then fill */
        if (pass && !(rows = malloc((n ? n : 1) * sizeof *rows))) {
            free(source_at);
            return -1;
        }
        n = 0;
        for (int q = 0; q < n_pairs; q++) {
            if (pairs[2 * q] < 0 || pairs[2 * q + 1] < 0) continue;
            int s0 = 0, t0 = pairs[2 * q + 1], ns = widen(g, source_at, pairs[2 * q], &s0), nt = 1;
            if (placed) nt = widen(g, placed, pairs[2 * q + 1], &t0);
            n = widened(rows, n, s0, ns, t0, nt);
        }
    }
    free(source_at);
    qsort(rows, n, sizeof *rows, by_target);
    int *res = malloc((n ? n : 1) * 2 * sizeof *res);
    if (!res) {
        free(rows);
        return -1;
    }
    int m = 0;
    for (size_t r = 0; r < n; r++) { /* each pair once (pairs for one target word are together) */
        int seen = 0;
        for (int u = m - 1; u >= 0 && res[2 * u + 1] == rows[r].t && !seen; u--) seen = res[2 * u] == rows[r].s;
        if (!seen) res[2 * m] = rows[r].s, res[2 * m + 1] = rows[r].t, m++;
    }
    free(rows);
    *out = res;
    *n_out = m;
    return 0;
}
