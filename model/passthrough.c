/* passthrough.c — URLs, e-mail addresses, emoji and words the model cannot spell
 * kept out of the model (passthrough.h). */
#include "model/passthrough.h"

#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "base/words.h"
#include "model/scripts.h"

static int is_alpha(unsigned char c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }
static int is_alnum(unsigned char c) { return is_alpha(c) || (c >= '0' && c <= '9'); }

/* closing punctuation that stays in the sentence when it ends a span's word */
static int is_trailing(unsigned char c) { return c != 0 && strchr(".,;:!?", c) != NULL; }

static int has_prefix(const char *s, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    if (n < k) return 0;
    for (size_t i = 0; i < k; i++)
        if ((s[i] | 32) != prefix[i]) return 0;
    return 1;
}

/* local@domain.tld: a plain local part, domain labels of letters, digits and '-',
 * a top-level label of 2+ letters */
static int is_email(const char *s, size_t n) {
    const char *at = memchr(s, '@', n);
    if (!at || at == s || memchr(at + 1, '@', n - (size_t)(at + 1 - s))) return 0;
    for (const char *c = s; c < at; c++)
        if (!is_alnum((unsigned char)*c) && !strchr("._%+-", *c)) return 0;
    const char *d = at + 1, *end = s + n, *last_dot = NULL;
    if (d == end || *d == '.' || end[-1] == '.') return 0;
    for (const char *c = d; c < end; c++) {
        if (*c == '.') {
            if (c[-1] == '.') return 0;
            last_dot = c;
        } else if (!is_alnum((unsigned char)*c) && *c != '-') {
            return 0;
        }
    }
    if (!last_dot || end - last_dot - 1 < 2) return 0;
    for (const char *c = last_dot + 1; c < end; c++)
        if (!is_alpha((unsigned char)*c)) return 0;
    return 1;
}

static int is_url(const char *s, size_t n) {
    static const char *const schemes[] = {"http://", "https://", "ftp://", "mailto:"};
    for (size_t i = 0; i < sizeof schemes / sizeof *schemes; i++) {
        size_t k = strlen(schemes[i]);
        if (has_prefix(s, n, schemes[i]) && n > k && is_alnum((unsigned char)s[k])) return 1;
    }
    /* www.host.tld */
    return has_prefix(s, n, "www.") && n > 4 && is_alnum((unsigned char)s[4]) && memchr(s + 4, '.', n - 4) != NULL;
}

/* One UTF-8 code point at s[0..n): its value, its length in *k; -1 for a bad
 * sequence (the caller validates the span anyway). */
static long code_point(const unsigned char *s, size_t n, size_t *k) {
    int len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
    if (!len || (size_t)len > n) return -1;
    long c = len == 1 ? s[0] : s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        c = c << 6 | (s[i] & 0x3F);
    }
    *k = (size_t)len;
    return c;
}

/* Emoji and pictographs (a word of nothing else is kept out of the model): the
 * pictograph blocks, dingbats, miscellaneous symbols, arrows and stars; joiners,
 * variation selectors, keycaps and tags only beside them. */
static int is_emoji_word(const char *w, size_t n) {
    int pictographs = 0;
    for (size_t i = 0, k = 0; i < n; i += k) {
        long c = code_point((const unsigned char *)w + i, n - i, &k);
        if (c >= 0x1F000 && c <= 0x1FAFF) pictographs++;
        else if ((c >= 0x2600 && c <= 0x27BF) || (c >= 0x2300 && c <= 0x23FF) || (c >= 0x2B00 && c <= 0x2BFF)) pictographs++;
        else if (!(c == 0x200D || c == 0xFE0F || c == 0xFE0E || c == 0x20E3 || (c >= 0xE0020 && c <= 0xE007F)))
            return 0;
    }
    return pictographs > 0;
}

/* Whether w[0..n) has a character that the tokenizer's normalisation (NFKC) turns
 * into ordinary letters or digits, which the model then writes as such: a
 * superscript or subscript ("m²" -> "m2", "H₂O" -> "H2O"), a vulgar fraction ("29¾"
 * -> "293-4", "½" -> "1 2"), an enclosed number or letter ("①" -> "1"), "™" ("DeepMT™"
 * -> "DeepMTM"), "℠", "№". Copied, the word keeps them. A word with a hyphen
 * ("CO₂-Ausstoß") stays with the model, which translates the rest. */
static int has_compat_form(const char *w, size_t n) {
    int found = 0;
    for (size_t i = 0, k = 1; i < n; i += k) {
        long c = code_point((const unsigned char *)w + i, n - i, &k);
        if (c < 0) return 0;
        if (c == '-') return 0;
        found |= c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0x2070 && c <= 0x209F) || /* super-, subscripts */
                 (c >= 0xBC && c <= 0xBE) || (c >= 0x2150 && c <= 0x215F) || c == 0x2189 || /* fractions */
                 (c >= 0x2460 && c <= 0x24FF) || (c >= 0x2776 && c <= 0x2793) || (c >= 0x3251 && c <= 0x325F) ||
                 (c >= 0x32B1 && c <= 0x32BF) || /* enclosed alphanumerics */
                 c == 0x2122 || c == 0x2120 || c == 0x2116;
    }
    return found;
}

/* Whether s[0..n) holds something to translate: a letter or a digit (ASCII, or a
 * character of a script's letter blocks: model/scripts.h), or invalid UTF-8 (which
 * the tokenizer refuses, as it would without the pass-through). Punctuation,
 * symbols, emoji and spaces are not. */
static int has_content(const char *s, size_t n) {
    for (size_t i = 0, k = 1; i < n; i += k) {
        long c = code_point((const unsigned char *)s + i, n - i, &k);
        if (c < 0 || (c < 0x80 && is_alnum((unsigned char)c)) || (c >= 0x80 && dmt_script_of(c) >= 0)) return 1;
    }
    return 0;
}

/* p->original: a copy of the sentence. 1, or -1 (p cleared) when out of memory. */
static int keep_original(dmt_passthrough *p, const char *text, size_t len) {
    if (!(p->original = malloc(len + 1))) {
        dmt_passthrough_clear(p);
        return -1;
    }
    memcpy(p->original, text, len);
    p->original[len] = 0;
    p->original_len = len;
    return 1;
}

int dmt_passthrough_verbatim(const char *text, size_t len, dmt_passthrough *p) {
    memset(p, 0, sizeof *p);
    size_t i = 0;
    while (i < len && dmt_is_word_space((unsigned char)text[i])) i++;
    if (i == len || has_content(text, len)) return 0;
    if (!(p->stripped = calloc(1, 1))) return -1;
    return keep_original(p, text, len);
}

/* Whether s[0..n) is nothing but ASCII symbols and punctuation ("<", "<=", "->"). */
static int is_symbols(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80 || is_alnum((unsigned char)s[i])) return 0;
    return n > 0;
}

/* Whether s[0..n) is a rule, a blank or a row of stars: 3 or more of one ASCII
 * symbol other than .,;:!? ("-----", "_____", "*****", "=====", "~~~"). The model
 * shortens, lengthens or drops them ("Name: _____" gave "Name: ________/"). */
static int is_symbol_run(const char *s, size_t n) {
    unsigned char c = (unsigned char)s[0];
    if (n < 3 || c <= ' ' || c >= 0x7F || is_alnum(c) || is_trailing(c)) return 0;
    for (size_t i = 1; i < n; i++)
        if (s[i] != s[0]) return 0;
    return 1;
}

/* The length of word w[0..n) that is a span (its trailing .,;:!? left out), or 0. */
static size_t span_length(const char *w, size_t n, const dmt_passthrough_spelling *spelling) {
    size_t end = n;
    while (end > 0 && is_trailing((unsigned char)w[end - 1])) end--;
    /* copied into the translation byte for byte: only valid UTF-8 (the tokenizer
     * refuses the sentence otherwise, as it would without this rule) */
    if (end == 0 || !dmt_utf8_validate(w, end, NULL)) return 0;
    /* a character the vocabulary lacks, brackets included ("<" alone is a word) */
    for (size_t i = 0; spelling && spelling->missing_ascii && i < end; i++)
        if ((unsigned char)w[i] < 0x80 && spelling->missing_ascii[(unsigned char)w[i]]) return end;
    size_t a = 0, b = end;
    while (a < b && w[a] && strchr("([{<\"'", w[a])) a++;
    while (b > a && w[b - 1] && (strchr(")]}>\"'", w[b - 1]) || is_trailing((unsigned char)w[b - 1]))) b--;
    if (b == a) return 0;
    if (is_url(w + a, b - a) || is_email(w + a, b - a) || is_emoji_word(w + a, b - a) || is_symbol_run(w, end) ||
        has_compat_form(w + a, b - a))
        return end;
    if (!spelling) return 0;
    if (b - a == 1 && is_alpha((unsigned char)w[a]) &&
        ((spelling->lone_letters >> ((w[a] | 32) - 'a') & 1) || (a == 0 && b < n && w[b] == ':')) &&
        !memchr(w + b, '.', n - b))
        return end; /* a letter alone: a variable or a label ("x", "Plan B", and "A:", which is no article) */
    int wide = 0; /* only a word with a character outside ASCII can be one the model cannot spell otherwise */
    for (size_t i = a; i < b && !wide; i++) wide = (unsigned char)w[i] >= 0x80;
    return wide && spelling->unspellable && spelling->unspellable(spelling->arg, w + a, b - a) ? end : 0;
}

void dmt_passthrough_clear(dmt_passthrough *p) {
    if (!p) return;
    free(p->original);
    free(p->stripped);
    free(p->kept_word);
    free(p->spans);
    memset(p, 0, sizeof *p);
}

int dmt_passthrough_find(const char *text, size_t len, dmt_passthrough *p) {
    return dmt_passthrough_find_with(text, len, NULL, p);
}

int dmt_passthrough_find_with(const char *text, size_t len, const dmt_passthrough_spelling *spelling,
                              dmt_passthrough *p) {
    memset(p, 0, sizeof *p);
    /* a quick look first: most sentences have neither '@' nor "://" nor "www." nor
     * a byte of a 3- or 4-byte UTF-8 sequence (where emoji live), nor "²" "³" "¹" "¼"
     * "½" "¾", nor, with an
     * unspellable test, any character outside ASCII, nor an ASCII character the
     * vocabulary lacks, nor a letter alone that is no word */
    int maybe = memchr(text, '@', len) != NULL;
    const unsigned char *missing = spelling ? spelling->missing_ascii : NULL;
    unsigned char wide = spelling && spelling->unspellable ? 0xC0 : 0xE2;
    unsigned lone = spelling ? spelling->lone_letters : 0;
    for (size_t i = 0; !maybe && i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        maybe = c >= wide || (missing && c < 0x80 && missing[c]) ||
                (c == 0xC2 && i + 1 < len && strchr("\xB2\xB3\xB9\xBC\xBD\xBE", text[i + 1]) && text[i + 1]) ||
                (is_alpha(c) && ((lone >> ((c | 32) - 'a') & 1) || (spelling && i + 1 < len && text[i + 1] == ':')) &&
                 (i == 0 || !is_alnum((unsigned char)text[i - 1])) &&
                 (i + 1 == len || !is_alnum((unsigned char)text[i + 1])));
    }
    for (size_t i = 0; !maybe && i + 3 <= len; i++)
        maybe = (text[i] == ':' && (i + 1 < len && text[i + 1] == '/')) || has_prefix(text + i, len - i, "www.") ||
                has_prefix(text + i, len - i, "mailto:") || is_symbol_run(text + i, 3);
    if (!maybe) return 0;
    size_t words = (size_t)dmt_word_bounds(text, len, NULL, NULL);
    p->spans = malloc((words ? words : 1) * sizeof *p->spans);
    p->kept_word = malloc((words + 1) * sizeof *p->kept_word); /* + 1: trailing punctuation of a first span */
    p->stripped = malloc(len + 1);
    if (!p->spans || !p->kept_word || !p->stripped) {
        dmt_passthrough_clear(p);
        return -1;
    }
    size_t out = 0;
    int word = 0;
    for (size_t i = 0; i < len;) {
        if (dmt_is_word_space((unsigned char)text[i])) { i++; continue; }
        size_t start = i;
        while (i < len && !dmt_is_word_space((unsigned char)text[i])) i++;
        size_t n = i - start, k = span_length(text + start, n, spelling);
        if (k) {
            dmt_passthrough_span *s = &p->spans[p->n_spans++];
            s->start = start;
            s->len = k;
            s->word = word;
            s->prev = p->n_kept - 1;
            s->glued = k < n && p->n_kept > 0;
            s->number_start = s->number_len = 0;
            if (k < n) { /* its trailing punctuation stays: on the word before, or alone */
                if (!s->glued) {
                    if (out) p->stripped[out++] = ' ';
                    p->kept_word[p->n_kept++] = word;
                }
                memcpy(p->stripped + out, text + start + k, n - k);
                out += n - k;
            }
        } else {
            if (out) p->stripped[out++] = ' ';
            memcpy(p->stripped + out, text + start, n);
            out += n;
            p->kept_word[p->n_kept++] = word;
            dmt_passthrough_span *before = p->n_spans ? &p->spans[p->n_spans - 1] : NULL;
            if (before && before->word == word - 1 && text[start] >= '0' && text[start] <= '9' &&
                is_symbols(text + before->start, before->len) && dmt_is_word_space((unsigned char)text[before->start + before->len]))
            { /* "x < 3": the symbol goes with the number */
                before->number_start = start;
                while (start + before->number_len < i && text[start + before->number_len] >= '0' &&
                       text[start + before->number_len] <= '9')
                    before->number_len++;
            }
        }
        word++;
    }
    if (p->n_spans == 0) {
        dmt_passthrough_clear(p);
        return 0;
    }
    if (!has_content(p->stripped, out)) { /* nothing but spans and punctuation: given back as it is */
        out = 0;
        p->n_kept = 0;
        for (int k = 0; k < p->n_spans; k++) p->spans[k].prev = -1, p->spans[k].glued = 0, p->spans[k].number_len = 0;
    }
    p->stripped[out] = 0;
    p->stripped_len = out;
    return keep_original(p, text, len);
}

/* where a span goes: before target word t, or after it (before its trailing
 * punctuation when split) */
typedef struct {
    int t, after, split;
} place;

static place place_span(const dmt_passthrough *p, const dmt_passthrough_span *s, const char *tr, size_t tr_len,
                        const int *pairs, int n_pairs, int nt) {
    place at = {0, 0, 0};
    if (s->prev < 0) return at; /* first: before the first word */
    if (s->prev == p->n_kept - 1) return (place){nt - 1, 1, s->glued}; /* last: after the last word */
    int found = -1;
    if (s->number_len) { /* before the number's copy, the first one with exactly its digits */
        const char *digits = p->original + s->number_start;
        size_t i = 0;
        for (int w = 0; w < nt; w++) {
            while (i < tr_len && dmt_is_word_space((unsigned char)tr[i])) i++;
            size_t k = 0;
            while (k < s->number_len && i + k < tr_len && tr[i + k] == digits[k]) k++;
            if (k == s->number_len && !(i + k < tr_len && tr[i + k] >= '0' && tr[i + k] <= '9'))
                return (place){w, 0, 0};
            while (i < tr_len && !dmt_is_word_space((unsigned char)tr[i])) i++;
        }
        for (int q = 0; pairs && q < n_pairs; q++) /* else the first target word aligned to it */
            if (pairs[2 * q] == s->prev + 1 && pairs[2 * q + 1] >= 0 && pairs[2 * q + 1] < nt &&
                (found < 0 || pairs[2 * q + 1] < found))
                found = pairs[2 * q + 1];
        if (found >= 0) return (place){found, 0, 0};
    }
    /* after the last target word aligned to the word before it, but not after one that
     * also renders the word after it: the span sits between the two ("Contact: a@b.cz,
     * +420 777" had put the address after "+420", which the model aligned to both) */
    for (int pass = 0; pass < 2 && found < 0; pass++)
        for (int q = 0; pairs && q < n_pairs; q++) { /* (found starts at -1: only targets >= 0 count) */
            int t = pairs[2 * q + 1];
            if (pairs[2 * q] != s->prev || t >= nt || t <= found) continue;
            int shared = 0;
            for (int u = 0; !pass && u < n_pairs && !shared; u++)
                shared = pairs[2 * u] == s->prev + 1 && pairs[2 * u + 1] == t;
            if (!shared) found = t;
        }
    if (found >= 0) return (place){found, 1, s->glued};
    if (s->prev + 1 < p->n_kept) /* the word after it, if that one is aligned */
        for (int q = 0; pairs && q < n_pairs; q++)
            if (pairs[2 * q] == s->prev + 1 && pairs[2 * q + 1] >= 0 && pairs[2 * q + 1] < nt)
                return (place){pairs[2 * q + 1], 0, 0};
    /* by relative position */
    int t = (int)(((long)(s->prev + 1) * nt + p->n_kept / 2) / (p->n_kept ? p->n_kept : 1)) - 1;
    if (t < 0) return at;
    return (place){t < nt ? t : nt - 1, 1, s->glued};
}

typedef struct {
    int s, t, seq;
} pair_row;

/* Whether text[0..at) ends with .,;:!? before white space. */
static int after_punctuation(const char *text, size_t at) {
    while (at > 0 && dmt_is_word_space((unsigned char)text[at - 1])) at--;
    return at > 0 && is_trailing((unsigned char)text[at - 1]);
}

static int by_target(const void *a, const void *b) {
    const pair_row *x = a, *y = b;
    return x->t != y->t ? (x->t > y->t) - (x->t < y->t) : (x->seq > y->seq) - (x->seq < y->seq);
}

char *dmt_passthrough_restore(const dmt_passthrough *p, const char *tr, size_t tr_len, const int *pairs,
                              int n_pairs, size_t *out_len, int **new_pairs, int *n_new) {
    if (new_pairs) *new_pairs = NULL;
    if (n_new) *n_new = 0;
    size_t cap = tr_len + 1;
    for (int i = 0; i < p->n_spans; i++) cap += p->spans[i].len + 2;
    int nt = dmt_word_bounds(tr, tr_len, NULL, NULL);
    if (nt == 0 || p->n_kept == 0) { /* nothing translated: the sentence as it was */
        char *s = malloc(p->original_len + 1);
        if (!s) return NULL;
        memcpy(s, p->original, p->original_len);
        s[p->original_len] = 0;
        *out_len = p->original_len;
        return s;
    }
    char *out = malloc(cap + p->original_len);
    place *at = malloc((size_t)p->n_spans * sizeof *at);
    int *new_t = malloc((size_t)nt * sizeof *new_t), *span_t = malloc((size_t)p->n_spans * sizeof *span_t);
    if (!out || !at || !new_t || !span_t) {
        free(out); free(at); free(new_t); free(span_t);
        return NULL;
    }
    for (int i = 0; i < p->n_spans; i++) {
        at[i] = place_span(p, &p->spans[i], tr, tr_len, pairs, n_pairs, nt);
        /* after a word: before its closing punctuation unless the source had punctuation
         * before the span too. The span followed that word directly, and the
         * punctuation is the translation's, after both ("Besuchen Sie https://x.org.",
         * not "Besuchen Sie. https://x.org"; "Press x to close" -> "Press x, um ...", not
         * "Press, x um ..."); where the word before ended with its own punctuation
         * ("... a new dog. info@example.org", "Contact: a@b.cz, ..."), that stays
         * before the span, whatever was glued after it */
        if (at[i].after) at[i].split = !after_punctuation(p->original, p->spans[i].start);
    }
    size_t o = 0, i = 0;
    int t = 0, w = 0; /* target word, output word */
    while (i < tr_len) {
        size_t gap = i;
        while (i < tr_len && dmt_is_word_space((unsigned char)tr[i])) i++;
        if (i == tr_len) { /* trailing whitespace */
            memcpy(out + o, tr + gap, i - gap);
            o += i - gap;
            break;
        }
        memcpy(out + o, tr + gap, i - gap);
        o += i - gap;
        size_t start = i;
        while (i < tr_len && !dmt_is_word_space((unsigned char)tr[i])) i++;
        int last_before = -1; /* spans before this word; the last one keeps a comma or colon after it on it
                                 ("Łódź, ...", "Q: ...") */
        for (int k = 0; k < p->n_spans; k++)
            if (!at[k].after && at[k].t == t) last_before = k;
        for (int k = 0; k <= last_before; k++)
            if (!at[k].after && at[k].t == t) {
                memcpy(out + o, p->original + p->spans[k].start, p->spans[k].len);
                o += p->spans[k].len;
                if (k == last_before && is_trailing((unsigned char)tr[start])) {
                    span_t[k] = w; /* one output word with the word after it */
                } else {
                    out[o++] = ' ';
                    span_t[k] = w++;
                }
            }
        size_t end = i, body = i;
        int split = 0;
        for (int k = 0; k < p->n_spans; k++) split |= at[k].after && at[k].t == t && at[k].split;
        if (split)
            while (body > start && is_trailing((unsigned char)tr[body - 1])) body--;
        if (body == start) { /* all punctuation ("Visitez !"): the spans glued before it go before the word */
            for (int k = 0; split && k < p->n_spans; k++)
                if (at[k].after && at[k].t == t && at[k].split) {
                    memcpy(out + o, p->original + p->spans[k].start, p->spans[k].len);
                    o += p->spans[k].len;
                    out[o++] = ' ';
                    span_t[k] = w++;
                    at[k].t = -1; /* written */
                }
            body = end, split = 0;
        }
        memcpy(out + o, tr + start, (split ? body : end) - start);
        o += (split ? body : end) - start;
        new_t[t] = w++;
        for (int k = 0; k < p->n_spans; k++) /* spans after this word */
            if (at[k].after && at[k].t == t) {
                out[o++] = ' ';
                memcpy(out + o, p->original + p->spans[k].start, p->spans[k].len);
                o += p->spans[k].len;
                span_t[k] = w++;
            }
        if (split) {
            memcpy(out + o, tr + body, end - body);
            o += end - body;
        }
        t++;
    }
    out[o] = 0;
    *out_len = o;
    int rc = 0;
    if (new_pairs) {
        pair_row *rows = malloc(((size_t)(n_pairs > 0 ? n_pairs : 0) + (size_t)p->n_spans) * sizeof *rows);
        int n = 0;
        if (rows) {
            for (int q = 0; pairs && q < n_pairs; q++)
                if (pairs[2 * q] >= 0 && pairs[2 * q] < p->n_kept && pairs[2 * q + 1] >= 0 && pairs[2 * q + 1] < nt)
                    rows[n] = (pair_row){p->kept_word[pairs[2 * q]], new_t[pairs[2 * q + 1]], n}, n++;
            for (int k = 0; k < p->n_spans; k++) rows[n] = (pair_row){p->spans[k].word, span_t[k], n}, n++;
            qsort(rows, (size_t)n, sizeof *rows, by_target);
        }
        int *np = rows ? malloc((size_t)(n ? n : 1) * 2 * sizeof *np) : NULL;
        if (np) {
            int m = 0; /* a span and the comma it took share a word on both sides: one pair */
            for (int q = 0; q < n; q++)
                if (!m || np[2 * m - 2] != rows[q].s || np[2 * m - 1] != rows[q].t)
                    np[2 * m] = rows[q].s, np[2 * m + 1] = rows[q].t, m++;
            *new_pairs = np;
            *n_new = m;
        } else {
            rc = -1;
        }
        free(rows);
    }
    free(at);
    free(new_t);
    free(span_t);
    if (rc) {
        free(out);
        return NULL;
    }
    return out;
}
