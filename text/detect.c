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
 */
#include "text/detect.h"

#include <stdio.h>
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
