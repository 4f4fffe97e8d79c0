/* casing.h — text typed in capitals (translate.h's all-caps rule).
 *
 * A model sees ALL-CAPS text rarely in training, and its pieces for "THE CHILDREN"
 * are rare single letters, so shouted input comes out as garbage. When the rule is
 * on (config.json "decoding": {"all_caps": "lower"}), a sentence with no lower-case
 * letter and at least DMT_CASING_MIN_UPPER upper-case ones is translated in sentence
 * case ("The children are playing in the park.") and its translation is given back
 * in capitals. Case mapping is Unicode's simple one (towlower/towupper in C.UTF-8),
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

/* s with every letter upper-case; malloc'd as above. */
char *dmt_casing_upper(const char *s, size_t len, size_t *out_len);

#endif
