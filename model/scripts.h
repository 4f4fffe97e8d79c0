/* scripts.h — which writing system a letter belongs to, and which ones a language
 * is written in (scripts.c).
 *
 * The pass-through (model/passthrough.h) copies a word the model cannot spell. A
 * vocabulary can hold the letters of a script without the model knowing it: the
 * default model's 16k pieces have every Cyrillic letter, from 22 lines of its
 * training data, and a Russian word comes out as invented German. So a word with a
 * letter of a script none of the model's languages is written in is copied too.
 *
 * Scripts are bits of a dmt_scripts mask. Only letters have a script here: digits,
 * punctuation, symbols, marks and spaces (Unicode's "Common" and "Inherited") have
 * none, and never make a word foreign.
 */
#ifndef DEEPMT_MODEL_SCRIPTS_H
#define DEEPMT_MODEL_SCRIPTS_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t dmt_scripts;

enum {
    DMT_SCRIPT_LATIN, DMT_SCRIPT_GREEK, DMT_SCRIPT_CYRILLIC, DMT_SCRIPT_ARMENIAN, DMT_SCRIPT_HEBREW,
    DMT_SCRIPT_ARABIC, DMT_SCRIPT_SYRIAC, DMT_SCRIPT_THAANA, DMT_SCRIPT_DEVANAGARI, DMT_SCRIPT_BENGALI,
    DMT_SCRIPT_GURMUKHI, DMT_SCRIPT_GUJARATI, DMT_SCRIPT_ORIYA, DMT_SCRIPT_TAMIL, DMT_SCRIPT_TELUGU,
    DMT_SCRIPT_KANNADA, DMT_SCRIPT_MALAYALAM, DMT_SCRIPT_SINHALA, DMT_SCRIPT_THAI, DMT_SCRIPT_LAO,
    DMT_SCRIPT_TIBETAN, DMT_SCRIPT_MYANMAR, DMT_SCRIPT_GEORGIAN, DMT_SCRIPT_HANGUL, DMT_SCRIPT_ETHIOPIC,
    DMT_SCRIPT_KHMER, DMT_SCRIPT_MONGOLIAN, DMT_SCRIPT_KANA, DMT_SCRIPT_BOPOMOFO, DMT_SCRIPT_HAN,
    DMT_SCRIPT_COUNT
};

#define DMT_SCRIPT_BIT(s) ((dmt_scripts)1 << (s))

/* The script of code point c (DMT_SCRIPT_*), or -1 when it is no letter of a
 * script listed here (ASCII digits and punctuation, symbols, combining marks, and
 * letters of scripts left out, such as Cherokee: those make no word foreign). */
int dmt_script_of(long c);

/* The scripts a language is written in, by its code: an ISO 639 code with an
 * optional region or script subtag ("de", "pt-BR", "sr-Latn", "zh_Hant"), or one
 * of LibreTranslate's own ("zt", "pb"). A script subtag decides alone. 0 when the
 * code is one this table does not know. */
dmt_scripts dmt_language_scripts(const char *code);

/* The ASCII letters that are words on their own in a language, lower-case ("ai" for
 * English: "a", "I"; "aikosuvz" for Czech; "" for German), or NULL when the table
 * does not know the language. Any other letter alone ("x", "n", "Plan B") is a
 * name, a variable or a label, which a small model drops or mangles. */
const char *dmt_language_letter_words(const char *code);

/* 1 when the len bytes of UTF-8 at s hold a letter of a script outside `known`,
 * else 0. Reading stops at the first invalid UTF-8 sequence. */
int dmt_scripts_foreign_letter(const char *s, size_t len, dmt_scripts known);

#endif
