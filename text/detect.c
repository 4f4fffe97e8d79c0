/* detect.c — which of the model's languages a text is in (source "auto", /detect).
 *
 * CLD2 (text/cld2_shim.cc) does the reading; this file restricts it to the
 * model's languages and turns its answers into a confidence that means
 * something. On short text CLD2 alone often names a language the model does not
 * have, or none, so it runs several times over the same text:
 *   1. with every model language as a hint, best effort: the guess;
 *   2. without hints: does CLD2 agree on its own?
 *   3. once with each model language alone as the hint: how many of those runs
 *      still pick the guess (votes)?
 * The guess is always one of the model's languages. Its confidence is the
 * accuracy measured for its band (unanimous; not; no model language named; no
 * letters at all) on sentences by scripts/detect_accuracy.py --calibrate — so
 * "95" reads "about 95 of 100 such guesses were right". docs/server.md has the
 * figures. Other candidates share the remaining confidence by their votes.
 *
 * One to three words ("Hello", "Danke schön") are too little for CLD2's character
 * statistics ("Hello" reads as French). For them, word counts from the training
 * data's short lines (text/short_words.inc, tools/make_short_words.py) decide when
 * they clearly favour one of the model's languages: the likelihood of the words
 * under each language's counts (add-half smoothing), at least WORDS_MARGIN times
 * the runner-up's; otherwise CLD2's guess stands.
 */
#include "text/detect.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "text/cld2_shim.h"

/* Only this much of a text is read: enough to tell a language, and it bounds
 * the work of n + 2 CLD2 runs on a 20,000-character request. */
#define DETECT_MAX_BYTES 4096

/* Band accuracies (percent), from scripts/detect_accuracy.py --calibrate
 * (even-numbered lines of the Tatoeba and Multi30k test sets, default model's
 * four languages). */
static const double band_confidence[] = {
    [0] = 0.0,   /* no letters: the first model language, a pure default */
    [1] = 0.0,   /* even with hints CLD2 named no model language (0 of 5 right): the most voted one */
    [2] = 88.0,  /* CLD2 picked it with all hints, but not in every single-hint run */
    [3] = 99.9,  /* every single-hint run and the unhinted run picked it too */
};

/* ---- words of short texts ---- */

typedef struct {
    const char *lang;
    const char *lines; /* "word count\n", sorted byte-wise */
    int n;
    long total;        /* words counted in all */
} short_table;

#include "text/short_words.inc"

#define N_SHORT_TABLES (int)(sizeof short_tables / sizeof *short_tables)
#define SHORT_MAX_WORDS 3
#define WORDS_MARGIN 4.0
/* Band accuracy of a guess the words decided or confirmed (percent): its
 * calibration half in scripts/detect_accuracy.py --calibrate (69 of 71). */
#define WORDS_CONFIDENCE 97.0

static struct {
    const char **word; /* [n] each line's start */
    int n;
} short_index[N_SHORT_TABLES];
static pthread_once_t short_once = PTHREAD_ONCE_INIT;

static void build_short_index(void) {
    for (int t = 0; t < N_SHORT_TABLES; t++) {
        const char **w = malloc((size_t)short_tables[t].n * sizeof *w);
        if (!w) continue; /* out of memory: the words are not used */
        int n = 0;
        for (const char *p = short_tables[t].lines; *p && n < short_tables[t].n; p = strchr(p, '\n') + 1) w[n++] = p;
        short_index[t].word = w;
        short_index[t].n = n;
    }
}

/* Compares word w (len bytes) with line e ("word count"). */
static int cmp_entry(const char *w, size_t len, const char *e) {
    size_t el = strcspn(e, " ");
    int c = memcmp(w, e, len < el ? len : el);
    return c ? c : (len > el) - (len < el);
}

/* How often table t saw the word w (lower-cased), 0 when never. */
static long short_count(int t, const char *w, size_t len) {
    int lo = 0, hi = short_index[t].n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = cmp_entry(w, len, short_index[t].word[mid]);
        if (!c) return strtol(short_index[t].word[mid] + len + 1, NULL, 10);
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return 0;
}

/* Appends the lower case of code point c (the cases of Latin-1 and Latin
 * Extended-A, as Python's str.lower has them; others as they are) in UTF-8. */
static size_t put_lower(char *o, uint32_t c) {
    if (c < 0x80) { o[0] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c); return 1; }
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) c += 32;
    else if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) c |= 1;
    else if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) c += c & 1;
    else if (c == 0x178) c = 0xFF;
    if (c < 0x800) { o[0] = (char)(0xC0 | c >> 6); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    o[0] = (char)(0xE0 | c >> 12); o[1] = (char)(0x80 | ((c >> 6) & 0x3F)); o[2] = (char)(0x80 | (c & 0x3F));
    return 3;
}

static int is_word_edge_punct(unsigned char c) { return c < 0x80 && c > ' ' && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && !(c >= '0' && c <= '9'); }

/* The model language (index) the words of a one- to three-word text clearly
 * belong to by the counts, or -1 (longer text, no word known, or no clear winner). */
static int short_text_language(const dmt_config *mcfg, const char *text, size_t len) {
    pthread_once(&short_once, build_short_index);
    char words[SHORT_MAX_WORDS][96];
    size_t wl[SHORT_MAX_WORDS];
    int nw = 0;
    for (size_t i = 0; i < len;) {
        while (i < len && (text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) i++;
        if (i >= len) break;
        size_t a = i;
        while (i < len && !(text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) i++;
        size_t b = i;
        while (a < b && is_word_edge_punct((unsigned char)text[a])) a++;
        while (b > a && is_word_edge_punct((unsigned char)text[b - 1])) b--;
        if (a == b) continue;
        if (nw == SHORT_MAX_WORDS) return -1;
        size_t o = 0;
        for (size_t k = a; k < b && o + 3 < sizeof words[0];) { /* valid UTF-8 (checked by the caller) */
            unsigned char c = (unsigned char)text[k];
            uint32_t cp = c;
            int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            if (k + (size_t)n > b) break;
            if (n == 2) cp = (c & 0x1Fu) << 6 | ((unsigned char)text[k + 1] & 0x3Fu);
            if (n <= 2) o += put_lower(words[nw] + o, cp);
            else { memcpy(words[nw] + o, text + k, (size_t)n); o += (size_t)n; }
            k += (size_t)n;
        }
        wl[nw++] = o;
    }
    if (nw == 0) return -1;
    double score[DMT_MAX_LANGUAGES];
    int lang_table[DMT_MAX_LANGUAGES], known = 0, n_scored = 0;
    for (int l = 0; l < mcfg->n_languages; l++) {
        lang_table[l] = -1;
        for (int t = 0; t < N_SHORT_TABLES; t++)
            if (!strcasecmp(short_tables[t].lang, mcfg->languages[l].code) && short_index[t].word) lang_table[l] = t;
    }
    for (int l = 0; l < mcfg->n_languages; l++) score[l] = 0;
    for (int w = 0; w < nw; w++) {
        long c[DMT_MAX_LANGUAGES];
        int any = 0;
        for (int l = 0; l < mcfg->n_languages; l++) {
            c[l] = lang_table[l] >= 0 ? short_count(lang_table[l], words[w], wl[w]) : 0;
            any |= c[l] > 0;
        }
        if (!any) continue; /* a word none of them knows says nothing */
        known++;
        for (int l = 0; l < mcfg->n_languages; l++)
            if (lang_table[l] >= 0)
                score[l] += log((c[l] + 0.5) / ((double)short_tables[lang_table[l]].total + 0.5));
    }
    if (!known) return -1;
    int best = -1, second = -1;
    for (int l = 0; l < mcfg->n_languages; l++) {
        if (lang_table[l] < 0) continue;
        n_scored++;
        if (best < 0 || score[l] > score[best]) second = best, best = l;
        else if (second < 0 || score[l] > score[second]) second = l;
    }
    if (n_scored < 2 || score[best] - score[second] < log(WORDS_MARGIN)) return -1;
    return best;
}

/* CLD2 still uses a few withdrawn ISO 639-1 codes. */
static const char *modern_code(const char *cld) {
    static const struct { const char *old, *now; } alias[] = {{"iw", "he"}, {"in", "id"}, {"ji", "yi"}, {"jw", "jv"}};
    for (size_t i = 0; i < sizeof alias / sizeof *alias; i++)
        if (!strcmp(cld, alias[i].old)) return alias[i].now;
    return cld;
}

/* The model language a CLD2 code names ("zh-Hant" matches "zh"), or -1. */
static int model_index(const dmt_config *mcfg, const char *cld) {
    cld = modern_code(cld);
    size_t cl = strcspn(cld, "-_");
    for (int l = 0; l < mcfg->n_languages; l++) {
        const char *m = mcfg->languages[l].code;
        if (!strcasecmp(m, cld)) return l;
    }
    for (int l = 0; l < mcfg->n_languages; l++) {
        const char *m = mcfg->languages[l].code;
        if (strcspn(m, "-_") == cl && !strncasecmp(m, cld, cl)) return l;
    }
    return -1;
}

/* The first of CLD2's top three that is a model language, or -1. */
static int first_model_language(const dmt_config *mcfg, const dmt_cld2_result *r) {
    for (int i = 0; i < 3; i++) {
        int l = model_index(mcfg, r->code[i]);
        if (l >= 0) return l;
    }
    return -1;
}

/* len cut back to at most max bytes without splitting a UTF-8 sequence. */
static size_t clip_utf8(const char *s, size_t len, size_t max) {
    if (len <= max) return len;
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80) max--;
    return max;
}

int dmt_detect(const dmt_config *mcfg, const char *text, size_t len, dmt_detect_guess *out, int max) {
    int nl = mcfg->n_languages;
    if (nl <= 0 || max <= 0) return 0;
    len = clip_utf8(text, len, DETECT_MAX_BYTES);
    char hints[DMT_MAX_LANGUAGES * 17];
    size_t o = 0;
    hints[0] = 0;
    for (int l = 0; l < nl; l++)
        o += (size_t)snprintf(hints + o, sizeof hints - o, "%s%s", l ? "," : "", mcfg->languages[l].code);

    dmt_cld2_result all, alone, one;
    int votes[DMT_MAX_LANGUAGES] = {0};
    dmt_cld2_detect(text, len, hints, 1, &all);
    int best = first_model_language(mcfg, &all), found = best >= 0;
    int letters = all.text_bytes > 0;
    dmt_cld2_detect(text, len, NULL, 1, &alone);
    int agree = best >= 0 && first_model_language(mcfg, &alone) == best;
    for (int l = 0; l < nl; l++) {
        dmt_cld2_detect(text, len, mcfg->languages[l].code, 1, &one);
        int v = first_model_language(mcfg, &one);
        if (v >= 0) votes[v]++;
    }
    if (best < 0) /* CLD2 named no model language even with hints: the most voted, else the first */
        for (int l = 0; l < nl; l++)
            if (best < 0 || votes[l] > votes[best]) best = l;
    int band = !letters ? 0 : !found ? 1 : votes[best] == nl && agree ? 3 : 2;
    double conf = band_confidence[band];
    int by_words = letters ? short_text_language(mcfg, text, len) : -1;
    if (by_words >= 0 && by_words != best) {
        best = by_words;
        conf = WORDS_CONFIDENCE;
    } else if (by_words >= 0 && conf < WORDS_CONFIDENCE) {
        conf = WORDS_CONFIDENCE;
    }
    out[0].code = mcfg->languages[best].code;
    out[0].confidence = conf;
    int n = 1, others = 0;
    for (int l = 0; l < nl; l++)
        if (l != best) others += votes[l];
    /* the other voted languages, most votes first */
    for (int v = nl; v >= 1 && n < max; v--)
        for (int l = 0; l < nl && n < max; l++)
            if (l != best && votes[l] == v) {
                out[n].code = mcfg->languages[l].code;
                out[n].confidence = (double)(int)((100.0 - conf) * v / others + 0.5);
                n++;
            }
    return n;
}

const char *dmt_detect_language(const dmt_config *mcfg, const char *text, size_t len, double *confidence) {
    dmt_detect_guess g;
    if (dmt_detect(mcfg, text, len, &g, 1) < 1) return NULL;
    *confidence = g.confidence;
    return g.code;
}
