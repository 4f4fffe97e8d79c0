/* fuzz_text.c — libFuzzer target for the text handling of requests.
 *
 * One input is checked four ways:
 *   1. dmt_utf8_validate against a reference decoder written here from RFC 3629 the
 *      other way round (decode the code point by its lead byte, then refuse
 *      overlongs, surrogates and values past U+10FFFF): same verdict, same offset;
 *   2. dmt_sentences_split invariants: the count does not depend on the room given
 *      (and nothing is written past it), spans are in order, inside the text, never
 *      empty, never start or end with whitespace, never cross a '\n', and every byte
 *      outside them is whitespace, so gaps + sentences reassemble to the input;
 *   3. dmt_detect over each sentence answers configured codes, best first, with
 *      confidences in [0, 100];
 *   4. the tokenizer fixtures (tests/fixtures/tokenizer, tokenizer-vocab): encode
 *      refuses exactly invalid UTF-8, NUL bytes and inputs over the id limit; ids are
 *      in range and decode to valid UTF-8; decoding arbitrary ids never fails for
 *      ids in range and refuses the others.
 *   5. dmt_sentence_chunks over each sentence with a limit of a few bytes: chunks
 *      fit, are trimmed, in order, and only whitespace lies between them.
 *   6. dmt_passthrough (model/passthrough.h) over the whole input, without and with
 *      an unspellable test (a stand-in: words with a byte from 0xD0 up): spans lie inside
 *      it, in order, valid UTF-8; the stripped sentence is no longer and has n_kept
 *      words; put back into the stripped sentence itself (an identity "translation")
 *      with the identity alignment, with none and with pairs made of input bytes
 *      (out of range ones included), every span comes out, the output is valid
 *      UTF-8 when the input is, and the new alignment's words exist on both sides.
 * A failed check aborts, which libFuzzer reports as a crash with the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "model/marks.h"
#include "model/numbers.h"
#include "model/placeholders.h"
#include "model/passthrough.h"
#include "model/scripts.h"
#include "text/detect.h"
#include "text/textsafe.h"
#include "text/sentences.h"
#include "tokenizer/tokenizer.h"
#include "base/utf8.h"

#define REQUIRE(cond, ...)                                                        \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "fuzz_text: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
            abort();                                                              \
        }                                                                         \
    } while (0)

/* ---- 1. reference UTF-8 decoder ---- */

/* 1 when valid; else 0 and the offset of the sequence that fails. */
static int ref_utf8(const unsigned char *p, size_t len, size_t *bad) {
    size_t i = 0;
    while (i < len) {
        unsigned b = p[i];
        size_t n;
        uint32_t cp, min;
        if (b < 0x80) { i++; continue; }
        if ((b & 0xE0) == 0xC0) { n = 2; cp = b & 0x1F; min = 0x80; }
        else if ((b & 0xF0) == 0xE0) { n = 3; cp = b & 0x0F; min = 0x800; }
        else if ((b & 0xF8) == 0xF0) { n = 4; cp = b & 0x07; min = 0x10000; }
        else { *bad = i; return 0; } /* continuation byte or F8..FF */
        if (len - i < n) { *bad = i; return 0; }
        for (size_t k = 1; k < n; k++) {
            if ((p[i + k] & 0xC0) != 0x80) { *bad = i; return 0; }
            cp = cp << 6 | (p[i + k] & 0x3F);
        }
        if (cp < min || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) { *bad = i; return 0; }
        i += n;
    }
    return 1;
}

static void check_utf8(const unsigned char *data, size_t size) {
    size_t got_off = (size_t)-1, want_off = (size_t)-1;
    int got = dmt_utf8_validate((const char *)data, size, &got_off);
    int want = ref_utf8(data, size, &want_off);
    REQUIRE(got == want, "validate says %d, reference %d", got, want);
    if (!want) REQUIRE(got_off == want_off, "first bad byte at %zu, reference %zu", got_off, want_off);
}

/* ---- 2. sentence splitting ---- */

/* The splitter's whitespace, decoded leniently as it does. Returns the code point's
 * length in *n. */
static int lenient_space(const unsigned char *p, size_t left, size_t *n) {
    *n = 1;
    if (p[0] < 0x80)
        return p[0] == '\n' || p[0] == '\r' || p[0] == 0x0B || p[0] == 0x0C ? 2 : p[0] == ' ' || p[0] == '\t';
    int need = p[0] >= 0xF0 && p[0] < 0xF5 ? 3 : p[0] >= 0xE0 && p[0] < 0xF0 ? 2 : p[0] >= 0xC2 && p[0] < 0xE0 ? 1 : -1;
    uint32_t c = p[0]; /* a byte that starts no valid sequence stands for itself (0xA0, 0x85 are spaces) */
    if (need > 0 && (size_t)need < left) {
        uint32_t v = p[0] & (0x3F >> need);
        int k;
        for (k = 1; k <= need && (p[k] & 0xC0) == 0x80; k++) v = v << 6 | (p[k] & 0x3F);
        if (k > need) { c = v; *n = (size_t)need + 1; }
    }
    if (c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x85 || c == 0x2028 || c == 0x2029) return 2;
    return c == ' ' || c == '\t' || /* overlong forms too */
           c == 0xA0 || (c >= 0x2000 && c <= 0x200A) || c == 0x202F || c == 0x205F || c == 0x3000;
}

#define MAX_SPANS 4096

static int check_sentences(const unsigned char *data, size_t size, dmt_span *spans) {
    const char *text = (const char *)data;
    int n = dmt_sentences_split(text, size, NULL, 0);
    REQUIRE(n >= 0 && (size_t)n <= size, "%d sentences in %zu bytes", n, size);
    if (n > MAX_SPANS) return 0;
    /* a short array: the count is unchanged and the canary past it untouched */
    int cap = n / 2;
    spans[cap] = (dmt_span){(size_t)-1, (size_t)-1};
    REQUIRE(dmt_sentences_split(text, size, spans, cap) == n, "count changes with cap %d", cap);
    REQUIRE(spans[cap].start == (size_t)-1 && spans[cap].len == (size_t)-1, "wrote past cap %d", cap);
    REQUIRE(dmt_sentences_split(text, size, spans, MAX_SPANS) == n, "count changes with a full array");
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        const dmt_span *s = &spans[i];
        REQUIRE(s->len > 0, "sentence %d is empty", i);
        REQUIRE(s->start >= pos && s->start <= size && s->len <= size - s->start,
                "sentence %d [%zu, +%zu) out of order or outside %zu bytes", i, s->start, s->len, size);
        /* the gap before it is whitespace, and a line's list markers: short words at
         * the start of the sentence's line, each followed by a space */
        size_t markers_from = pos == 0 ? 0 : (size_t)-1;
        for (size_t k = pos, w; k < s->start; k += w) {
            int space = lenient_space(data + k, s->start - k, &w);
            REQUIRE(k + w <= s->start, "byte %zu of the gap before sentence %d runs into it", k, i);
            if (space == 2) markers_from = k + w;
            if (space) continue;
            REQUIRE(markers_from != (size_t)-1, "non-space byte %zu in the gap before sentence %d, not at a line's start",
                    k, i);
            size_t t = k;
            while (t < s->start && !lenient_space(data + t, s->start - t, &w)) t += w;
            REQUIRE(t < s->start && t - k <= 12 && lenient_space(data + t, s->start - t, &w) == 1,
                    "gap word at %zu before sentence %d: no list marker (%zu bytes)", k, i, t - k);
            w = t - k;
        }
        size_t w;
        REQUIRE(!lenient_space(data + s->start, size - s->start, &w), "sentence %d starts with a space", i);
        REQUIRE(!memchr(data + s->start, '\n', s->len), "sentence %d crosses a line break", i);
        /* the last code point is not a space: find where it starts */
        size_t end = s->start + s->len, last = end - 1;
        while (last > s->start && end - last < 4 && (data[last] & 0xC0) == 0x80) last--;
        if (lenient_space(data + last, size - last, &w) && last + w == end)
            REQUIRE(0, "sentence %d ends with a space", i);
        pos = end;
    }
    for (size_t k = pos, w; k < size; k += w)
        REQUIRE(lenient_space(data + k, size - k, &w), "non-space byte %zu after the last sentence", k);
    return n;
}

/* ---- 3. language detection ---- */

static void check_detect(const dmt_config *cfg, const unsigned char *data, const dmt_span *spans, int n) {
    dmt_detect_guess g[DMT_MAX_LANGUAGES];
    for (int i = 0; i < n && i < 64; i++) {
        int k = dmt_detect(cfg, (const char *)data + spans[i].start, spans[i].len, g, DMT_MAX_LANGUAGES);
        REQUIRE(k >= 1 || cfg->n_languages == 0, "no guess for sentence %d", i);
        for (int j = 0; j < k; j++) {
            REQUIRE(dmt_config_language(cfg, g[j].code) != NULL, "detected \"%s\" is not configured", g[j].code);
            REQUIRE(g[j].confidence >= 0 && g[j].confidence <= 100, "confidence %g", g[j].confidence);
            REQUIRE(j == 0 || g[j].confidence <= g[0].confidence, "guess %d above the best", j);
        }
    }
}

/* ---- 4. tokenizer ---- */

#define MAX_IDS 2048

static void check_tokenizer(const dmt_tokenizer *tok, const unsigned char *data, size_t size, int32_t *ids) {
    char err[256];
    int vocab = dmt_tokenizer_vocab_size(tok);
    int max_ids = size & 1 ? 8 : MAX_IDS; /* odd sizes also exercise the id limit */
    int n = dmt_tokenizer_encode(tok, (const char *)data, size, ids, max_ids, err, sizeof err);
    int valid = dmt_utf8_validate((const char *)data, size, NULL) && !memchr(data, 0, size);
    if (n < 0) {
        REQUIRE(!valid || strstr(err, "too long"), "valid text refused: %s", err);
    } else {
        REQUIRE(valid, "invalid text encoded to %d ids", n);
        REQUIRE(n <= max_ids, "%d ids over the limit %d", n, max_ids);
        for (int i = 0; i < n; i++) REQUIRE(ids[i] >= 0 && ids[i] < vocab, "id %d out of range", ids[i]);
        char *out = NULL;
        int len = dmt_tokenizer_decode(tok, ids, n, &out, err, sizeof err);
        REQUIRE(len >= 0 && out, "decoding encoded ids failed: %s", err);
        REQUIRE(dmt_utf8_validate(out, (size_t)len, NULL), "decoded text is not UTF-8");
        free(out);
    }
    /* the input as ids: 16-bit values, some out of range */
    int m = (int)(size / 2 < MAX_IDS ? size / 2 : MAX_IDS), in_range = 1;
    for (int i = 0; i < m; i++) {
        ids[i] = (int32_t)(data[2 * i] | data[2 * i + 1] << 8) - 256;
        in_range &= ids[i] >= 0 && ids[i] < vocab;
    }
    char *out = NULL;
    int len = dmt_tokenizer_decode(tok, ids, m, &out, err, sizeof err);
    if (in_range) {
        REQUIRE(len >= 0 && out, "decoding in-range ids failed: %s", err);
        REQUIRE(dmt_utf8_validate(out, (size_t)len, NULL), "decoded ids are not UTF-8");
    } else {
        REQUIRE(len < 0 && !out, "out-of-range ids decoded");
    }
    free(out);
}

/* ---- setup ---- */

static dmt_config detect_cfg;
static dmt_tokenizer *tokenizers[2];

static void load_tokenizer(int i, const char *rel, int vocab_size) {
    const char *root = getenv("DEEPMT_FIXTURES");
    char dir[1024], err[512];
    snprintf(dir, sizeof dir, "%s/%s", root && *root ? root : "tests/fixtures", rel);
    tokenizers[i] = dmt_tokenizer_load(dir, vocab_size, 3, err, sizeof err);
    if (!tokenizers[i]) {
        fprintf(stderr, "fuzz_text: %s (run from the repository root or set DEEPMT_FIXTURES)\n", err);
        exit(1);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    static const char *const codes[][2] = {{"en", "English"}, {"de", "German"}, {"fr", "French"}, {"cs", "Czech"}};
    detect_cfg.n_languages = 4;
    for (int i = 0; i < 4; i++) {
        snprintf(detect_cfg.languages[i].code, sizeof detect_cfg.languages[i].code, "%s", codes[i][0]);
        snprintf(detect_cfg.languages[i].name, sizeof detect_cfg.languages[i].name, "%s", codes[i][1]);
    }
    load_tokenizer(0, "tokenizer", 400);
    load_tokenizer(1, "tokenizer-vocab", 399);
    return 0;
}

/* ---- 5. chunks of a sentence too long for the model ---- */

static int fits_bytes(void *arg, const char *text, size_t len) {
    (void)text;
    return len <= *(size_t *)arg;
}

/* dmt_sentence_chunks under a limit of a few bytes: chunks fit, are not empty, carry
 * no whitespace at either end (ASCII space/tab checked here), are in order, and only
 * whitespace lies between them unless a hard cut was needed. */
static void check_chunks(const uint8_t *data, size_t size, const dmt_span *sp) {
    const char *text = (const char *)data + sp->start;
    size_t limit = 4 + (size ? data[0] % 60 : 0);
    static dmt_span chunks[MAX_SPANS + 1];
    int n = dmt_sentence_chunks(text, sp->len, fits_bytes, &limit, NULL, 0);
    if (n < 0) return; /* a character longer than the limit */
    REQUIRE(n <= MAX_SPANS, "%d chunks", n);
    REQUIRE(dmt_sentence_chunks(text, sp->len, fits_bytes, &limit, chunks, n) == n, "count changes");
    size_t prev = 0;
    for (int i = 0; i < n; i++) {
        REQUIRE(chunks[i].len > 0 && chunks[i].len <= limit, "chunk %d of %zu bytes, limit %zu", i, chunks[i].len, limit);
        REQUIRE(chunks[i].start >= prev && chunks[i].start + chunks[i].len <= sp->len, "chunk %d out of order", i);
        const char *c = text + chunks[i].start;
        REQUIRE(c[0] != ' ' && c[0] != '\t' && c[chunks[i].len - 1] != ' ' && c[chunks[i].len - 1] != '\t',
                "chunk %d not trimmed", i);
        for (size_t k = prev; k < chunks[i].start; k++)
            REQUIRE(text[k] == ' ' || text[k] == '\t' || (unsigned char)text[k] >= 0x80 || text[k] == '\v' ||
                        text[k] == '\f' || text[k] == '\r' || text[k] == '\n',
                    "non-space byte 0x%02x lost between chunks %d and %d", (unsigned char)text[k], i - 1, i);
        prev = chunks[i].start + chunks[i].len;
    }
}

static int words_of(const char *s, size_t n) {
    int w = 0;
    for (size_t i = 0; i < n; i++) {
        int sp = s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'), prev_sp = i == 0 || s[i - 1] == ' ' ||
                                                                     (s[i - 1] >= '\t' && s[i - 1] <= '\r');
        w += !sp && prev_sp;
    }
    return w;
}

/* a stand-in for the vocabulary's unspellable test: a word with a byte from 0xD0 up */
static int unspellable_test(void *arg, const char *word, size_t len) {
    (void)arg;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)word[i] >= 0xD0) return 1;
    return 0;
}

static void check_passthrough(const uint8_t *data, size_t size, int with_test) {
    const char *text = (const char *)data;
    dmt_passthrough p;
    static unsigned char missing[128];
    missing['<'] = missing['~'] = 1; /* a vocabulary without them */
    dmt_passthrough_spelling spelling = {missing, unspellable_test, NULL, 1u << ('x' - 'a') | 1u << ('b' - 'a')};
    int r = dmt_passthrough_find_with(text, size, with_test ? &spelling : NULL, &p);
    REQUIRE(r >= 0, "out of memory");
    if (r == 0) {
        REQUIRE(p.n_spans == 0 && !p.stripped, "no span, yet filled");
        return;
    }
    int valid = dmt_utf8_validate(text, size, NULL), words = words_of(text, size);
    REQUIRE(p.stripped_len <= size && strlen(p.stripped) <= p.stripped_len, "stripped longer than the input");
    REQUIRE(words_of(p.stripped, p.stripped_len) == p.n_kept, "%d kept words, %d in the stripped text", p.n_kept,
            words_of(p.stripped, p.stripped_len));
    for (int k = 0; k < p.n_spans; k++) {
        const dmt_passthrough_span *s = &p.spans[k];
        REQUIRE(s->len > 0 && s->start + s->len <= size && (k == 0 || s->start > p.spans[k - 1].start),
                "span %d out of place", k);
        REQUIRE(dmt_utf8_validate(text + s->start, s->len, NULL), "span %d not UTF-8", k);
        REQUIRE(s->word >= 0 && s->word < words && s->prev >= -1 && s->prev < p.n_kept, "span %d's words", k);
    }
    int *pairs = malloc(((size_t)p.n_kept + 8) * 2 * sizeof *pairs), n_pairs = 0;
    REQUIRE(pairs != NULL, "out of memory");
    for (int round = 0; round < 3; round++) {
        n_pairs = 0;
        if (round == 0)
            for (int k = 0; k < p.n_kept; k++) pairs[2 * n_pairs] = k, pairs[2 * n_pairs + 1] = k, n_pairs++;
        else if (round == 2)
            for (size_t k = 0; k + 1 < size && n_pairs < 8; k += 2)
                pairs[2 * n_pairs] = (int8_t)data[k], pairs[2 * n_pairs + 1] = (int8_t)data[k + 1], n_pairs++;
        size_t out_len = 0;
        int *np = NULL, nn = 0;
        char *out = dmt_passthrough_restore(&p, p.stripped, p.stripped_len, round == 1 ? NULL : pairs, n_pairs,
                                            &out_len, &np, &nn);
        REQUIRE(out != NULL && strlen(out) <= out_len, "restore failed");
        for (int k = 0; k < p.n_spans; k++) {
            const dmt_passthrough_span *s = &p.spans[k];
            int found = 0; /* memmem: the span may hold NUL bytes */
            for (size_t i = 0; !found && i + s->len <= out_len; i++) found = !memcmp(out + i, text + s->start, s->len);
            REQUIRE(found, "span %d lost (round %d)", k, round);
        }
        REQUIRE(!valid || dmt_utf8_validate(out, out_len, NULL), "output not UTF-8 (round %d)", round);
        int out_words = words_of(out, out_len);
        for (int q = 0; q < nn; q++)
            REQUIRE(np[2 * q] >= 0 && np[2 * q] < words && np[2 * q + 1] >= 0 && np[2 * q + 1] < out_words &&
                        (q == 0 || np[2 * q + 1] >= np[2 * q - 1]),
                    "pair %d (%d, %d) of %d x %d words (round %d)", q, np[2 * q], np[2 * q + 1], words, out_words,
                    round);
        free(np);
        free(out);
    }
    free(pairs);
    dmt_passthrough_clear(&p);
}

/* model/scripts.c: reading stops at invalid UTF-8, and a word of ASCII is foreign
 * only to a model without Latin; nothing is foreign to one that knows every script */
static void check_scripts(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    dmt_scripts known = size ? (dmt_scripts)data[0] * 0x9E3779B97F4A7C15u : 0;
    int foreign = dmt_scripts_foreign_letter(text, size, known), wide = 0, letters = 0;
    for (size_t i = 0; i < size; i++) {
        wide |= data[i] >= 0x80;
        letters |= ((data[i] | 32) >= 'a' && (data[i] | 32) <= 'z');
    }
    REQUIRE(!foreign || wide || (letters && !(known & DMT_SCRIPT_BIT(DMT_SCRIPT_LATIN))), "ASCII foreign to Latin");
    REQUIRE(!dmt_scripts_foreign_letter(text, size, ~(dmt_scripts)0), "foreign to every script");
    char code[17] = {0};
    memcpy(code, text, size < 16 ? size : 16);
    (void)dmt_language_scripts(code);
}

/* dmt_passthrough_verbatim: only text without an ASCII letter or digit, given back whole */
static void check_verbatim(const uint8_t *data, size_t size) {
    dmt_passthrough p;
    int r = dmt_passthrough_verbatim((const char *)data, size, &p);
    REQUIRE(r >= 0, "out of memory");
    for (size_t i = 0; r == 1 && i < size; i++)
        REQUIRE(!(((data[i] | 32) >= 'a' && (data[i] | 32) <= 'z') || (data[i] >= '0' && data[i] <= '9')),
                "verbatim with a letter or digit");
    if (r == 1) {
        size_t len = 0;
        char *back = dmt_passthrough_restore(&p, "x y", 3, NULL, 0, &len, NULL, NULL);
        REQUIRE(back && len == size && !memcmp(back, data, size), "not given back as it was");
        free(back);
    }
    dmt_passthrough_clear(&p);
}

/* model/marks.c: the run put back into the model's input gives the sentence back */
static void check_marks(const uint8_t *data, size_t size) {
    dmt_marks m;
    if (!dmt_marks_find((const char *)data, size, &m)) {
        REQUIRE(m.len == 0, "no run, yet a length");
        return;
    }
    REQUIRE(m.marks >= 2 && m.marks <= DMT_MARKS_MAX && m.len == m.marks + (size_t)m.spaced &&
                m.start + m.len <= size && strlen(m.run) == m.marks,
            "run out of place");
    size_t n = 0, k = 0;
    char *input = dmt_marks_strip((const char *)data, size, &m, &n);
    REQUIRE(input && n == size - m.len + 1, "strip");
    char *back = dmt_marks_restore(input, n, &m, &k);
    REQUIRE(back && k == size && !memcmp(back, data, size), "restore(strip(text)) is not text");
    free(input);
    free(back);
}

/* Whitespace-separated words, as the word alignment counts them. */
static int count_words(const char *s, size_t n) {
    int words = 0;
    for (size_t i = 0; i < n; i++) {
        int space = s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r');
        int before = i > 0 && !(s[i - 1] == ' ' || (s[i - 1] >= '\t' && s[i - 1] <= '\r'));
        words += !space && !before;
    }
    return words;
}

/* model/numbers.c: numbers in place, and the plain digits put back give the sentence
 * back; the alignment through them word for word */
static void check_numbers(const uint8_t *data, size_t size) {
    dmt_numbers g;
    int r = dmt_numbers_find((const char *)data, size, &g);
    if (r <= 0) {
        REQUIRE(g.n == 0 && !g.items, "no numbers, yet a list");
        return;
    }
    size_t pos = 0;
    for (int k = 0; k < g.n; k++) {
        const dmt_grouped_number *x = &g.items[k];
        REQUIRE(x->at >= pos && x->at + x->len <= size && x->digits >= 4 && x->digits + x->decimals < x->len,
                "number %d out of place", k);
        pos = x->at + x->len;
    }
    size_t n = 0, m = 0;
    char *input = dmt_numbers_strip((const char *)data, size, &g, &n);
    REQUIRE(input && n < size, "strip");
    int *placed = malloc((size_t)g.n * sizeof *placed);
    REQUIRE(placed, "out of memory");
    char *back = dmt_numbers_restore(input, n, &g, &m, placed, NULL);
    REQUIRE(back && m == size && !memcmp(back, data, size), "restore(strip(text)) is not text");
    static const char *const langs[] = {"en", "de", "fr", "cs"};
    for (int l = 0; l < 4; l++) { /* in a language's style: the same digits in the same places */
        size_t styled_len = 0, a = 0, b = 0;
        char *styled = dmt_numbers_restore(input, n, &g, &styled_len, NULL, dmt_numbers_style(langs[l]));
        REQUIRE(styled, "styled restore");
        for (; a < size || b < styled_len; a++, b++) {
            while (a < size && !(data[a] >= '0' && data[a] <= '9')) a++;
            while (b < styled_len && !(styled[b] >= '0' && styled[b] <= '9')) b++;
            REQUIRE((a < size) == (b < styled_len) && (a >= size || data[a] == (uint8_t)styled[b]),
                    "%s: digits differ", langs[l]);
        }
        free(styled);
    }
    /* the stripped text aligned to itself word by word is the text aligned to itself */
    int model_words = count_words(input, n), words = count_words((const char *)data, size);
    int *diagonal = malloc((size_t)(model_words ? model_words : 1) * 2 * sizeof *diagonal), *pairs = NULL, n_pairs = 0;
    REQUIRE(diagonal, "out of memory");
    for (int w = 0; w < model_words; w++) diagonal[2 * w] = diagonal[2 * w + 1] = w;
    REQUIRE(dmt_numbers_map_pairs(&g, placed, diagonal, model_words, &pairs, &n_pairs) == 0, "map_pairs failed");
    REQUIRE(n_pairs == words, "%d pairs for %d words", n_pairs, words);
    for (int q = 0; q < n_pairs; q++)
        REQUIRE(pairs[2 * q] == q && pairs[2 * q + 1] == q, "pair %d is %d-%d", q, pairs[2 * q], pairs[2 * q + 1]);
    free(pairs);
    free(diagonal);
    free(placed);
    free(input);
    free(back);
    dmt_numbers_clear(&g);
}

/* model/placeholders.c: placeholders in place, numbered apart from the text's own
 * numbers; the numbers put back give the sentence back, with the same words */
static void check_placeholders(const uint8_t *data, size_t size) {
    dmt_placeholders p;
    int r = dmt_placeholders_find((const char *)data, size, &p);
    if (r <= 0) {
        REQUIRE(p.n == 0 && !p.items && r == 0, "no placeholders, yet a list");
        return;
    }
    size_t pos = 0;
    for (int k = 0; k < p.n; k++) {
        REQUIRE(p.items[k].at >= pos && p.items[k].len > 0 && p.items[k].at + p.items[k].len <= size,
                "placeholder %d out of place", k);
        pos = p.items[k].at + p.items[k].len;
    }
    size_t n = 0, m = 0;
    char *input = dmt_placeholders_strip(&p, &n);
    REQUIRE(input && input[n] == 0, "strip");
    REQUIRE(count_words(input, n) == count_words((const char *)data, size), "strip changed the words");
    char *back = dmt_placeholders_restore(&p, input, n, &m);
    REQUIRE(back && m == size && !memcmp(back, data, size), "restore(strip(text)) is not text");
    free(back);
    back = dmt_placeholders_restore(&p, "", 0, &m); /* nothing translated: every placeholder appended */
    REQUIRE(back && strlen(back) == m, "restore of an empty translation");
    free(back);
    free(input);
    dmt_placeholders_clear(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static dmt_span spans[MAX_SPANS + 1];
    static int32_t ids[MAX_IDS];
    check_utf8(data, size);
    int n = check_sentences(data, size, spans);
    if (n > 0) check_detect(&detect_cfg, data, spans, n < MAX_SPANS ? n : MAX_SPANS);
    for (int i = 0; i < n && i < 8 && i < MAX_SPANS; i++) check_chunks(data, size, &spans[i]);
    check_tokenizer(tokenizers[size % 3 == 2], data, size, ids);
    check_passthrough(data, size, 0);
    check_passthrough(data, size, 1);
    check_scripts(data, size);
    check_verbatim(data, size);
    check_marks(data, size);
    check_numbers(data, size);
    check_placeholders(data, size);
    return 0;
}
