/* casing.h — text typed in capitals (translate.h's all-caps rule).
 *
 * A model sees ALL-CAPS text rarely in training, and its pieces for "THE CHILDREN"
 * are rare single letters, so shouted input comes out as garbage. When the rule is
 * on (config.json "decoding": {"all_caps": "lower"}), a sentence with no lower-case
 * letter and at least DMT_CASING_MIN_UPPER upper-case ones is translated in sentence
 * case ("The children are playing in the park.", names and German nouns capitalised
 * where the model's vocabulary says so: dmt_casing_true_case) and its translation is
 * given back in capitals. Case mapping is Unicode's simple one (towlower/towupper in C.UTF-8),
 * so accented letters of every model language map too (É, Č, Ř, Ü, ...).
 */
#ifndef DEEPMT_MODEL_CASING_H
#define DEEPMT_MODEL_CASING_H

#include <stddef.h>

#define DMT_CASING_MIN_UPPER 4 /* "OK" or "USA" alone stays as it is */

/* 1 when the len bytes of UTF-8 at s hold no lower-case letter and at least
 * DMT_CASING_MIN_UPPER upper-case letters. Invalid UTF-8: 0. */
int dmt_casing_is_all_caps(const char *s, size_t len);

/* s in sentence case: every letter lower-case, then the first letter of the text and
 * the first after each ".", "!" or "?" followed by white space upper-case. A
 * malloc'd NUL-terminated string (*out_len its length), or NULL (out of memory or
 * invalid UTF-8). */
char *dmt_casing_sentence_case(const char *s, size_t len, size_t *out_len);

/* Says whether the vocabulary holds word (UTF-8, len bytes) as a whole piece. */
typedef int (*dmt_casing_known_fn)(void *arg, const char *word, size_t len);

/* s in sentence case, then "true case" by the vocabulary: a word (its run of
 * letters after any leading punctuation) in lower case is capitalised when known
 * says its capitalised form is a whole piece and its lower-case form is not, the
 * trace a name or a German noun leaves in a vocabulary learnt from cased text
 * ("I SAW TOM" -> "I saw Tom", "DER HUND SCHLÄFT" -> "Der Hund schläft"). NULL
 * known: plain sentence case. malloc'd as above. */
char *dmt_casing_true_case(const char *s, size_t len, size_t *out_len, dmt_casing_known_fn known, void *arg);

/* s with every letter upper-case; malloc'd as above. */
char *dmt_casing_upper(const char *s, size_t len, size_t *out_len);

/* s with every letter lower-case; malloc'd as above. */
char *dmt_casing_lower(const char *s, size_t len, size_t *out_len);

#endif
