/* placeholders.h — the format placeholders of software strings ("Delete %d files?",
 * "Hello {name}", "Saved %1$s to %2$s.") kept whole and moved with the sentence
 * (placeholders.c; translate.c applies it with decoding.placeholders).
 *
 * Localisation tools ask a translation server for strings with placeholders, and a
 * string whose placeholders come back changed breaks the program that formats it.
 * The model mangled them: "Delete %d files?" -> "Verletzte Flührungen?", "Could not
 * open %s: %s" -> "Könnte die % nicht öffnen:%", "Saved %1$s to %2$s." -> "Saved%1 $
 * bis zu%2 Dollar.". Kept out of the model as pass-through spans they would come
 * back whole, but placed after the word before them, where the target's word order
 * often wants them elsewhere ("%d Dateien löschen?").
 *
 * So each placeholder reaches the model as a number the sentence does not hold
 * (201, 202, ...; one per placeholder, in order), which the model places as the
 * grammar of the target wants and copies (decoding.copy_numbers lets it write no
 * other digits), and each such number in the translation goes back to its
 * placeholder; a placeholder whose number the translation lacks goes at its end,
 * before the closing punctuation, so that none is ever lost. A placeholder is:
 * - printf's: '%', an optional argument number and '$' ("%1$s") or a name in
 *   parentheses ("%(count)d"), flags "-+#0'", a width and a precision (digits or
 *   '*'), a length (hh h l ll L q j z t), and a conversion d i o u x X e E f F g G a A
 *   c s p n @; it may touch letters ("file%d.png", "%dx%d");
 * - Qt's and Windows' "%1" to "%999", Ruby's "%{name}", LibreOffice's "%PRODUCTNAME"
 *   and "$(ARG1)", Windows' "%APPDATA%";
 * - a braced name: "{}", "{0}", "{name}", "{name:fmt}", "{{name}}", "${name}" (letters,
 *   digits and _ . - : inside, no space);
 * these end where a word's letters do ("%1st" is none), and none touches a digit
 * (its number would run on: "5%d" is none).
 * Placeholders side by side, and a printf "%%" (a literal percent sign) beside one,
 * are one ("(%d%%)" -> "(201)"): their numbers would run together; in a sentence
 * with printf's placeholders a "%%" alone is one too ("Volume: %i %%"). Not "50%",
 * not "% d" (French "100 % d'entre eux": no space flag), not "$5", not "{{x}" or
 * "%%s" (escapes).
 */
#ifndef DEEPMT_MODEL_PLACEHOLDERS_H
#define DEEPMT_MODEL_PLACEHOLDERS_H

#include <stddef.h>

typedef struct {
    size_t at, len;      /* the placeholder in the sentence */
    char number[12];     /* what the model reads in its place, e.g. "201" */
} dmt_placeholder;

typedef struct {
    char *source;             /* a copy of the sentence (NUL-terminated, may hold NULs); malloc'd */
    size_t source_len;
    int n;
    dmt_placeholder *items;   /* [n], in the sentence's order; malloc'd */
} dmt_placeholders;

/* Finds the placeholders of text[0..len) into *p (zeroed first): their count, 0 for
 * none (p holds nothing), or -1 when out of memory. At most 64 a sentence; more are
 * left as text. */
int dmt_placeholders_find(const char *text, size_t len, dmt_placeholders *p);

/* The sentence with each placeholder replaced by its number; malloc'd,
 * NUL-terminated, its length in *out_len; NULL when out of memory. */
char *dmt_placeholders_strip(const dmt_placeholders *p, size_t *out_len);

/* A translation of the stripped sentence with every one of p's numbers (a whole
 * run of digits) made its placeholder again, and the placeholders whose number it
 * lacks added at its end before its closing punctuation; malloc'd, NUL-terminated,
 * its length in *out_len; NULL when out of memory. */
char *dmt_placeholders_restore(const dmt_placeholders *p, const char *tr, size_t tr_len, size_t *out_len);

void dmt_placeholders_clear(dmt_placeholders *p);

#endif
