/* detect.c — a cheap guess at a text's language, for source "auto".
 *
 * The model does not need the source language (the encoder reads no tag), so this
 * is only reported back as LibreTranslate's "detectedLanguage". Scores: one point
 * per stopword of a language, one per letter typical of it (ä, ř, ñ...), and the
 * script for languages with their own (Cyrillic, Greek, CJK...). Only the model's
 * languages compete; no evidence or a tie gives NULL.
 */
#include "server/internal.h"

#include <stdint.h>
#include <string.h>

typedef struct {
    const char *code;
    const char *words;   /* space-separated stopwords, lowercase */
    const char *letters; /* typical non-ASCII letters, UTF-8 */
} profile;

static const profile profiles[] = {
    {"en", " the and of to is in that it was for on are with as his they be at have this from not by a an you "
           "we he she my our your their there what which who ", ""},
    {"de", " der die das und ist nicht ein eine zu den mit sich des auf für im dem von sie es ich wir ihr er "
           "auch auf aus bei wie was noch nach einen einem ", "äöüßÄÖÜ"},
    {"fr", " le la les et est un une des du en que qui dans pour pas sur au avec il elle nous vous ils je ce "
           "cette sont aux ", "éèêàçùâîôœëïÉÈÀÇ"},
    {"cs", " a je se na v ve že to s z do jsem jsou by ale jak tak pro od po co už mě mi jeho její ", "ěščřžýůťďňĚŠČŘŽŮ"},
    {"es", " el la los las y es en que de un una por con no se su para del al lo como más pero sus le ya ",
     "ñ¿¡áíóúÑ"},
    {"it", " il lo la gli le e è di che un una per non sono con del della si al nel ma come anche ", "àèìòù"},
    {"pt", " o a os as e é de que um uma para com não do da em no na se por mais como ", "ãõçáéíóúâêô"},
    {"nl", " de het een en is van in dat op te zijn met voor niet aan er ook maar dit die ", "ĳ"},
    {"pl", " i w nie na się jest że z do to jak ale co tak po od za ", "ąęłńóśźżŁŚŻ"},
    {"sv", " och att det som en är på av för med den till inte har jag ", "åäöÅ"},
    {"tr", " ve bir bu da de için ile ne mi çok ama gibi ", "ğışçöüİĞŞ"},
};

/* Script ranges for languages that own one. */
static const struct { const char *code; uint32_t lo, hi; } scripts[] = {
    {"ru", 0x0400, 0x04FF}, {"uk", 0x0400, 0x04FF}, {"bg", 0x0400, 0x04FF}, {"el", 0x0370, 0x03FF},
    {"ar", 0x0600, 0x06FF}, {"he", 0x0590, 0x05FF}, {"hi", 0x0900, 0x097F}, {"th", 0x0E00, 0x0E7F},
    {"ko", 0xAC00, 0xD7AF}, {"ja", 0x3040, 0x30FF}, {"zh", 0x4E00, 0x9FFF},
};

static uint32_t next_cp(const char *s, size_t len, size_t *i) {
    const unsigned char *p = (const unsigned char *)s;
    uint32_t c = p[*i];
    int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    if (extra && *i + (size_t)extra < len) {
        c &= 0x3F >> extra;
        for (int k = 1; k <= extra; k++) c = c << 6 | (p[*i + (size_t)k] & 0x3F);
    } else {
        extra = 0;
    }
    *i += (size_t)extra + 1;
    return c;
}

static int contains_cp(const char *set, uint32_t c) {
    size_t n = strlen(set), i = 0;
    while (i < n)
        if (next_cp(set, n, &i) == c) return 1;
    return 0;
}

static const profile *find_profile(const char *code) {
    for (size_t p = 0; p < sizeof profiles / sizeof *profiles; p++)
        if (!strcmp(profiles[p].code, code)) return &profiles[p];
    return NULL;
}

/* A non-ASCII letter counts for the languages it is typical of. */
static void score_letter(const dmt_config *mcfg, uint32_t c, double *score) {
    for (int l = 0; l < mcfg->n_languages; l++) {
        const profile *p = find_profile(mcfg->languages[l].code);
        if (p && contains_cp(p->letters, c)) score[l] += 1;
        for (size_t k = 0; k < sizeof scripts / sizeof *scripts; k++)
            if (c >= scripts[k].lo && c <= scripts[k].hi && !strcmp(scripts[k].code, mcfg->languages[l].code))
                score[l] += 1;
    }
}

const char *dmt_detect_language(const dmt_config *mcfg, const char *const *texts, const size_t *lens, int n,
                                double *confidence) {
    double score[DMT_MAX_LANGUAGES] = {0};
    int nl = mcfg->n_languages;
    for (int t = 0; t < n; t++) {
        const char *s = texts[t];
        size_t len = lens[t], i = 0, ws = 0, we = 0;
        int in_word = 0;
        while (i <= len) {
            size_t at = i;
            uint32_t c = i < len ? next_cp(s, len, &i) : (i++, ' ');
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0xC0) {
                if (!in_word) ws = at;
                in_word = 1;
                we = i;
                if (c >= 0x80) score_letter(mcfg, c, score);
                continue;
            }
            if (in_word && we - ws < 40) {
                char key[44];
                size_t kl = 0;
                key[kl++] = ' ';
                for (size_t k = ws; k < we; k++) {
                    char ch = s[k];
                    key[kl++] = ch >= 'A' && ch <= 'Z' ? (char)(ch | 0x20) : ch;
                }
                key[kl++] = ' ';
                key[kl] = 0;
                for (int l = 0; l < nl; l++) {
                    const profile *p = find_profile(mcfg->languages[l].code);
                    if (p && strstr(p->words, key)) score[l] += 1;
                }
            }
            in_word = 0;
        }
    }
    int best = -1;
    double total = 0, second = 0;
    for (int l = 0; l < nl; l++) {
        total += score[l];
        if (best < 0 || score[l] > score[best]) {
            if (best >= 0) second = score[best];
            best = l;
        } else if (score[l] > second) {
            second = score[l];
        }
    }
    if (best < 0 || score[best] <= 0 || score[best] == second) return NULL;
    *confidence = (double)(int)(1000.0 * score[best] / total + 0.5) / 10.0;
    return mcfg->languages[best].code;
}
