/* numbers.h — numbers with several group separators ("1,500,000", "3.250.000,50",
 * "1'234'567", "1 500 000") given to the model as plain digits and put back as the
 * source wrote them (numbers.c; translate.c applies it with decoding.copy_numbers).
 *
 * copy_numbers makes the model write each run of digits as the source has it, but
 * leaves the separators between runs to it, and a number of three runs came out
 * with mixed ones, which change its value: "1,500,000" -> "1,500.000" (German) or
 * "1,500 000" (French), "3,250,000,000 euros" -> "3,250 000 eur ... 000 euros". So
 * a number of 1-3 digits and two or more groups of three, all after the same
 * separator (',' '.' '\'', a no-break or thin space U+00A0 / U+202F / U+2009, or
 * one plain space as French and Czech are often typed), with an optional decimal
 * part after the other of ',' '.', reaches the model as one run ("1500000",
 * "3250000,50"), which copy_numbers then makes it write whole; where the
 * translation has that run (and the same decimals, after '.' or ','), the number
 * goes back as the source wrote it. A number whose digits another number of the
 * sentence also has (written otherwise) is left to the model. So is one group
 * ("6,000", which the model localises well: "6.000", "6 000") unless decimals
 * follow after the other separator ("2,500.50", which the model had written
 * "2,500,50" in French and Czech).
 *
 * Such a number's value is plain whatever the language: two separators alike group,
 * and the other one is the decimal point. So where the target language is one of
 * dmt_numbers_style's, the number goes back written as that language writes it
 * ("1,500,000.50" -> German "1.500.000,50", French "1 500 000,50"), as a reader
 * there expects; a number grouped with plain spaces (a phone number may be) or
 * one that may be an IPv4 address ("10.100.200.250") goes back as written, and so
 * does every number for other languages.
 *
 * Grouped with plain spaces, "1 500 000" is three words in the sentence and the
 * translation but one for the model: dmt_numbers_map_pairs turns the model's word
 * alignment into the sentence's and translation's words. The model had read such
 * a number as several ("3 250 000 000 euros" -> "3,250,000 euros. 000 euros.",
 * German "1 500 000" -> French "1,500 000"). A phone number ("777 123 456") is
 * one too, and goes back as written.
 */
#ifndef DEEPMT_MODEL_NUMBERS_H
#define DEEPMT_MODEL_NUMBERS_H

#include <stddef.h>

typedef struct {
    size_t at, len;       /* the number as written, in the sentence */
    size_t digits;        /* its integer digits */
    size_t decimals;      /* its decimal digits (0: none) */
    size_t plain_at;      /* its integer digits, then its decimal digits, in dmt_numbers.plain */
    int word;             /* the whitespace-separated word it starts in, from 0 */
    int spaces;           /* plain spaces in it: words it has beyond its first */
    int as_written;       /* goes back as written in any style: grouped with plain spaces (a phone
                           * number may be), or four parts of at most 255 after full stops (an
                           * IPv4 address, "192.168.100.200") */
} dmt_grouped_number;

typedef struct {
    char *source;               /* a copy of the sentence; malloc'd */
    char *plain;                /* each number's digits, one after the other; malloc'd */
    int n;
    dmt_grouped_number *items;  /* [n], in the sentence's order; malloc'd */
    int spaced;                 /* numbers grouped with plain spaces (dmt_numbers_map_pairs changes pairs) */
} dmt_numbers;

/* Finds text's grouped numbers: 1 with g filled (free with dmt_numbers_clear), 0
 * when there are none (g empty), -1 when out of memory. */
int dmt_numbers_find(const char *text, size_t len, dmt_numbers *g);

/* text with each number as one run of digits (its decimal separator kept):
 * malloc'd, NUL-terminated, length in *out_len; NULL when out of memory. */
char *dmt_numbers_strip(const char *text, size_t len, const dmt_numbers *g, size_t *out_len);

/* How a language writes numbers (UTF-8 separators). */
typedef struct {
    const char *group, *decimal;
} dmt_number_style;

/* A language's style, CLDR's symbols: "en" 1,234,567.5 (and ja zh ko he th), "de"
 * 1.234.567,5 (and es it nl pt da tr id ro el hr sl vi), "cs" 1 234 567,5 with
 * U+00A0 (and sk pl ru uk sv fi nb no hu bg lt lv et), "fr" with U+202F; NULL for
 * others (numbers go back as written). */
const dmt_number_style *dmt_numbers_style(const char *lang);

/* tr with each run of digits that is a number's (and its decimals) written as the
 * source wrote that number, or in style (not NULL) unless it goes as_written;
 * each number once, in the translation's order: malloc'd, NUL-terminated, length
 * in *out_len; NULL when out of memory. placed (NULL, or [g->n]) gets the word of
 * tr each number went into, -1 where it did not. */
char *dmt_numbers_restore(const char *tr, size_t len, const dmt_numbers *g, size_t *out_len, int *placed,
                          const dmt_number_style *style);

/* Word alignment pairs (source word, target word) between the stripped sentence and
 * a translation before dmt_numbers_restore (placed: its output) into pairs between
 * the sentence and the restored translation: a number's word pairs with each word of
 * the number. *out is malloc'd (in target order, each pair once), its count in
 * *n_out; 0, or -1 when out of memory. */
int dmt_numbers_map_pairs(const dmt_numbers *g, const int *placed, const int *pairs, int n_pairs, int **out,
                          int *n_out);

void dmt_numbers_clear(dmt_numbers *g);

#endif
