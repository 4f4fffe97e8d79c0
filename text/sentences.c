/* sentences.c — the sentence splitter (rules in sentences.h). */
#include "text/sentences.h"

#include "base/words.h"

#include <stdint.h>
#include <string.h>

/* The code point at s[i] and its length in bytes. Lenient: a byte that does not
 * start a valid sequence is returned as itself with length 1. */
static uint32_t cp_at(const char *s, size_t len, size_t i, size_t *n) {
    const unsigned char *p = (const unsigned char *)s + i;
    size_t left = len - i;
    *n = 1;
    if (p[0] < 0x80) return p[0];
    int need = p[0] >= 0xF0 && p[0] < 0xF5 ? 3 : p[0] >= 0xE0 && p[0] < 0xF0 ? 2 : p[0] >= 0xC2 && p[0] < 0xE0 ? 1 : -1;
    if (need < 0 || (size_t)need >= left) return p[0];
    uint32_t c = p[0] & (0x3F >> need);
    for (int k = 1; k <= need; k++) {
        if ((p[k] & 0xC0) != 0x80) return p[0];
        c = c << 6 | (p[k] & 0x3F);
    }
    *n = (size_t)need + 1;
    return c;
}

static int is_linebreak(uint32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x85 || c == 0x2028 || c == 0x2029;
}

static int is_space(uint32_t c) {
    return c == ' ' || c == '\t' || is_linebreak(c) || c == 0xA0 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* 。！？ end a sentence even without a space after them. */
static int is_cjk_terminator(uint32_t c) { return c == 0x3002 || c == 0xFF01 || c == 0xFF1F; }

static int is_terminator(uint32_t c) {
    return c == '.' || c == '!' || c == '?' || c == 0x2026 /* … */ || is_cjk_terminator(c);
}

/* Closing quotes and brackets that belong to the sentence before them. */
static int is_closer(uint32_t c) {
    return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}' || c == 0xBB /* » */ ||
           c == 0x201D /* ” */ || c == 0x2019 /* ’ */ || c == 0x203A /* › */ || c == 0x300D || c == 0x300F;
}

static int is_opener(uint32_t c) {
    return c == '"' || c == '\'' || c == '(' || c == '[' || c == 0xAB /* « */ || c == 0x201C /* “ */ ||
           c == 0x2018 /* ‘ */ || c == 0x201E /* „ */ || c == 0x2039 /* ‹ */ || c == 0xBF /* ¿ */ ||
           c == 0xA1 /* ¡ */ || c == 0x300C || c == 0x300E || c == '-' || c == 0x2013 || c == 0x2014;
}

/* Uppercase letters of the Latin, Greek and Cyrillic blocks (enough for a heuristic). */
static int is_upper(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return 1;
    if (c >= 0xC0 && c <= 0xDE) return c != 0xD7;
    if (c >= 0x100 && c <= 0x137) return c % 2 == 0;
    if (c >= 0x139 && c <= 0x148) return c % 2 == 1;
    if (c >= 0x14A && c <= 0x177) return c % 2 == 0;
    if (c >= 0x178 && c <= 0x17E) return c == 0x178 || c % 2 == 1;
    if (c == 0x386 || (c >= 0x388 && c <= 0x38F) || (c >= 0x391 && c <= 0x3AB)) return 1;
    if (c >= 0x400 && c <= 0x42F) return 1;
    if (c >= 0x460 && c <= 0x4FF) return c % 2 == 0;
    if (c >= 0x1E00 && c <= 0x1EFF) return c % 2 == 0;
    return 0;
}

/* Letters of scripts without case (Hebrew, Arabic, Indic, Thai, CJK, Hangul...):
 * after a terminator and a space they may open a sentence. */
static int is_caseless_letter(uint32_t c) {
    return (c >= 0x0590 && c <= 0x1CFF && !(c >= 0x10A0 && c <= 0x10FF)) || (c >= 0x3040 && c <= 0xD7AF) ||
           (c >= 0xF900 && c <= 0xFAFF) || c >= 0x20000;
}

static int opens_sentence(uint32_t c) {
    return is_upper(c) || (c >= '0' && c <= '9') || is_opener(c) || is_caseless_letter(c);
}

/* Abbreviations that never end a sentence (compared lowercase, without the dot),
 * and those that do not end one when a number follows ("No. 5", "Fig. 3"). */
static const char *const abbrev_always[] = {
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "inc", "ltd", "co", "corp", "approx", "dept",
    "mt", "gen", "col", "lt", "sgt", "capt", "rev", "hon", "gov", "sen", "rep", "cf", "al", "ed", "eds",
    "bzw", "ca", "usw", "vgl", "evtl", "ggf", "inkl", "hr", "hrn", "fr", "frl", "str", "mme", "mlle", "mgr",
    "sra", "srta", "dña", "tel", "resp", "jan", "feb", "aug", "sept", "oct", "nov", "dec",
    /* German: millions, billions, thousands, century, born, died, titles, so-called, plus; French: avenue,
     * about; Czech: so-called, that is, for example, about, among others */
    "mio", "mrd", "tsd", "jh", "jhd", "geb", "gest", "med", "phil", "rer", "nat", "jur", "dipl", "ing", "sog", "zzgl",
    "av", "env", "tzv", "tj", "např", "cca", "mj", NULL};
static const char *const abbrev_before_number[] = {"no", "nr", "art", "fig", "figs", "vol", "pp", "p", "ch",
                                                   "sec", "tab", "abs", "op", "bd", "s", "č", "abb", "kap", "bsp",
                                                   "anm", "ziff", "str", NULL};

static int in_list(const char *const *list, const char *w) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], w)) return 1;
    return 0;
}

/* German writes ordinals as a number and a full stop: "am 3. Oktober", "im 19.
 * Jahrhundert", "der 2. Weltkrieg", "1. FC Köln". Before these words (compared as
 * written) a number of one or two digits and its dot do not end a sentence. */
static const char *const after_ordinal[] = {
    "Januar", "Jänner", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober",
    "November", "Dezember", "Jahrhundert", "Jahrhunderts", "Jahrtausend", "Weltkrieg", "Weltkriegs", "Mal",
    "Platz", "Stock", "Klasse", "Liga", "Runde", "Spieltag", "Etage", "Geburtstag", "Jahrestag", "Auflage",
    "Bundesliga", "FC", "Kapitel", "Lauf", "Satz", "Halbzeit", "Tag", "Woche", "Monat", "Jahr", "Mannschaft",
    "Januars", "Februars", "Augusts", "Oktobers", "Novembers", "Dezembers", "Septembers", "Jh", "Jhd", "Jhs", NULL};

/* Whether text[b..dot) is a number of one or two digits and the word at text[next..len)
 * is one of after_ordinal (then ends: space, punctuation or the text's end). */
static int is_ordinal(const char *text, size_t len, size_t b, size_t dot, size_t next) {
    if (dot - b < 1 || dot - b > 2) return 0;
    for (size_t i = b; i < dot; i++)
        if (text[i] < '0' || text[i] > '9') return 0;
    for (int i = 0; after_ordinal[i]; i++) {
        size_t k = strlen(after_ordinal[i]);
        if (next + k <= len && !memcmp(text + next, after_ordinal[i], k) &&
            (next + k == len || strchr(" \t\r\n,.;:!?)", text[next + k]) || (unsigned char)text[next + k] == 0xC2))
            return 1;
    }
    return 0;
}

/* Is the word that ends just before the '.' at text[dot] an abbreviation (or a
 * German ordinal)? The word starts after the last space at or after line_start;
 * next is the code point that follows the terminator and its spaces, at next_at. */
static int is_abbreviation(const char *text, size_t len, size_t line_start, size_t dot, size_t next_at,
                           uint32_t next) {
    size_t b = dot;
    while (b > line_start) {
        unsigned char ch = (unsigned char)text[b - 1];
        if (ch < 0x80 ? is_space(ch) : ch == 0xA0 && b - 1 > line_start && (unsigned char)text[b - 2] == 0xC2) break;
        b--;
    }
    /* leading quotes and brackets are not part of the word */
    while (b < dot) {
        size_t n;
        uint32_t c = cp_at(text, dot, b, &n);
        if (!is_opener(c)) break;
        b += n;
    }
    if (b == dot) return 0;
    if (is_ordinal(text, len, b, dot, next_at)) return 1;
    size_t wlen = dot - b;
    /* a single letter: an initial ("J. Smith"), or a piece of a spaced abbreviation
     * ("z. B.", "d. h.", "u. a.", Czech "č. 5"); a letter is hardly ever a
     * sentence's last word */
    size_t n;
    uint32_t c0 = cp_at(text, dot, b, &n);
    if (n == wlen) return is_upper(c0) || (c0 >= 'a' && c0 <= 'z') || (c0 >= 0xDF && c0 <= 0x24F);
    /* dotted pieces of one or two letters: "e.g", "U.S", "z.B", "d.h", "J.-P" */
    if (memchr(text + b, '.', wlen)) {
        size_t run = 0;
        for (size_t i = b; i < dot; i++) {
            if (text[i] == '.') {
                if (run == 0 || run > 2) return 0;
                run = 0;
            } else if (text[i] == '-' && i > b && text[i - 1] == '.') {
                continue; /* "J.-P." */
            } else if ((unsigned char)text[i] >= 0x80 || ((text[i] | 0x20) >= 'a' && (text[i] | 0x20) <= 'z')) {
                run++;
            } else {
                return 0;
            }
        }
        return run >= 1 && run <= 2;
    }
    if (wlen > 3 && !memcmp(text + dot - 3, "str", 3) && (unsigned char)text[b] >= 'A' && (unsigned char)text[b] <= 'Z')
        return 1; /* a German street: "Hauptstr." */
    if (wlen > 7) return 0;
    char w[8];
    for (size_t i = 0; i < wlen; i++) {
        char ch = text[b + i];
        w[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch | 0x20) : ch;
    }
    w[wlen] = 0;
    if (in_list(abbrev_always, w)) return 1;
    return next >= '0' && next <= '9' && in_list(abbrev_before_number, w);
}

/* Scans one sentence from start (not a space); returns its end (exclusive, no
 * trailing whitespace). Stops at a line break or a sentence boundary. */
static size_t scan_sentence(const char *text, size_t len, size_t start) {
    size_t i = start, end = start;
    while (i < len) {
        size_t n;
        uint32_t c = cp_at(text, len, i, &n);
        if (is_linebreak(c)) break;
        if (!is_terminator(c)) {
            if (!is_space(c)) end = i + n;
            i += n;
            continue;
        }
        /* a run of terminators, then closing quotes/brackets */
        size_t run_start = i, k = i;
        int run = 0, cjk = 0, dots = 0;
        while (k < len) {
            uint32_t t = cp_at(text, len, k, &n);
            if (!is_terminator(t)) break;
            cjk |= is_cjk_terminator(t);
            dots += t == '.';
            run++;
            k += n;
        }
        while (k < len) {
            uint32_t t = cp_at(text, len, k, &n);
            if (!is_closer(t)) break;
            k += n;
        }
        end = k;
        if (k >= len) return k;
        uint32_t after = cp_at(text, len, k, &n);
        if (cjk && !is_space(after)) return k;
        if (!is_space(after) || is_linebreak(after)) {
            i = k;
            continue;
        }
        size_t m = k;
        uint32_t next = after;
        while (m < len) {
            next = cp_at(text, len, m, &n);
            if (!is_space(next) || is_linebreak(next)) break;
            m += n;
        }
        if (m >= len || is_linebreak(next)) return k;
        if (opens_sentence(next) && !(run == 1 && dots == 1 && is_abbreviation(text, len, start, run_start, m, next)))
            return k;
        i = k;
    }
    return end;
}

/* Bullets that start a list item: - * + and the typographic ones (• ◦ ‣ ⁃ ▪ ▫ ■ □
 * ● ○ ► ▶ ▸ ➢ ➤ → ✓ ✔ ✗ ✘ ☐ ☑ ☒ – — ·), and > (a quoted line). */
static int is_bullet(uint32_t c) {
    static const uint32_t wide[] = {0x2022, 0x25E6, 0x2023, 0x2043, 0x25AA, 0x25AB, 0x25A0, 0x25A1, 0x25CF,
                                    0x25CB, 0x25BA, 0x25B6, 0x25B8, 0x27A2, 0x27A4, 0x2192, 0x2713, 0x2714,
                                    0x2717, 0x2718, 0x2610, 0x2611, 0x2612, 0x2013, 0x2014, 0xB7};
    if (c == '-' || c == '*' || c == '+' || c == '>') return 1;
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        if (c == wide[i]) return 1;
    return 0;
}

/* The end of an enumerator at text[i] ("2)", "(3)", "[4]", "a)", "(iv)", "1.2)"), or
 * i. Numbers with a full stop ("1.", "3. Mai") are left to the sentence rules,
 * which end a sentence after "1." anyway. */
static size_t enumerator_end(const char *text, size_t len, size_t i) {
    char open = i < len && (text[i] == '(' || text[i] == '[') ? text[i] : 0, close = open == '[' ? ']' : ')';
    size_t k = i + (open != 0), digits = 0, letters = 0;
    while (k < len && ((text[k] >= '0' && text[k] <= '9') || (digits && text[k] == '.' && k + 1 < len &&
                                                                text[k + 1] >= '0' && text[k + 1] <= '9')))
        digits++, k++;
    if (!digits)
        while (k < len && letters < 4 && ((text[k] | 32) >= 'a' && (text[k] | 32) <= 'z') &&
               (letters == 0 || strchr("ivx", text[k] | 32)))
            letters++, k++;
    int roman = 1; /* "a)" alone, or a Roman number ("iv)") */
    for (size_t j = k - letters; j < k; j++) roman &= strchr("ivx", text[j] | 32) != NULL;
    if ((!digits && !letters) || digits > 9 || (letters > 1 && !roman) || k >= len || text[k] != close) return i;
    return k + 1;
}

/* Where a line's text starts after its list markers (bullets, enumerators, a
 * Markdown heading's #s), each followed by horizontal space: start when it has
 * none, or when nothing but markers is on the line. A small model read a marker as
 * part of the sentence and left its first words untranslated ("- Check your
 * e-mail" -> "- Check deine E-Mail", "• Buy milk" -> "• Buy milk, Eier"), so the
 * markers stay in the gap before the sentence, copied as they are. */
static size_t after_list_markers(const char *text, size_t len, size_t start) {
    size_t pos = start, text_start = start;
    for (;;) {
        size_t n, k = enumerator_end(text, len, pos);
        if (k == pos) {
            uint32_t c = cp_at(text, len, pos, &n);
            if (is_bullet(c)) k = pos + n;
            else if (c == '#')
                for (k = pos; k < len && k - pos < 6 && text[k] == '#';) k++;
        }
        if (k == pos || k >= len) return text_start;
        uint32_t c = cp_at(text, len, k, &n);
        if (!is_space(c) || is_linebreak(c)) return text_start;
        while (k < len && (c = cp_at(text, len, k, &n), is_space(c) && !is_linebreak(c))) k += n;
        if (k >= len || is_linebreak(c)) return text_start;
        pos = text_start = k;
    }
}

int dmt_sentences_split(const char *text, size_t len, dmt_span *out, int cap) {
    int count = 0;
    size_t pos = 0;
    int line_start = 1; /* nothing but whitespace since the text's or the line's start */
    if (!text) return 0;
    while (pos < len) {
        size_t n;
        uint32_t c = cp_at(text, len, pos, &n);
        if (is_space(c)) {
            line_start |= is_linebreak(c);
            pos += n;
            continue;
        }
        if (line_start) {
            line_start = 0;
            size_t k = after_list_markers(text, len, pos);
            if (k != pos) {
                pos = k;
                continue;
            }
        }
        size_t end = scan_sentence(text, len, pos);
        if (end <= pos) end = pos + n; /* cannot happen; guarantees progress */
        if (count < cap) out[count] = (dmt_span){pos, end - pos};
        count++;
        pos = end;
    }
    return count;
}

/* ---- chunks of a sentence too long for the model (sentences.h) ---- */

/* Punctuation after which a clause may end: , ; : and their CJK / full-width forms,
 * dashes, closing brackets. */
static int is_clause_end(uint32_t c) {
    return c == ',' || c == ';' || c == ':' || c == 0x2013 /* – */ || c == 0x2014 /* — */ || c == ')' || c == ']' ||
           c == '}' || c == 0x3001 /* 、 */ || c == 0xFF0C /* ， */ || c == 0xFF1B /* ； */ || c == 0xFF1A /* ： */ ||
           c == 0xFF09 /* ） */ || c == 0x060C /* Arabic comma */ || c == 0x061B /* Arabic semicolon */;
}

static size_t next_char(const char *s, size_t len, size_t i) {
    size_t n;
    cp_at(s, len, i, &n);
    return i + n;
}

/* [a, b) without the whitespace at either end. */
static void trim(const char *s, size_t *a, size_t *b) {
    size_t n;
    while (*a < *b && is_space(cp_at(s, *b, *a, &n))) *a += n;
    while (*b > *a) {
        size_t k = *b - 1;
        while (k > *a && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        if (!is_space(cp_at(s, *b, k, &n))) break;
        *b = k;
    }
}

/* The longest prefix s[p..e) that fits, e a character boundary in (p, len]; p when
 * not even one character fits. Binary search over character boundaries, assuming
 * that a prefix of a fitting text fits (piece counts grow with the text). */
static size_t longest_fitting(const char *s, size_t len, size_t p, int (*fits)(void *, const char *, size_t),
                              void *arg) {
    size_t lo = p, hi = len; /* s[p..lo) fits (or lo == p); no prefix ending past hi does */
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        while (mid > lo && mid < len && ((unsigned char)s[mid] & 0xC0) == 0x80) mid--;
        if (mid <= lo) mid = next_char(s, len, lo); /* the first boundary above lo */
        if (mid > hi) break;
        if (fits(arg, s + p, mid - p)) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

int dmt_sentence_chunks(const char *s, size_t len, int (*fits)(void *arg, const char *text, size_t len), void *arg,
                        dmt_span *out, int cap) {
    size_t p = 0, e = len;
    trim(s, &p, &e);
    int n = 0;
    while (p < e) {
        size_t cut, next;
        if (fits(arg, s + p, e - p)) {
            cut = next = e;
        } else {
            size_t l = longest_fitting(s, e, p, fits, arg);
            if (l == p) return -1; /* one character is too long */
            /* the last clause end, else the last whitespace, within the fitting prefix */
            size_t clause = 0, space = 0, k = p, cn;
            while (k < l) {
                uint32_t c = cp_at(s, e, k, &cn);
                size_t after = k + cn;
                if (is_clause_end(c) && after <= l && after < e) clause = after;
                if (is_space(c) && k > p) space = k;
                k = after;
            }
            /* a clause end that leaves less than a quarter of the room used is not worth
             * the extra chunk: prefer the whitespace nearest the limit then */
            if (clause && (clause - p) * 4 >= l - p) cut = clause;
            else if (space) cut = space;
            else if (clause) cut = clause;
            else cut = l;
            next = cut;
        }
        size_t a = p, b = cut;
        trim(s, &a, &b);
        if (a < b) {
            if (n < cap) out[n] = (dmt_span){a, b - a};
            n++;
        }
        p = next;
        size_t sn;
        while (p < e && is_space(cp_at(s, e, p, &sn))) p += sn;
        if (p == a && b == a) p = next_char(s, e, p); /* cannot happen: progress anyway */
    }
    return n;
}

int dmt_gap_pairs(const char *text, size_t len, size_t gap_start, size_t gap_end, const char *out, size_t out_len,
                  size_t out_start, int *pairs) {
    int n = 0;
    if (gap_end > len) gap_end = len;
    for (size_t i = gap_start; i < gap_end; i++) {
        if (dmt_is_word_space((unsigned char)text[i]) || (i > 0 && !dmt_is_word_space((unsigned char)text[i - 1]))) continue;
        size_t end = i; /* a word that runs on into the sentence (a no-break space before "Bonjour") is the
                           sentence's first, which its own pairs have: listed once */
        while (end < len && !dmt_is_word_space((unsigned char)text[end])) end++;
        if (end > gap_end) continue;
        if (pairs) {
            pairs[2 * n] = dmt_word_index_at(text, len, i);
            pairs[2 * n + 1] = dmt_word_index_at(out, out_len, out_start + (i - gap_start));
        }
        n++;
    }
    return n;
}
