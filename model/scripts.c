/* scripts.c — scripts of letters and of languages (scripts.h).
 *
 * Both tables are coarse on purpose: a script is the Unicode blocks of its letters
 * (a block's few punctuation marks count as its letters too), and a language the
 * scripts it is commonly written in. What they decide is only whether a word is
 * copied rather than translated by a model that does not know its script.
 */
#include "model/scripts.h"

#include <string.h>
#include <strings.h>

#define L(s) DMT_SCRIPT_##s

/* Sorted by first code point, not overlapping. */
static const struct {
    long first, last;
    int script;
} blocks[] = {
    {0x41, 0x5A, L(LATIN)},         {0x61, 0x7A, L(LATIN)},          {0xAA, 0xAA, L(LATIN)},
    {0xBA, 0xBA, L(LATIN)},         {0xC0, 0xD6, L(LATIN)},          {0xD8, 0xF6, L(LATIN)},
    {0xF8, 0x2AF, L(LATIN)},        {0x370, 0x373, L(GREEK)},        {0x376, 0x377, L(GREEK)},
    {0x37A, 0x37D, L(GREEK)},       {0x37F, 0x37F, L(GREEK)},        {0x386, 0x386, L(GREEK)},
    {0x388, 0x3FF, L(GREEK)},       {0x400, 0x52F, L(CYRILLIC)},     {0x531, 0x58F, L(ARMENIAN)},
    {0x591, 0x5FF, L(HEBREW)},      {0x600, 0x6FF, L(ARABIC)},       {0x700, 0x74F, L(SYRIAC)},
    {0x750, 0x77F, L(ARABIC)},      {0x780, 0x7BF, L(THAANA)},       {0x870, 0x8FF, L(ARABIC)},
    {0x900, 0x97F, L(DEVANAGARI)},  {0x980, 0x9FF, L(BENGALI)},      {0xA00, 0xA7F, L(GURMUKHI)},
    {0xA80, 0xAFF, L(GUJARATI)},    {0xB00, 0xB7F, L(ORIYA)},        {0xB80, 0xBFF, L(TAMIL)},
    {0xC00, 0xC7F, L(TELUGU)},      {0xC80, 0xCFF, L(KANNADA)},      {0xD00, 0xD7F, L(MALAYALAM)},
    {0xD80, 0xDFF, L(SINHALA)},     {0xE00, 0xE7F, L(THAI)},         {0xE80, 0xEFF, L(LAO)},
    {0xF00, 0xFFF, L(TIBETAN)},     {0x1000, 0x109F, L(MYANMAR)},    {0x10A0, 0x10FF, L(GEORGIAN)},
    {0x1100, 0x11FF, L(HANGUL)},    {0x1200, 0x139F, L(ETHIOPIC)},   {0x1780, 0x17FF, L(KHMER)},
    {0x1800, 0x18AF, L(MONGOLIAN)}, {0x19E0, 0x19FF, L(KHMER)},      {0x1C80, 0x1C8F, L(CYRILLIC)},
    {0x1C90, 0x1CBF, L(GEORGIAN)},  {0x1D00, 0x1D7F, L(LATIN)},      {0x1E00, 0x1EFF, L(LATIN)},
    {0x1F00, 0x1FFF, L(GREEK)},     {0x2C60, 0x2C7F, L(LATIN)},      {0x2D00, 0x2D2F, L(GEORGIAN)},
    {0x2D80, 0x2DDF, L(ETHIOPIC)},  {0x2DE0, 0x2DFF, L(CYRILLIC)},   {0x2E80, 0x2FDF, L(HAN)},
    {0x3005, 0x3005, L(HAN)},       {0x3007, 0x3007, L(HAN)},        {0x3021, 0x3029, L(HAN)},
    {0x3038, 0x303B, L(HAN)},       {0x3041, 0x30FF, L(KANA)},       {0x3100, 0x312F, L(BOPOMOFO)},
    {0x3130, 0x318F, L(HANGUL)},    {0x31A0, 0x31BF, L(BOPOMOFO)},   {0x31F0, 0x31FF, L(KANA)},
    {0x3400, 0x4DBF, L(HAN)},       {0x4E00, 0x9FFF, L(HAN)},        {0xA640, 0xA69F, L(CYRILLIC)},
    {0xA720, 0xA7FF, L(LATIN)},     {0xA8E0, 0xA8FF, L(DEVANAGARI)}, {0xA960, 0xA97F, L(HANGUL)},
    {0xAB30, 0xAB6F, L(LATIN)},     {0xAC00, 0xD7FF, L(HANGUL)},     {0xF900, 0xFAFF, L(HAN)},
    {0xFB00, 0xFB06, L(LATIN)},     {0xFB13, 0xFB17, L(ARMENIAN)},   {0xFB1D, 0xFB4F, L(HEBREW)},
    {0xFB50, 0xFDFF, L(ARABIC)},    {0xFE70, 0xFEFF, L(ARABIC)},     {0xFF21, 0xFF3A, L(LATIN)},
    {0xFF41, 0xFF5A, L(LATIN)},     {0xFF66, 0xFF9F, L(KANA)},       {0xFFA0, 0xFFDC, L(HANGUL)},
    {0x1B000, 0x1B16F, L(KANA)},    {0x20000, 0x3134F, L(HAN)},
};

int dmt_script_of(long c) {
    size_t lo = 0, hi = sizeof blocks / sizeof blocks[0];
    while (lo < hi) { /* the first block that ends at or after c */
        size_t mid = (lo + hi) / 2;
        if (blocks[mid].last < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < sizeof blocks / sizeof blocks[0] && blocks[lo].first <= c ? blocks[lo].script : -1;
}

#define B(s) DMT_SCRIPT_BIT(L(s))

/* Codes separated by spaces, and their scripts. */
static const struct {
    const char *codes;
    dmt_scripts scripts;
} languages[] = {
    {"af br ca ceb co cs cy da de en eo es et eu fi fil fo fr fy ga gd gl ha haw hmn hr ht hu id ig is it jv "
     "la lb lt lv mg mi ms mt nb nl nn no ny oc pb pl pt qu ro rw sk sl sm sn so sq st su sv sw tk tl tr vi "
     "wo xh yo zu", B(LATIN)},
    {"az kk ku uz", B(LATIN) | B(CYRILLIC) | B(ARABIC)},
    {"sr bs", B(LATIN) | B(CYRILLIC)},
    {"ru uk be bg mk ky tg tt ba cv ce os sah", B(CYRILLIC)},
    {"mn", B(CYRILLIC) | B(MONGOLIAN)},
    {"el", B(GREEK)}, {"hy", B(ARMENIAN)}, {"ka", B(GEORGIAN)}, {"he iw yi", B(HEBREW)},
    {"ar fa ur ps ug sd ckb", B(ARABIC)}, {"syr", B(SYRIAC)}, {"dv", B(THAANA)},
    {"hi mr ne sa mai bho", B(DEVANAGARI)}, {"bn as", B(BENGALI)}, {"pa", B(GURMUKHI) | B(ARABIC)},
    {"gu", B(GUJARATI)}, {"or", B(ORIYA)}, {"ta", B(TAMIL)}, {"te", B(TELUGU)}, {"kn", B(KANNADA)},
    {"ml", B(MALAYALAM)}, {"si", B(SINHALA)}, {"th", B(THAI)}, {"lo", B(LAO)}, {"bo dz", B(TIBETAN)},
    {"my", B(MYANMAR)}, {"km", B(KHMER)}, {"am ti", B(ETHIOPIC)}, {"ko", B(HANGUL) | B(HAN)},
    {"ja", B(KANA) | B(HAN)}, {"zh zt", B(HAN) | B(BOPOMOFO)},
};

/* ISO 15924 subtags. */
static const struct {
    char tag[5];
    dmt_scripts scripts;
} script_tags[] = {
    {"latn", B(LATIN)},   {"cyrl", B(CYRILLIC)},          {"grek", B(GREEK)},          {"arab", B(ARABIC)},
    {"hebr", B(HEBREW)},  {"deva", B(DEVANAGARI)},        {"beng", B(BENGALI)},        {"armn", B(ARMENIAN)},
    {"geor", B(GEORGIAN)}, {"thai", B(THAI)},              {"taml", B(TAMIL)},          {"mong", B(MONGOLIAN)},
    {"hans", B(HAN) | B(BOPOMOFO)}, {"hant", B(HAN) | B(BOPOMOFO)}, {"jpan", B(KANA) | B(HAN)},
    {"kore", B(HANGUL) | B(HAN)},
};

/* Whether the space-separated list holds the n-byte code (compared without case). */
static int listed(const char *list, const char *code, size_t n) {
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, " ");
        if (k == n && !strncasecmp(p, code, n)) return 1;
        p += k + (p[k] == ' ');
    }
    return 0;
}

dmt_scripts dmt_language_scripts(const char *code) {
    if (!code) return 0;
    size_t n = strcspn(code, "-_");
    for (const char *sub = code + n; *sub;) { /* a script subtag decides alone */
        sub++;
        size_t k = strcspn(sub, "-_");
        for (size_t t = 0; k == 4 && t < sizeof script_tags / sizeof script_tags[0]; t++)
            if (!strncasecmp(sub, script_tags[t].tag, 4)) return script_tags[t].scripts;
        sub += k;
    }
    if (n == 0) return 0;
    for (size_t i = 0; i < sizeof languages / sizeof languages[0]; i++)
        if (listed(languages[i].codes, code, n)) return languages[i].scripts;
    return 0;
}

/* One-letter words of Latin-script languages (French "h": 14 h 30, an hour). */
static const struct {
    const char *codes, *letters;
} letter_words[] = {
    {"en", "ai"}, {"de", ""}, {"fr", "ahy"}, {"cs", "aikosuvz"}, {"sk", "aikosuvz"}, {"pl", "aiouwz"},
    {"es", "aeouy"}, {"pt pb", "aeo"}, {"it", "aeio"}, {"nl", "u"}, {"ca", "aeio"}, {"ro", "a"},
    {"sv da nb nn no", "i"}, {"hu", "a"}, {"hr bs sr sl", "aiksuvoz"},
};

const char *dmt_language_letter_words(const char *code) {
    if (!code) return NULL;
    size_t n = strcspn(code, "-_");
    for (size_t i = 0; n && i < sizeof letter_words / sizeof letter_words[0]; i++)
        if (listed(letter_words[i].codes, code, n)) return letter_words[i].letters;
    return NULL;
}

int dmt_scripts_foreign_letter(const char *s, size_t len, dmt_scripts known) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        int n = u[i] < 0x80 ? 1 : (u[i] >> 5) == 6 ? 2 : (u[i] >> 4) == 14 ? 3 : (u[i] >> 3) == 30 ? 4 : 0;
        if (!n || i + (size_t)n > len) return 0;
        long c = n == 1 ? u[i] : u[i] & (0x7F >> n);
        for (int k = 1; k < n; k++) {
            if ((u[i + k] & 0xC0) != 0x80) return 0;
            c = c << 6 | (u[i + k] & 0x3F);
        }
        int script = dmt_script_of(c);
        if (script >= 0 && !(known & DMT_SCRIPT_BIT(script))) return 1;
        i += (size_t)n;
    }
    return 0;
}
